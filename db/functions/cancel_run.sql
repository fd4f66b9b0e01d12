-- ql.cancel_run(run_id text) -> jsonb {runId, state, cancelRequested}
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
-- Caller: ql_runtime (control plane).
-- Locks, in the pull path's order so the two cannot deadlock: the current
--   attempt FOR UPDATE (a concurrent claim, which locks it with SKIP LOCKED,
--   either finished first or skips this run), then the run FOR NO KEY UPDATE,
--   then the live lease (UPDATE). If the run moved to another attempt between
--   reading and locking, it retries with the new attempt.
-- Idempotency: yes (see terminal case); a second call never adds an event.
-- SQLSTATEs: QL001 malformed run id; QL004 unknown run.
CREATE OR REPLACE FUNCTION ql.cancel_run(run_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rid uuid := ql_private.parse_uuid(cancel_run.run_id, 'runId');
    v_attempt uuid;
    r ql_private.runs;
    a ql_private.attempts;
    live ql_private.run_leases;
    now_ts timestamptz;
BEGIN
    LOOP
        SELECT rr.current_attempt_id INTO v_attempt FROM ql_private.runs rr WHERE rr.id = rid;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'run not found';
        END IF;
        IF v_attempt IS NOT NULL THEN
            SELECT att.* INTO a FROM ql_private.attempts att WHERE att.id = v_attempt FOR UPDATE;
        END IF;
        SELECT rr.* INTO r FROM ql_private.runs rr WHERE rr.id = rid FOR NO KEY UPDATE;
        EXIT WHEN r.current_attempt_id IS NOT DISTINCT FROM v_attempt;
    END LOOP;

    IF r.state IN ('succeeded', 'failed', 'cancelled') THEN
        RETURN jsonb_build_object('runId', r.id, 'state', r.state,
                                  'cancelRequested', r.cancel_requested);
    END IF;

    SELECT l.* INTO live FROM ql_private.run_leases l
     WHERE l.attempt_id = a.id AND l.released_at IS NULL;
    now_ts := clock_timestamp();

    IF r.state IN ('queued', 'dispatching') AND live.started_at IS NULL THEN
        IF live.id IS NOT NULL THEN
            UPDATE ql_private.run_leases l
               SET released_at = now_ts, release_reason = 'cancelled', updated_at = now_ts
             WHERE l.id = live.id;
        END IF;
        IF a.id IS NOT NULL AND a.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
            UPDATE ql_private.attempts att
               SET state = 'cancelled', reason = 'cancelled', updated_at = now_ts,
                   finished_at = now_ts
             WHERE att.id = a.id;
        END IF;
        UPDATE ql_private.runs rr
           SET state = 'cancelled', cancel_requested = true, updated_at = now_ts,
               finished_at = now_ts
         WHERE rr.id = r.id
        RETURNING rr.* INTO r;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancelled', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id,
            'offerId', live.offer_id,
            'leaseReleased', live.id IS NOT NULL)));
    ELSIF r.cancel_requested THEN
        NULL;  -- already requested: no second write, no second event
    ELSE
        UPDATE ql_private.runs rr
           SET cancel_requested = true, updated_at = now_ts
         WHERE rr.id = r.id
        RETURNING rr.* INTO r;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancel_requested', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id,
            'state', r.state,
            'offerId', live.offer_id)));
    END IF;
    RETURN jsonb_build_object('runId', r.id, 'state', r.state,
                              'cancelRequested', r.cancel_requested);
END
$$;
REVOKE ALL ON FUNCTION ql.cancel_run(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.cancel_run(text) TO ql_runtime;
COMMENT ON FUNCTION ql.cancel_run(text) IS
'Cancel a run: queued/dispatching without a started lease -> cancelled (attempt cancelled, unstarted lease released, run.cancelled event); started -> cancel_requested + run.cancel_requested event; terminal or already requested -> unchanged, no writes. Returns {runId, state, cancelRequested}. Caller: ql_runtime. Locks: attempt FOR UPDATE, then run FOR NO KEY UPDATE, then lease. Idempotent. QL001 malformed id, QL004 unknown run.';
