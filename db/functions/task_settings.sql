-- ql.task_settings(p_task_id text) -> jsonb
--
-- Purpose: a task's run policy (SPEC §9.1): {taskId, leaseTtlS, maxAttempts,
--   retryBaseMs, retryCapMs, enabled, logLimitBytes} — the object
--   ql.configure_task returns (logLimitBytes: the live-log cap, SPEC §15.2).
-- Inputs: p_task_id (lowercase canonical UUID).
-- Fences: none (an operator's read).
-- Writes: none. Locks: none. Idempotency: read-only (one primary-key probe).
-- Errors: QL001 malformed task id (COLUMN taskId); QL004 unknown task (COLUMN
--   taskId).
-- Caller: ql_readonly, ql_runtime.
CREATE OR REPLACE FUNCTION ql.task_settings(p_task_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
BEGIN
    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    RETURN jsonb_build_object(
        'taskId', v_task.id, 'leaseTtlS', v_task.lease_ttl_seconds,
        'maxAttempts', v_task.max_attempts, 'retryBaseMs', v_task.retry_base_ms,
        'retryCapMs', v_task.retry_cap_ms, 'enabled', v_task.enabled,
        'logLimitBytes', v_task.log_limit_bytes);
END
$$;
REVOKE ALL ON FUNCTION ql.task_settings(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.task_settings(text) TO ql_readonly, ql_runtime;
