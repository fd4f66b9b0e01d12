-- ql.close_session(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                  p_generation) -> jsonb
--
-- Purpose: end a session on the worker's request (SPEC §5 /v1/sessions/close).
--   Authenticates (action `session.close`), then sets state 'closed' and
--   closed_at, and releases the session's unstarted live leases with reason
--   `session_closed` so their runs become candidates again at once. Started
--   leases stay live (the run is executing; its lease lifecycle decides).
--   An expired but still active session IS closed (not QL012): closing is the
--   worker giving the session up, and doing it now frees its pending offers
--   without waiting for the sweeper.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id (lowercase canonical UUIDs), p_generation (>= 1).
-- Fences: the credential (ql_private.authenticate); the session exists for this
--   worker, with exactly this generation, not closed by a replacement.
-- Returns {"status":"ok","session":{...session@v1 projection}} or the denial envelope.
-- Writes: the session row (state, closed_at) and the released leases; nothing
--   when already closed; one security_audit row when denied.
-- Locks: the session row FOR UPDATE, which waits for in-flight claims holding
--   the fence lock (session_fence lock=true, FOR NO KEY UPDATE) so the release
--   sees their leases, and makes later claims re-check and find the session
--   closed; then attempt -> run -> lease per released lease
--   (ql_private.release_unstarted_leases, the lifecycle order).
-- Idempotency: closing an already closed session of the right generation (not
--   replaced by a newer one) returns ok with its projection and writes nothing.
-- Errors: QL001 malformed ids, generation NULL or < 1; QL010 no such session
--   for this worker; QL011 generation differs, or the session was closed by a
--   replacement (a newer generation exists).
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.close_session(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_denied jsonb;
    v_now timestamptz;
    v_session ql_private.worker_sessions;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, v_worker_id, 'session.close');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    SELECT * INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = v_session_id AND ws.worker_id = v_worker_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL010', MESSAGE = 'session_not_found';
    END IF;
    IF v_session.generation <> p_generation
       OR (v_session.state = 'closed' AND EXISTS (
               SELECT 1 FROM ql_private.worker_sessions newer
                WHERE newer.worker_id = v_worker_id
                  AND newer.generation > v_session.generation)) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    IF v_session.state = 'closed' THEN
        RETURN jsonb_build_object('status', 'ok',
                                  'session', ql_private.session_projection(v_session));
    END IF;

    v_now := clock_timestamp();
    PERFORM ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = v_now
     WHERE ws.session_id = v_session_id
    RETURNING ws.* INTO v_session;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$$;
REVOKE ALL ON FUNCTION ql.close_session(text, bytea, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.close_session(text, bytea, text, text, bigint) TO ql_worker_ingress;
