-- ql.prepare_task(p_project text, p_task text) -> jsonb {taskId, created}
--
-- Purpose: the id of task P/T, creating the project and the task (in the
--   project's default pool, without a revision) when missing (SPEC §16.1). A
--   signed publish signs {taskId, kind, executor, spec, placement?}, so it
--   needs the task's id before ql.publish_revision creates the revision; the
--   admin CLI calls this and then ql.publish_revision in ONE transaction, so a
--   task without a revision is never visible on its own (were one left behind,
--   an enqueue refuses it: QL001, no published revision).
-- Inputs: p_project, p_task (names ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$).
-- Fences: the name patterns.
-- Writes: the project (and its default pool, by trigger) and the task rows when
--   missing; nothing for an existing task.
-- Locks: none beyond the inserts (ON CONFLICT DO NOTHING, then a re-read: a
--   concurrent creator wins and this call answers its row).
-- Idempotency: an existing task -> its id, created=false, no writes.
-- Errors: QL001 bad project/task name.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.prepare_task(p_project text, p_task text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name_pattern constant text := '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    v_project_id uuid;
    v_task_id uuid;
BEGIN
    IF p_project IS NULL OR p_project !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = format('project must match %s', v_name_pattern);
    END IF;
    IF p_task IS NULL OR p_task !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'task',
            MESSAGE = format('task must match %s', v_name_pattern);
    END IF;
    SELECT tk.id INTO v_task_id
      FROM ql_private.projects p
      JOIN ql_private.tasks tk ON tk.project_id = p.id AND tk.name = p_task
     WHERE p.name = p_project;
    IF FOUND THEN
        RETURN jsonb_build_object('taskId', v_task_id, 'created', false);
    END IF;
    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    -- pool_id NULL: the project's default pool (tasks_default_pool trigger).
    INSERT INTO ql_private.tasks (project_id, name) VALUES (v_project_id, p_task)
    ON CONFLICT (project_id, name) DO NOTHING
    RETURNING id INTO v_task_id;
    IF v_task_id IS NOT NULL THEN
        RETURN jsonb_build_object('taskId', v_task_id, 'created', true);
    END IF;
    SELECT tk.id INTO STRICT v_task_id FROM ql_private.tasks tk
     WHERE tk.project_id = v_project_id AND tk.name = p_task;
    RETURN jsonb_build_object('taskId', v_task_id, 'created', false);
END
$$;
REVOKE ALL ON FUNCTION ql.prepare_task(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.prepare_task(text, text) TO ql_runtime;
