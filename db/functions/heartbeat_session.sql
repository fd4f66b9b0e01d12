-- ql.heartbeat_session(credential_id, secret_digest, worker_id, session_id, generation) -> jsonb
--
-- Purpose: keep a session alive (SPEC §5 /v1/sessions/heartbeat). Authenticates
--   (action `session.heartbeat`), then extends expires_at to clock_timestamp() +
--   session TTL and sets heartbeat_at, only while the session fence holds.
-- Returns {"status":"ok","session":{...session@v1 projection}} or the denial envelope.
-- Caller: ql_worker_ingress.
-- Locks: the session row FOR NO KEY UPDATE, through the UPDATE itself. An idle
--   pull takes no session lock, so heartbeats and idle pulls never wait for each
--   other; a claiming pull (session_fence lock=true) holds the same mode for its
--   short transaction. A concurrent open/close (FOR UPDATE) makes the UPDATE
--   wait, re-check the row's newest version and, finding it closed, fall through
--   to the fence, which raises.
-- Idempotency: repeating it only moves expires_at forward.
-- SQLSTATEs: QL001 malformed ids, generation NULL or < 1; QL010 no such session
--   for this worker; QL011 generation differs or session replaced; QL013 closed
--   or draining; QL012 expired (an expired session is not revived: re-open).
CREATE OR REPLACE FUNCTION ql.heartbeat_session(
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
    wid uuid := ql_private.parse_uuid(heartbeat_session.worker_id, 'workerId');
    sid uuid := ql_private.parse_uuid(heartbeat_session.session_id, 'sessionId');
    gen bigint := heartbeat_session.generation;
    denied jsonb;
    now_ts timestamptz;
    s ql_private.worker_sessions;
BEGIN
    IF gen IS NULL OR gen < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    denied := ql_private.authenticate(
        heartbeat_session.credential_id, heartbeat_session.secret_digest, wid,
        'session.heartbeat');
    IF denied IS NOT NULL THEN
        RETURN denied;
    END IF;

    now_ts := clock_timestamp();
    UPDATE ql_private.worker_sessions ws
       SET expires_at = now_ts + (SELECT session_ttl FROM ql_private.settings()),
           heartbeat_at = now_ts
     WHERE ws.session_id = sid AND ws.worker_id = wid AND ws.generation = gen
       AND ws.state = 'active' AND ws.expires_at > now_ts
    RETURNING ws.* INTO s;
    IF NOT FOUND THEN
        -- Classify why (raises); reaching past it would mean the row changed
        -- between the two statements, which the fence then reports as it is now.
        s := ql_private.session_fence(wid, sid, gen, false);
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(s));
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_session(text, bytea, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_session(text, bytea, text, text, bigint) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.heartbeat_session(text, bytea, text, text, bigint) IS
'Authenticate (session.heartbeat) and extend an active, owned, exact-generation, unexpired session by the session TTL. {"status":"ok","session":{...}} or denied. Caller: ql_worker_ingress. Locks: session row via UPDATE (NO KEY UPDATE). Idempotent. QL001, QL010 not found, QL011 replaced, QL013 closed, QL012 expired.';
