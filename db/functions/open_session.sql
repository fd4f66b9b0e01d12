-- ql.open_session(credential_id, secret_digest, worker_id, capabilities_canonical) -> jsonb
--
-- Purpose: admit a worker (SPEC §5 /v1/sessions). Authenticates (action
--   `session.open`), validates the canonical capabilities bytes (<= 16 KiB UTF-8
--   JSON object, no duplicate keys, then ql_private.validate_capabilities),
--   stores them with their exact SHA-256 (`sha256:<hex>`, computed here), and
--   opens a NEW session row with generation = previous max + 1 for the worker.
--   A session still open for the worker (active or draining) is replaced: it is
--   closed, and its unstarted live leases are released with reason
--   `session_replaced`, so their pending offers answer 409 session_replaced.
--   Started leases stay live: the run is really executing and its own lease
--   lifecycle (heartbeat/expiry) decides its fate.
-- Returns {"status":"ok","session":{workerId, sessionId, generation, expiresAtMs,
--   capabilitiesDigest, heartbeatIntervalMs}} or the denial envelope.
-- Caller: ql_worker_ingress.
-- Locks: the worker row FOR NO KEY UPDATE, which serializes concurrent opens of
--   one worker (so max(generation)+1 and the one-active index never race) but,
--   unlike FOR UPDATE, does not block the FOR KEY SHARE that foreign-key checks
--   of lease inserts take on the worker row. Then the open session rows FOR
--   UPDATE, which waits for in-flight claims holding the session fence lock
--   (ql_private.session_fence(..., true) = FOR NO KEY UPDATE), so the lease release
--   below sees their leases; claims arriving later re-check and see it closed.
-- Idempotency: none; every successful call opens a new generation (the worker
--   re-opens only when it has lost its session).
-- SQLSTATEs: QL001 malformed workerId / bytes not a UTF-8 JSON object / invalid
--   capabilities; QL002 bytes over 16 KiB or oversize sets; QL003 invalid SemVer
--   (from ql_private.validate_capabilities).
CREATE OR REPLACE FUNCTION ql.open_session(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    capabilities_canonical bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_capabilities_bytes constant integer := 16384;
    wid uuid := ql_private.parse_uuid(open_session.worker_id, 'workerId');
    denied jsonb;
    caps jsonb;
    caps_digest text;
    slot_count integer;
    now_ts timestamptz;
    next_generation bigint;
    s ql_private.worker_sessions;
BEGIN
    denied := ql_private.authenticate(
        open_session.credential_id, open_session.secret_digest, wid, 'session.open');
    IF denied IS NOT NULL THEN
        RETURN denied;
    END IF;

    caps := ql_private.json_object_from_bytes(
        open_session.capabilities_canonical, max_capabilities_bytes, 'capabilities');
    PERFORM ql_private.validate_capabilities(caps);
    -- validate_capabilities owns the 1..256 rule; this only guards the cast.
    IF jsonb_typeof(caps -> 'slots') IS DISTINCT FROM 'number'
       OR (caps ->> 'slots') !~ '^[0-9]{1,3}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.slots must be an integer';
    END IF;
    slot_count := (caps ->> 'slots')::integer;
    caps_digest := 'sha256:' || encode(sha256(open_session.capabilities_canonical), 'hex');

    PERFORM 1 FROM ql_private.workers w WHERE w.id = wid FOR NO KEY UPDATE;

    now_ts := clock_timestamp();
    PERFORM 1 FROM ql_private.worker_sessions ws
     WHERE ws.worker_id = wid AND ws.state <> 'closed'
       FOR UPDATE;
    -- Release the replaced sessions' unstarted leases first (they reference the
    -- sessions by id), then close the sessions themselves.
    PERFORM ql_private.release_unstarted_leases(
        ARRAY(SELECT ws.session_id FROM ql_private.worker_sessions ws
               WHERE ws.worker_id = wid AND ws.state <> 'closed'),
        'session_replaced');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = now_ts
     WHERE ws.worker_id = wid AND ws.state <> 'closed';

    SELECT coalesce(max(ws.generation), 0) + 1 INTO next_generation
      FROM ql_private.worker_sessions ws WHERE ws.worker_id = wid;
    now_ts := clock_timestamp();
    INSERT INTO ql_private.worker_sessions AS ws (
        worker_id, generation, state, expires_at, capabilities, capabilities_canonical,
        capabilities_digest, slots, opened_at, heartbeat_at)
    VALUES (
        wid, next_generation, 'active', now_ts + (SELECT session_ttl FROM ql_private.settings()),
        caps, open_session.capabilities_canonical, caps_digest, slot_count, now_ts, now_ts)
    RETURNING ws.* INTO s;

    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(s));
END
$$;
REVOKE ALL ON FUNCTION ql.open_session(text, bytea, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.open_session(text, bytea, text, bytea) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.open_session(text, bytea, text, bytea) IS
'Authenticate (session.open), validate canonical capabilities (<=16 KiB UTF-8 JSON object, validate_capabilities), replace any open session (closed; its unstarted live leases released session_replaced) and insert a new session with generation max+1. {"status":"ok","session":{...}} or denied. Caller: ql_worker_ingress. Locks: worker row FOR NO KEY UPDATE, open sessions FOR UPDATE. Not idempotent. QL001/QL002/QL003.';
