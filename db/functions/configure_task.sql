-- ql.configure_task(p_task_id text, p_lease_ttl_s integer DEFAULT NULL,
--                   p_max_attempts integer DEFAULT NULL,
--                   p_retry_base_ms integer DEFAULT NULL,
--                   p_retry_cap_ms integer DEFAULT NULL,
--                   p_enabled boolean DEFAULT NULL,
--                   p_log_limit_bytes integer DEFAULT NULL) -> jsonb
--
-- Purpose: change a task's run policy (SPEC §9.1 `admin task configure`, also
--   the flags of `admin task publish`). NULL leaves a setting unchanged. Returns
--   the resulting settings, the object of ql.task_settings: {taskId, leaseTtlS,
--   maxAttempts, retryBaseMs, retryCapMs, enabled, logLimitBytes}.
--   New settings apply to attempts claimed afterwards: the claim reads the
--   lease TTL and the log cap (logLimitBytes, SPEC §15.2) from the task and
--   pins them on the lease (ql_private.claim_candidate), the retry policy reads
--   max attempts and backoff when an attempt ends (ql_private.apply_retry);
--   nothing is copied at enqueue. A disabled task refuses new enqueues
--   (ql.enqueue_runs); runs already queued stay queued.
-- Inputs: p_task_id (lowercase canonical UUID); bounds of the given values:
--   p_lease_ttl_s 5..86400 (leaseTtlS), p_max_attempts 1..100 (maxAttempts),
--   p_retry_base_ms 100..3600000 (retryBaseMs), p_retry_cap_ms
--   retryBaseMs..86400000 (retryCapMs), the cap checked against the resulting
--   base when either is given (a base raised above the stored cap is reported
--   on retryBaseMs when no cap is given), p_log_limit_bytes 1024..67108864
--   (logLimitBytes).
-- Fences: the task exists.
-- Writes: the task row (only when something changes). No event: events are run
--   facts, and nothing secret is involved.
-- Locks: the task row FOR NO KEY UPDATE (two configures of one task serialize,
--   so the base/cap pair is checked on what is stored).
-- Idempotency: the same call twice leaves the same settings.
-- Errors: QL001 malformed task id (COLUMN taskId); QL006 a value out of its
--   bounds (COLUMN = its wire field); QL004 unknown task (COLUMN taskId);
--   nothing is changed on any error.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.configure_task(
    p_task_id text,
    p_lease_ttl_s integer DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_retry_base_ms integer DEFAULT NULL,
    p_retry_cap_ms integer DEFAULT NULL,
    p_enabled boolean DEFAULT NULL,
    p_log_limit_bytes integer DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
    v_base integer;
    v_cap integer;
BEGIN
    IF p_lease_ttl_s NOT BETWEEN 5 AND 86400 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'leaseTtlS',
            MESSAGE = 'leaseTtlS must be between 5 and 86400';
    END IF;
    IF p_max_attempts NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'maxAttempts',
            MESSAGE = 'maxAttempts must be between 1 and 100';
    END IF;
    IF p_retry_base_ms NOT BETWEEN 100 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryBaseMs',
            MESSAGE = 'retryBaseMs must be between 100 and 3600000';
    END IF;
    IF p_retry_cap_ms NOT BETWEEN 100 AND 86400000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryCapMs',
            MESSAGE = 'retryCapMs must be between retryBaseMs and 86400000';
    END IF;
    IF p_log_limit_bytes NOT BETWEEN 1024 AND 67108864 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'logLimitBytes',
            MESSAGE = 'logLimitBytes must be between 1024 and 67108864';
    END IF;

    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    v_base := coalesce(p_retry_base_ms, v_task.retry_base_ms);
    v_cap := coalesce(p_retry_cap_ms, v_task.retry_cap_ms);
    IF (p_retry_base_ms IS NOT NULL OR p_retry_cap_ms IS NOT NULL) AND v_cap < v_base THEN
        IF p_retry_cap_ms IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryCapMs',
                MESSAGE = format('retryCapMs must be between retryBaseMs (%s) and 86400000',
                                 v_base);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryBaseMs',
            MESSAGE = format('retryBaseMs must be between 100 and retryCapMs (%s)', v_cap);
    END IF;

    IF (coalesce(p_lease_ttl_s, v_task.lease_ttl_seconds),
        coalesce(p_max_attempts, v_task.max_attempts), v_base, v_cap,
        coalesce(p_enabled, v_task.enabled),
        coalesce(p_log_limit_bytes, v_task.log_limit_bytes))
       IS DISTINCT FROM
       (v_task.lease_ttl_seconds, v_task.max_attempts, v_task.retry_base_ms,
        v_task.retry_cap_ms, v_task.enabled, v_task.log_limit_bytes) THEN
        UPDATE ql_private.tasks tk
           SET lease_ttl_seconds = coalesce(p_lease_ttl_s, tk.lease_ttl_seconds),
               max_attempts = coalesce(p_max_attempts, tk.max_attempts),
               retry_base_ms = v_base,
               retry_cap_ms = v_cap,
               enabled = coalesce(p_enabled, tk.enabled),
               log_limit_bytes = coalesce(p_log_limit_bytes, tk.log_limit_bytes)
         WHERE tk.id = v_task_id
        RETURNING tk.* INTO v_task;
    END IF;
    RETURN jsonb_build_object(
        'taskId', v_task.id, 'leaseTtlS', v_task.lease_ttl_seconds,
        'maxAttempts', v_task.max_attempts, 'retryBaseMs', v_task.retry_base_ms,
        'retryCapMs', v_task.retry_cap_ms, 'enabled', v_task.enabled,
        'logLimitBytes', v_task.log_limit_bytes);
END
$$;
REVOKE ALL ON FUNCTION ql.configure_task(text, integer, integer, integer, integer, boolean, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.configure_task(text, integer, integer, integer, integer, boolean, integer)
    TO ql_runtime;
