-- ql.end_session(p_session_id text, p_drain boolean DEFAULT false) -> jsonb
--   {sessionId, workerId, state: "closed"|"draining", drain, leasesReleased,
--    leasesRunning}
--
-- Purpose: the operator closes a worker session (SPEC §9.5 `admin session
--   close`).
--   Without drain, the way ql.close_session closes it for the worker: unstarted
--   live leases released (`session_closed`, their runs re-queued at once),
--   state closed, closed_at; started leases stay live but can no longer
--   heartbeat or complete (their session is gone: 409 session_replaced), so
--   they end as `lost` at expiry. The worker's next call gets session_closed
--   (409) and it opens a new session. One `session.closed` event
--   (events.worker_id; payload sessionId, workerId, generation,
--   leasesReleased, drain false, actor = session_user). A draining session is
--   closed the same way (the escalation of a drain).
--   With drain (an active session; ql_private.drain_session): no new offer from
--   now on (a pull answers 409 session_draining, QL015), unstarted live leases
--   released as above, started leases run on — their attempts may still ACK
--   running, heartbeat and complete — and the session is closed when the last
--   of them ends (ql_private.close_drained_session), at once when none is
--   running, or lapses at its normal expiry. One `session.draining` event
--   (payload sessionId, workerId, generation, leasesReleased, leasesRunning,
--   state, drain true, actor). A session already draining: no-op.
--   The session UPDATE fires 's:<workerId>' on ql_dispatch (migration 0005).
-- Inputs: p_session_id (lowercase canonical UUID); p_drain (NULL = false).
-- Fences: the session exists.
-- Writes: the session row, the released leases, runs re-queued, one event;
--   nothing when the session is already closed (or, with drain, draining).
-- Locks: the session row FOR UPDATE (waits for a claim holding its fence lock,
--   as ql.close_session), then attempt -> run -> lease per released lease;
--   with drain also FOR SHARE on the remaining live leases
--   (ql_private.drain_session).
-- Idempotency: closing a closed session (or draining a draining one) is a
--   no-op returning the same shape with leasesReleased 0 (no event).
-- Errors: QL001 malformed session id (COLUMN sessionId); QL004 unknown session
--   (COLUMN sessionId).
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.end_session(p_session_id text, p_drain boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_drain boolean := coalesce(p_drain, false);
    v_session ql_private.worker_sessions;
    v_released integer := 0;
    v_running integer;
    v_state text;
    v_drained record;
BEGIN
    SELECT ws.* INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = v_session_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'sessionId',
            MESSAGE = 'session not found';
    END IF;
    v_state := v_session.state;
    IF v_drain AND v_session.state = 'active' THEN
        SELECT * INTO v_drained FROM ql_private.drain_session(v_session_id);
        v_released := v_drained.released;
        v_state := v_drained.state;
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('session.draining', v_session.worker_id, jsonb_build_object(
            'sessionId', v_session_id, 'workerId', v_session.worker_id,
            'generation', v_session.generation, 'leasesReleased', v_released,
            'leasesRunning', v_drained.running, 'state', v_state, 'drain', true,
            'actor', session_user));
    ELSIF NOT v_drain AND v_session.state <> 'closed' THEN
        v_released := ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
        UPDATE ql_private.worker_sessions ws
           SET state = 'closed', closed_at = clock_timestamp()
         WHERE ws.session_id = v_session_id;
        v_state := 'closed';
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('session.closed', v_session.worker_id, jsonb_build_object(
            'sessionId', v_session_id, 'workerId', v_session.worker_id,
            'generation', v_session.generation, 'leasesReleased', v_released,
            'drain', false, 'actor', session_user));
    END IF;
    SELECT count(*)::integer INTO v_running FROM ql_private.run_leases rl
     WHERE rl.session_id = v_session_id AND rl.released_at IS NULL;
    RETURN jsonb_build_object('sessionId', v_session_id, 'workerId', v_session.worker_id,
                              'state', v_state, 'drain', v_drain,
                              'leasesReleased', v_released, 'leasesRunning', v_running);
END
$$;
REVOKE ALL ON FUNCTION ql.end_session(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.end_session(text, boolean) TO ql_runtime;
