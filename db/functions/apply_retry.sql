-- ql_private.apply_retry(run_id uuid, attempt_id uuid, reason text) -> text
--
-- Purpose: the bounded retry policy (SPEC §7), applied after the run's current
--   attempt ended without success (failed start, failed completion, lost lease).
--   First match wins:
--   * the run is cancel-requested: no new attempt; run -> 'cancelled'
--     (finished_at), one `run.cancelled` event. Returns 'cancelled'.
--   * attempt_no < the ended attempt's max_attempts: a new attempt attempt_no
--     + 1 (state 'claimed', same executor; the task's retry policy as
--     configured now pinned on it), not_before = clock_timestamp() +
--     full-jitter exponential backoff: min(retry_cap_ms, retry_base_ms *
--     2^(attempt_no - 1)) * random() milliseconds, with the ended attempt's
--     own pinned base and cap (a task configure reaches only attempts created
--     after it, SPEC §9.1); runs.current_attempt_id -> the new attempt, run ->
--     'queued' with due_at = that not_before when it is in the future (a
--     scheduled run: out of the candidate keyset, found through runs_due once
--     due and promoted by the sweeper; NULL = ready at once), one
--     `run.retry_scheduled` event (attempt_id = the new attempt; payload
--     previousAttemptId, attemptNo, reason, delayMs, notBeforeMs). Returns
--     'retried'.
--   * otherwise: run -> 'failed' (finished_at), one `run.failed` event. Returns
--     'failed'.
-- Preconditions (the caller's job, checked here as a guard): the caller holds the
--   attempt row FOR UPDATE and the run row FOR NO KEY UPDATE, the attempt is the
--   run's current attempt and already terminal (failed|lost|cancelled), and the
--   run is not terminal. The UNIQUE (run_id, attempt_no) constraint makes a
--   double retry of one attempt impossible even if a caller forgot its locks.
-- Caller: ql.ack_lease (start_failed), ql.complete_lease (failed),
--   ql.sweep_leases (lost). Locks: none of its own beyond the rows it writes.
-- Idempotency: none by itself; callers only reach it once per attempt because
--   the attempt leaves its live state in the same transaction.
-- SQLSTATEs: QL020 when the preconditions do not hold (a caller bug: nothing
--   is written).
CREATE OR REPLACE FUNCTION ql_private.apply_retry(
    p_run_id uuid,
    p_attempt_id uuid,
    p_reason text
)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r ql_private.runs;
    a ql_private.attempts;
    t ql_private.tasks;
    now_ts timestamptz := clock_timestamp();
    delay_ms bigint;
    next_id uuid;
    not_before timestamptz;
BEGIN
    SELECT * INTO r FROM ql_private.runs rr WHERE rr.id = p_run_id;
    SELECT * INTO a FROM ql_private.attempts aa WHERE aa.id = p_attempt_id;
    IF r.id IS NULL OR a.id IS NULL OR a.run_id <> r.id
       OR r.current_attempt_id IS DISTINCT FROM a.id
       OR r.state IN ('succeeded', 'failed', 'cancelled')
       OR a.state NOT IN ('failed', 'lost', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020',
            MESSAGE = 'retry policy applies only to the ended current attempt of a live run';
    END IF;

    IF r.cancel_requested THEN
        UPDATE ql_private.runs rr
           SET state = 'cancelled', finished_at = now_ts, updated_at = now_ts
         WHERE rr.id = r.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancelled', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'reason', p_reason)));
        RETURN 'cancelled';
    END IF;

    -- The ended attempt's own policy, pinned when it was created (SPEC §9.1);
    -- the next attempt pins the task's policy as configured now.
    SELECT * INTO t FROM ql_private.tasks tk WHERE tk.id = r.task_id;
    IF a.attempt_no < a.max_attempts THEN
        delay_ms := floor(least(a.retry_cap_ms::float8,
                                a.retry_base_ms::float8 * power(2::float8, a.attempt_no - 1))
                          * random())::bigint;
        not_before := now_ts + make_interval(secs => delay_ms / 1000.0);
        next_id := gen_random_uuid();
        INSERT INTO ql_private.attempts (
            id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
            max_attempts, retry_base_ms, retry_cap_ms)
        VALUES (next_id, r.id, a.attempt_no + 1, a.executor, 'claimed', not_before,
                now_ts, now_ts, t.max_attempts, t.retry_base_ms, t.retry_cap_ms);
        -- A backoff in the future schedules the run (runs_due, SPEC §9.2) instead
        -- of leaving it in the candidate keyset, where a head of runs in backoff
        -- would be walked row by row by every pull.
        UPDATE ql_private.runs rr
           SET current_attempt_id = next_id, state = 'queued', updated_at = now_ts,
               due_at = CASE WHEN not_before > now_ts THEN not_before END
         WHERE rr.id = r.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.retry_scheduled', r.id, next_id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', next_id,
            'attemptNo', a.attempt_no + 1,
            'previousAttemptId', a.id,
            'reason', p_reason,
            'delayMs', delay_ms,
            'notBeforeMs', ql_private.epoch_ms(not_before))));
        RETURN 'retried';
    END IF;

    UPDATE ql_private.runs rr
       SET state = 'failed', finished_at = now_ts, updated_at = now_ts
     WHERE rr.id = r.id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.failed', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
        'attemptId', a.id, 'attemptNo', a.attempt_no, 'maxAttempts', a.max_attempts,
        'reason', p_reason)));
    RETURN 'failed';
END
$$;
REVOKE ALL ON FUNCTION ql_private.apply_retry(uuid, uuid, text) FROM PUBLIC;
