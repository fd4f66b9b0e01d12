-- ql_private.producer_task(p_project_id uuid, p_task text) -> uuid
--
-- Purpose: the task a producer names, confined to the token's project (SPEC
--   §13.4): either a task id (lowercase canonical UUID) or "<project>/<name>".
--   Another project's task, by id or by name, is answered exactly like an
--   unknown one (QL004, COLUMN task).
-- Inputs: p_project_id (from ql_private.producer_token), p_task.
-- Fences: tasks.project_id = p_project_id.
-- Writes: none. Locks: none.
-- Errors: QL001 p_task neither a UUID nor "<project>/<name>" (COLUMN task);
--   QL004 unknown or foreign task (COLUMN task).
-- Caller: ql.producer_enqueue, ql.producer_list_runs.
CREATE OR REPLACE FUNCTION ql_private.producer_task(p_project_id uuid, p_task text)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_task_id uuid;
    v_parts text[];
BEGIN
    IF p_task ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        SELECT t.id INTO v_task_id FROM ql_private.tasks t
         WHERE t.id = p_task::uuid AND t.project_id = p_project_id;
    ELSIF p_task ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        v_parts := string_to_array(p_task, '/');
        SELECT t.id INTO v_task_id
          FROM ql_private.projects p JOIN ql_private.tasks t ON t.project_id = p.id
         WHERE p.id = p_project_id AND p.name = v_parts[1] AND t.name = v_parts[2];
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'task',
            MESSAGE = 'task must be a task id or "<project>/<name>"';
    END IF;
    IF v_task_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'task', MESSAGE = 'task not found';
    END IF;
    RETURN v_task_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.producer_task(uuid, text) FROM PUBLIC;
