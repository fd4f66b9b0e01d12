-- ql.cancel_run(p_run_id text) -> jsonb {runId, state, cancelRequested}
--
-- Purpose: cancel a run (SPEC §7, §8 `admin run cancel`).
--   * queued/dispatching and no started live lease: cancelled now. The run ->
--     'cancelled' (finished_at, cancel_requested), its current attempt ->
--     'cancelled' (unless already terminal), a live unstarted lease released with
--     reason 'cancelled' (the pending offer then recovers as lease_terminal), one
--     `run.cancelled` event.
--   * started (starting/running, or a started live lease): the worker must stop
--     it, so only cancel_requested = true and one `run.cancel_requested` event;
--     the worker learns it from its lease heartbeat.
--   * terminal (succeeded/failed/cancelled), or cancel already requested: returns
--     the state unchanged and writes nothing.
-- Inputs: p_run_id (lowercase canonical UUID).
-- Fences: none beyond the run's own state (the control plane is trusted).
-- Writes: as above: at most the run, its current attempt, its live lease and one
--   event, whose payload names the acting database role (`actor`: session_user,
--   the login role that called; inside SECURITY DEFINER current_user is the
--   owner) (SPEC §9.5).
-- Locks, in the pull path's order so the two cannot deadlock: the current
--   attempt FOR UPDATE (a concurrent claim, which locks it with SKIP LOCKED,
--   either finished first or skips this run), then the run FOR NO KEY UPDATE,
--   then the live lease (UPDATE) (ql_private.lock_run_attempt). If the run
--   moved to another attempt between reading and locking, those locks are
--   rolled back and it starts again with the new attempt (never attempt after
--   run).
-- Idempotency: yes (see terminal case); a second call never adds an event.
-- Errors: QL001 malformed run id; QL004 unknown run.
-- Caller: ql_runtime (control plane), ql.producer_cancel_run.
CREATE OR REPLACE FUNCTION ql.cancel_run(p_run_id text)
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
    v_live ql_private.run_leases;
    v_now timestamptz;
BEGIN
    v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
    v_run := v_locked.run;
    v_attempt := v_locked.attempt;
    IF v_run.id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'run not found';
    END IF;
    v_attempt_id := v_attempt.id;

    IF v_run.state IN ('succeeded', 'failed', 'cancelled') THEN
        RETURN jsonb_build_object('runId', v_run.id, 'state', v_run.state,
                                  'cancelRequested', v_run.cancel_requested);
    END IF;

    SELECT l.* INTO v_live FROM ql_private.run_leases l
     WHERE l.attempt_id = v_attempt.id AND l.released_at IS NULL;
    v_now := clock_timestamp();

    IF v_run.state IN ('queued', 'dispatching') AND v_live.started_at IS NULL THEN
        IF v_live.id IS NOT NULL THEN
            UPDATE ql_private.run_leases l
               SET released_at = v_now, release_reason = 'cancelled', updated_at = v_now
             WHERE l.id = v_live.id;
        END IF;
        IF v_attempt.id IS NOT NULL
           AND v_attempt.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
            UPDATE ql_private.attempts att
               SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
                   finished_at = v_now
             WHERE att.id = v_attempt.id;
        END IF;
        UPDATE ql_private.runs rr
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
         WHERE rr.id = v_run.id
        RETURNING rr.* INTO v_run;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancelled', v_run.id, v_attempt.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id,
            'offerId', v_live.offer_id,
            'leaseReleased', v_live.id IS NOT NULL,
            'actor', session_user)));
    ELSIF v_run.cancel_requested THEN
        NULL;  -- already requested: no second write, no second event
    ELSE
        UPDATE ql_private.runs rr
           SET cancel_requested = true, updated_at = v_now
         WHERE rr.id = v_run.id
        RETURNING rr.* INTO v_run;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancel_requested', v_run.id, v_attempt.id,
                jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id,
            'state', v_run.state,
            'offerId', v_live.offer_id,
            'actor', session_user)));
    END IF;
    RETURN jsonb_build_object('runId', v_run.id, 'state', v_run.state,
                              'cancelRequested', v_run.cancel_requested);
END
$$;
REVOKE ALL ON FUNCTION ql.cancel_run(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.cancel_run(text) TO ql_runtime;
