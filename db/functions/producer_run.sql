-- ql_private.producer_run(p_project_id uuid, p_run_id text) -> uuid
--
-- Purpose: a run a producer names must belong to the token's project (SPEC
--   §13.4). Another project's run is answered exactly like an unknown one (QL004
--   not_found, never a 403): existence is not disclosed.
-- Inputs: p_project_id (from ql_private.producer_token), p_run_id (lowercase
--   canonical UUID).
-- Fences: runs.project_id = p_project_id.
-- Writes: none. Locks: none (the action the caller runs next locks the run).
-- Errors: QL001 malformed run id (COLUMN runId); QL004 unknown or foreign run
--   (COLUMN runId).
-- Caller: ql.producer_cancel_run, ql.producer_retry_run, ql.producer_run_log,
--   ql.producer_show_run.
CREATE OR REPLACE FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ql_private.runs r
                    WHERE r.id = v_run_id AND r.project_id = p_project_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    RETURN v_run_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.producer_run(uuid, text) FROM PUBLIC;
