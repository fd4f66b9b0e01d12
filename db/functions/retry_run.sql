-- ql.retry_run(p_run_id text) -> jsonb {runId, attemptId, attemptNo, state}
--
-- Purpose: the operator's retry (SPEC §9.5 `admin run retry`): a run that ended
--   `failed` (its last attempt failed or was lost with no attempt left) or
--   `cancelled` gets a new attempt (attempt_no = the run's highest + 1, state
--   `claimed`, the previous attempt's executor, not_before now) and is queued
--   again at once: state `queued`, current_attempt_id -> the new attempt,
--   cancel_requested reset, finished_at and due_at NULL, its placement class
--   looked up again (ql_private.placement_class_of; unused classes are
--   pruned). The run keeps its pinned revision, priority and queue position
--   (queue_seq). One `run.retried` event (attempt =
--   the new one; payload attemptId, attemptNo, previousAttemptId,
--   previousState, actor). The requeue fires the idle view's 'q' NOTIFY
--   (migration 0005), so idle replicas ask the database again.
-- Inputs: p_run_id (lowercase canonical UUID).
-- Fences: the run is failed or cancelled and holds no live lease; its task is
--   enabled (a disabled task refuses new work, SPEC §9.1: read as enqueue
--   reads it, without a lock on the task).
-- Writes: one attempt (the task's retry policy as configured now pinned on it:
--   max_attempts, retry_base_ms, retry_cap_ms), the run, one event; nothing
--   when refused.
-- Locks: the current attempt FOR UPDATE, then the run FOR NO KEY UPDATE
--   (ql_private.lock_run_attempt: the lifecycle order attempt -> run of
--   ql.cancel_run and the lease calls; a claim, the sweeper and prune never wait
--   for them); when the current attempt moved in between, those locks are
--   rolled back and taken again on the new one.
-- Idempotency: none — each call on a failed/cancelled run adds an attempt; a
--   second call right after the first finds the run queued and is refused.
-- Errors: QL001 malformed run id (COLUMN runId); QL004 unknown run (COLUMN
--   runId); QL020 the run is not failed or cancelled (queued, in flight or
--   succeeded), or still holds a live lease; QL022 task_disabled (COLUMN
--   taskId) the run's task is disabled. Nothing is written on any error.
-- Caller: ql_runtime, ql.producer_retry_run.
CREATE OR REPLACE FUNCTION ql.retry_run(p_run_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
    v_attempt_id uuid;
    v_run ql_private.runs;
    v_attempt ql_private.attempts;
    v_locked record;
    v_next_id uuid := gen_random_uuid();
    v_next_no integer;
    v_now timestamptz;
BEGIN
    v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
    v_run := v_locked.run;
    v_attempt := v_locked.attempt;
    IF v_run.id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    v_attempt_id := v_attempt.id;

    IF v_run.state NOT IN ('failed', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020', COLUMN = 'runId',
            MESSAGE = format('illegal_transition: a %s run cannot be retried '
                             '(only failed or cancelled runs)', v_run.state);
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.run_leases l
                WHERE l.attempt_id = v_attempt_id AND l.released_at IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020', COLUMN = 'runId',
            MESSAGE = 'illegal_transition: the run still holds a live lease';
    END IF;
    -- A disabled task refuses new work (SPEC §9.1), a retry's attempt included.
    IF NOT (SELECT tk.enabled FROM ql_private.tasks tk WHERE tk.id = v_run.task_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL022', COLUMN = 'taskId',
            MESSAGE = 'task_disabled: the run''s task is disabled (enable it to retry)';
    END IF;

    SELECT coalesce(max(a.attempt_no), 0) + 1 INTO v_next_no
      FROM ql_private.attempts a WHERE a.run_id = v_run_id;
    v_now := clock_timestamp();
    INSERT INTO ql_private.attempts (
        id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
        max_attempts, retry_base_ms, retry_cap_ms)
    SELECT v_next_id, v_run_id, v_next_no, coalesce(v_attempt.executor, 'remote_worker'),
           'claimed', v_now, v_now, v_now, tk.max_attempts, tk.retry_base_ms, tk.retry_cap_ms
      FROM ql_private.tasks tk WHERE tk.id = v_run.task_id;
    UPDATE ql_private.runs rr
       SET state = 'queued', current_attempt_id = v_next_id, cancel_requested = false,
           finished_at = NULL, due_at = NULL, updated_at = v_now,
           -- looked up again (not kept): ql.prune_fleet may have removed an
           -- unused class since the run ended; this re-creates it.
           placement_class = ql_private.placement_class_of(rr.execution_revision_id)
     WHERE rr.id = v_run_id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.retried', v_run_id, v_next_id, jsonb_strip_nulls(jsonb_build_object(
        'attemptId', v_next_id,
        'attemptNo', v_next_no,
        'previousAttemptId', v_attempt_id,
        'previousState', v_run.state,
        'actor', session_user)));
    RETURN jsonb_build_object('runId', v_run_id, 'attemptId', v_next_id,
                              'attemptNo', v_next_no, 'state', 'queued');
END
$$;
REVOKE ALL ON FUNCTION ql.retry_run(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.retry_run(text) TO ql_runtime;
