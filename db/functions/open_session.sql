-- ql.open_session(p_credential_id, p_secret_digest, p_worker_id,
--                 p_capabilities_canonical) -> jsonb
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
--   Granted labels (SPEC §13.2): unless the worker has self_labels, every
--   declared label must be granted to it (ql_private.worker_labels, ql.label_worker)
--   with the same key and the same value, byte for byte; else QL016
--   label_not_granted (403) naming the first such key (in C order) in the
--   error's DETAIL, and nothing is written (no session opened, none replaced).
--   Executors, runtimes and slots stay self-declared.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id
--   (lowercase canonical UUID), p_capabilities_canonical (the RFC 8785 bytes of
--   qinglong/worker-capabilities@v1).
-- Fences: the credential (ql_private.authenticate); the capabilities document;
--   the worker's granted labels (read under the worker row lock, which
--   ql.label_worker also takes: an open sees a label change whole or not at all).
-- Returns {"status":"ok","session":{workerId, sessionId, generation, expiresAtMs,
--   capabilitiesDigest, heartbeatIntervalMs}} or the denial envelope.
-- Writes: the new session row; the replaced sessions (closed) and their released
--   unstarted leases; one security_audit row when denied.
-- Locks: the worker row FOR NO KEY UPDATE, which serializes concurrent opens of
--   one worker (so max(generation)+1 and the one-active index never race) but,
--   unlike FOR UPDATE, does not block the FOR KEY SHARE that foreign-key checks
--   of lease inserts take on the worker row. Then the open session rows FOR
--   UPDATE, which waits for in-flight claims holding the session fence lock
--   (ql_private.session_fence(..., true) = FOR NO KEY UPDATE), so the lease release
--   below sees their leases; claims arriving later re-check and see it closed.
--   The release takes attempt -> run -> lease per lease (the lifecycle order).
-- Idempotency: none; every successful call opens a new generation (the worker
--   re-opens only when it has lost its session).
-- Errors: QL001 malformed workerId / bytes not a UTF-8 JSON object / invalid
--   capabilities; QL002 bytes over 16 KiB or oversize sets; QL003 invalid SemVer
--   (from ql_private.validate_capabilities); QL016 a declared label not granted
--   (DETAIL = its key, a validated label key).
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.open_session(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_capabilities_canonical bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max_capabilities_bytes constant integer := 16384;
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_denied jsonb;
    v_capabilities jsonb;
    v_capabilities_digest text;
    v_slots integer;
    v_now timestamptz;
    v_next_generation bigint;
    v_session ql_private.worker_sessions;
    v_self_labels boolean;
    v_ungranted text;
BEGIN
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, v_worker_id, 'session.open');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    v_capabilities := ql_private.json_object_from_bytes(
        p_capabilities_canonical, v_max_capabilities_bytes, 'capabilities');
    PERFORM ql_private.validate_capabilities(v_capabilities);
    -- validate_capabilities owns the 1..256 rule; this only guards the cast.
    IF jsonb_typeof(v_capabilities -> 'slots') IS DISTINCT FROM 'number'
       OR (v_capabilities ->> 'slots') !~ '^[0-9]{1,3}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.slots must be an integer';
    END IF;
    v_slots := (v_capabilities ->> 'slots')::integer;
    v_capabilities_digest := 'sha256:' || encode(sha256(p_capabilities_canonical), 'hex');

    SELECT w.self_labels INTO v_self_labels
      FROM ql_private.workers w WHERE w.id = v_worker_id FOR NO KEY UPDATE;
    IF NOT v_self_labels THEN
        SELECT d.key INTO v_ungranted
          FROM jsonb_each_text(v_capabilities -> 'labels') d
         WHERE NOT EXISTS (SELECT 1 FROM ql_private.worker_labels g
                            WHERE g.worker_id = v_worker_id
                              AND g.key = d.key AND g.value = d.value)
         ORDER BY d.key COLLATE "C" LIMIT 1;
        IF v_ungranted IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL016', DETAIL = v_ungranted,
                MESSAGE = 'a declared label is not granted to this worker';
        END IF;
    END IF;

    v_now := clock_timestamp();
    PERFORM 1 FROM ql_private.worker_sessions ws
     WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
       FOR UPDATE;
    -- Release the replaced sessions' unstarted leases first (they reference the
    -- sessions by id), then close the sessions themselves.
    PERFORM ql_private.release_unstarted_leases(
        ARRAY(SELECT ws.session_id FROM ql_private.worker_sessions ws
               WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'),
        'session_replaced');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = v_now
     WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed';

    SELECT coalesce(max(ws.generation), 0) + 1 INTO v_next_generation
      FROM ql_private.worker_sessions ws WHERE ws.worker_id = v_worker_id;
    v_now := clock_timestamp();
    INSERT INTO ql_private.worker_sessions AS ws (
        worker_id, generation, state, expires_at, capabilities, capabilities_canonical,
        capabilities_digest, slots, opened_at, heartbeat_at)
    VALUES (
        v_worker_id, v_next_generation, 'active',
        v_now + (SELECT session_ttl FROM ql_private.settings()),
        v_capabilities, p_capabilities_canonical, v_capabilities_digest, v_slots, v_now, v_now)
    RETURNING ws.* INTO v_session;

    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$$;
REVOKE ALL ON FUNCTION ql.open_session(text, bytea, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.open_session(text, bytea, text, bytea) TO ql_worker_ingress;
