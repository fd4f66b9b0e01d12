-- ql_private.lock_run_attempt(p_run_id uuid) -> (run, attempt)
--
-- Purpose: lock a run and its current attempt for an operator action
--   (ql.cancel_run, ql.retry_run, ql.cancel_runs for a row its first pass
--   could not take), in the one lifecycle lock order attempt -> run
--   (docs/LIFECYCLE.md "Locks"), and return both rows as locked.
--   The current attempt is only known from the run, so it is read first
--   without a lock, then the attempt is locked (FOR UPDATE), then the run (FOR
--   NO KEY UPDATE). When the run moved to another attempt in between (a retry
--   or the retry policy committed while we waited for the old attempt), both
--   locks are given back — they were taken in a sub-block that is rolled back —
--   and it starts again: locking the new attempt while holding the run would
--   take them run -> attempt, and a cancel, retry, ACK or completion holding
--   the new attempt while it waits for the run would close a deadlock with us.
-- Inputs: p_run_id.
-- Returns: run NULL when the run does not exist (the caller raises its own
--   error); attempt NULL when the run has no current attempt.
-- Writes: none. Locks: the current attempt FOR UPDATE, then the run FOR NO KEY
--   UPDATE, both held by the caller's transaction on return; a wait obeys the
--   caller's lock_timeout (55P03 lock_not_available propagates, nothing held
--   from this call).
-- Idempotency: read-only.
-- Errors: none of its own (QLR01 is internal: the moved-attempt signal, caught
--   here, never raised to a caller).
-- Caller: ql.cancel_run, ql.retry_run, ql.cancel_runs.
CREATE OR REPLACE FUNCTION ql_private.lock_run_attempt(
    p_run_id uuid,
    OUT run ql_private.runs,
    OUT attempt ql_private.attempts
)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_attempt_id uuid;
BEGIN
    LOOP
        SELECT rr.current_attempt_id INTO v_attempt_id
          FROM ql_private.runs rr WHERE rr.id = p_run_id;
        IF NOT FOUND THEN
            run := NULL;
            attempt := NULL;
            RETURN;
        END IF;
        BEGIN
            attempt := NULL;
            IF v_attempt_id IS NOT NULL THEN
                SELECT att.* INTO attempt
                  FROM ql_private.attempts att WHERE att.id = v_attempt_id FOR UPDATE;
            END IF;
            SELECT rr.* INTO run FROM ql_private.runs rr WHERE rr.id = p_run_id
               FOR NO KEY UPDATE;
            IF FOUND AND run.current_attempt_id IS DISTINCT FROM v_attempt_id THEN
                RAISE EXCEPTION USING ERRCODE = 'QLR01', MESSAGE = 'current attempt moved';
            END IF;
        EXCEPTION WHEN SQLSTATE 'QLR01' THEN
            CONTINUE;  -- the sub-block's locks are released: read the run again
        END;
        IF run.id IS NULL THEN
            attempt := NULL;  -- deleted (pruned) while we waited
        END IF;
        RETURN;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lock_run_attempt(uuid) FROM PUBLIC;
