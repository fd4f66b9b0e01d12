-- ql.close_session(credential_id, secret_digest, worker_id, session_id, generation) -> jsonb
--
-- Purpose: end a session on the worker's request (SPEC §5 /v1/sessions/close).
--   Authenticates (action `session.close`), then sets state 'closed' and
--   closed_at, and releases the session's unstarted live leases with reason
--   `session_closed` so their runs become candidates again at once. Started
--   leases stay live (the run is executing; its lease lifecycle decides).
--   An expired but still active session IS closed (not QL012): closing is the
--   worker giving the session up, and doing it now frees its pending offers
--   without waiting for the sweeper.
-- Returns {"status":"ok","session":{...session@v1 projection}} or the denial envelope.
-- Caller: ql_worker_ingress.
-- Locks: the session row FOR UPDATE, which waits for in-flight claims holding
--   the fence lock (session_fence lock=true, FOR NO KEY UPDATE) so the release sees their leases, and makes
--   later claims re-check and find the session closed.
-- Idempotency: closing an already closed session of the right generation (not
--   replaced by a newer one) returns ok with its projection and writes nothing.
-- SQLSTATEs: QL001 malformed ids, generation NULL or < 1; QL010 no such session
--   for this worker; QL011 generation differs, or the session was closed by a
--   replacement (a newer generation exists).
CREATE OR REPLACE FUNCTION ql.close_session(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    session_id text,
    generation bigint
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid := ql_private.parse_uuid(close_session.worker_id, 'workerId');
    sid uuid := ql_private.parse_uuid(close_session.session_id, 'sessionId');
    gen bigint := close_session.generation;
    denied jsonb;
    now_ts timestamptz;
    s ql_private.worker_sessions;
BEGIN
    IF gen IS NULL OR gen < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    denied := ql_private.authenticate(
        close_session.credential_id, close_session.secret_digest, wid, 'session.close');
    IF denied IS NOT NULL THEN
        RETURN denied;
    END IF;

    SELECT * INTO s FROM ql_private.worker_sessions ws
     WHERE ws.session_id = sid AND ws.worker_id = wid
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL010', MESSAGE = 'session_not_found';
    END IF;
    IF s.generation <> gen
       OR (s.state = 'closed' AND EXISTS (
               SELECT 1 FROM ql_private.worker_sessions newer
                WHERE newer.worker_id = wid AND newer.generation > s.generation)) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    IF s.state = 'closed' THEN
        RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(s));
    END IF;

    now_ts := clock_timestamp();
    PERFORM ql_private.release_unstarted_leases(ARRAY[sid], 'session_closed');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = now_ts
     WHERE ws.session_id = sid
    RETURNING ws.* INTO s;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(s));
END
$$;
REVOKE ALL ON FUNCTION ql.close_session(text, bytea, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.close_session(text, bytea, text, text, bigint) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.close_session(text, bytea, text, text, bigint) IS
'Authenticate (session.close), close the session (also when expired) and release its unstarted live leases (session_closed). {"status":"ok","session":{...}} or denied. Caller: ql_worker_ingress. Locks: session row FOR UPDATE. Idempotent: an already closed, not replaced session returns ok and writes nothing. QL001, QL010 not found, QL011 generation differs or replaced.';
