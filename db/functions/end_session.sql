-- ql.end_session(p_session_id text) -> jsonb
--   {sessionId, workerId, state: "closed", leasesReleased}
--
-- Purpose: the operator closes a worker session (SPEC §9.5 `admin session
--   close`), the way ql.close_session closes it for the worker: unstarted live
--   leases released (`session_closed`, their runs re-queued at once), state
--   closed, closed_at; started leases stay live (their lease lifecycle
--   decides). The worker's next call gets session_closed (409) and it opens a
--   new session. One `session.closed` event (events.worker_id; payload
--   sessionId, workerId, generation, leasesReleased, actor = session_user).
--   The session UPDATE fires 's:<workerId>' on ql_dispatch (migration 0005).
-- Inputs: p_session_id (lowercase canonical UUID).
-- Fences: the session exists.
-- Writes: the session row, the released leases, runs re-queued, one event;
--   nothing when the session is already closed.
-- Locks: the session row FOR UPDATE (waits for a claim holding its fence lock,
--   as ql.close_session), then attempt -> run -> lease per released lease.
-- Idempotency: closing a closed session is a no-op returning the same object
--   with leasesReleased 0 (no event).
-- Errors: QL001 malformed session id (COLUMN sessionId); QL004 unknown session
--   (COLUMN sessionId).
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.end_session(p_session_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_session ql_private.worker_sessions;
    v_released integer := 0;
BEGIN
    SELECT ws.* INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = v_session_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'sessionId',
            MESSAGE = 'session not found';
    END IF;
    IF v_session.state <> 'closed' THEN
        v_released := ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
        UPDATE ql_private.worker_sessions ws
           SET state = 'closed', closed_at = clock_timestamp()
         WHERE ws.session_id = v_session_id;
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('session.closed', v_session.worker_id, jsonb_build_object(
            'sessionId', v_session_id, 'workerId', v_session.worker_id,
            'generation', v_session.generation, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;
    RETURN jsonb_build_object('sessionId', v_session_id, 'workerId', v_session.worker_id,
                              'state', 'closed', 'leasesReleased', v_released);
END
$$;
REVOKE ALL ON FUNCTION ql.end_session(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.end_session(text) TO ql_runtime;
COMMENT ON FUNCTION ql.end_session(text) IS
'Operator close of a worker session (SPEC 9.5), as close_session: unstarted leases released (session_closed, runs re-queued), state closed; one session.closed event naming the actor (session_user); NOTIFY s:<workerId> by trigger. Returns {sessionId, workerId, state: closed, leasesReleased}. Inputs: p_session_id. Fences: session exists. Locks: session FOR UPDATE, then attempt -> run -> lease. Idempotent (closed: no-op, leasesReleased 0). Errors: QL001 malformed, QL004 unknown session (COLUMN sessionId). Caller: ql_runtime.';
