-- ql.heartbeat_session(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                      p_generation) -> jsonb
--
-- Purpose: keep a session alive (SPEC §5 /v1/sessions/heartbeat). Authenticates
--   (action `session.heartbeat`), then extends expires_at to clock_timestamp() +
--   session TTL and sets heartbeat_at, only while the session fence holds —
--   or while the session is draining (ql.end_session / ql.disable_worker with
--   drain): a draining session takes no new offer but lives on while its
--   started leases run, so its worker keeps it alive the same way (for a
--   disabled worker, ql_private.authenticate allows this call only while it has
--   a draining session). The answer then carries `"draining": true` in the
--   envelope (not in the session projection): the ingress must not remember a
--   draining session in its idle view as one that may pull.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id (lowercase canonical UUIDs), p_generation (>= 1).
-- Fences: the credential (ql_private.authenticate); the session fence (owned,
--   exact generation, active, unexpired) as the UPDATE's own condition, and
--   ql_private.session_fence to name the failing one.
-- Returns {"status":"ok","session":{...session@v1 projection}} (plus
--   "draining": true for a draining session) or the denial envelope.
-- Writes: the session row (expires_at, heartbeat_at); one security_audit row
--   when denied.
-- Locks: the session row FOR NO KEY UPDATE, through the UPDATE itself. An idle
--   pull takes no session lock, so heartbeats and idle pulls never wait for each
--   other; a claiming pull (session_fence lock=true) holds the same mode for its
--   short transaction. A concurrent open/close (FOR UPDATE) makes the UPDATE
--   wait, re-check the row's newest version and, finding it closed, fall through
--   to the fence, which raises.
-- Idempotency: repeating it only moves expires_at forward.
-- Errors: QL001 malformed ids, generation NULL or < 1; QL010 no such session
--   for this worker; QL011 generation differs or session replaced; QL013
--   closed; QL012 expired, active or draining (an expired session is not
--   revived: re-open).
-- Caller: ql_worker_ingress, ql.heartbeat_sessions (one call per batch item).
CREATE OR REPLACE FUNCTION ql.heartbeat_session(
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
        p_credential_id, p_secret_digest, v_worker_id, 'session.heartbeat');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    v_now := clock_timestamp();
    UPDATE ql_private.worker_sessions ws
       SET expires_at = v_now + (SELECT session_ttl FROM ql_private.settings()),
           heartbeat_at = v_now
     WHERE ws.session_id = v_session_id AND ws.worker_id = v_worker_id
       AND ws.generation = p_generation AND ws.state IN ('active', 'draining')
       AND ws.expires_at > v_now
    RETURNING ws.* INTO v_session;
    IF NOT FOUND THEN
        -- Classify why (raises); reaching past it would mean the row changed
        -- between the two statements, which the fence then reports as it is now.
        v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    IF v_session.state = 'draining' THEN
        RETURN jsonb_build_object('status', 'ok', 'draining', true,
                                  'session', ql_private.session_projection(v_session));
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_session(text, bytea, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_session(text, bytea, text, text, bigint) TO ql_worker_ingress;
