-- ql.heartbeat_lease(credential_id, secret_digest, worker_id, session_id, generation,
--                    offer_id, token_digest, lease_version DEFAULT NULL) -> jsonb
--
-- Purpose: keep a STARTED lease alive (SPEC §5 /v1/leases/heartbeat, §7) and tell
--   the worker whether its run was cancelled. One fenced transaction: offer id +
--   token digest + worker/session/generation (ql_private.lease_fence), then the
--   lease version. Extends expires_at to clock_timestamp() + the task's
--   lease_ttl_seconds, bumps lease_version, records heartbeat_at and
--   heartbeat_version (= the new lease_version). Writes no event (heartbeats are
--   not run facts).
-- lease_version: the version the worker holds (the last lease@v1 it received).
--   * equal to the current version: the heartbeat is applied;
--   * current - 1 while the current version was produced by a heartbeat
--     (heartbeat_version = lease_version): the retry of a heartbeat whose answer
--     was lost; answered {"status":"idempotent"} with the current projection
--     (exactly what the lost answer carried) and NO write — deliberately not
--     extended again, so a retry loop can never keep a lease alive on its own;
--   * anything else: {"status":"conflict","category":"lease_version_mismatch"}.
--   NULL = no version fence (the wire lease-heartbeat-request@v1 carries no
--   version, so the ingress passes NULL; the token/session fences still apply).
-- Expiry: a started lease whose expires_at <= clock_timestamp() is never extended
--   (conflict `lease_expired`): from that instant the sweeper owns it. Both sides
--   decide on the same locked row (the heartbeat's UPDATE lock vs the sweeper's
--   FOR UPDATE SKIP LOCKED with re-check), so no lease is ever both extended and
--   lost.
-- Returns {"status":"ok","lease":<lease@v1 + cancelRequested>} | idempotent |
--   {"status":"conflict","category":…} (lease_fence categories, plus
--   lease_version_mismatch) | the denial envelope (action `lease.heartbeat`).
-- Caller: ql_worker_ingress.
-- Locks: only the lease row (FOR NO KEY UPDATE, then the UPDATE), after an
--   unlocked first read that answers conflicts and replays without any lock. The
--   attempt and run are only read: every change of a started lease's attempt
--   (completion, start failure, loss) also releases the lease under its lock.
-- Idempotency: see lease_version.
-- SQLSTATEs: QL001 malformed ids/digest, generation NULL or < 1, lease_version
--   < 1; QL020 the lease is not started (heartbeat before the starting ACK).
CREATE OR REPLACE FUNCTION ql.heartbeat_lease(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    session_id text,
    generation bigint,
    offer_id text,
    token_digest bytea,
    lease_version bigint DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid := ql_private.parse_uuid(heartbeat_lease.worker_id, 'workerId');
    sid uuid := ql_private.parse_uuid(heartbeat_lease.session_id, 'sessionId');
    oid_ uuid := ql_private.parse_uuid(heartbeat_lease.offer_id, 'offerId');
    tok bytea := ql_private.require_digest(heartbeat_lease.token_digest, 'tokenDigest');
    gen bigint := heartbeat_lease.generation;
    held bigint := heartbeat_lease.lease_version;
    denied jsonb;
    v record;
    category text;
    l ql_private.run_leases;
    ttl integer;
    now_ts timestamptz;
BEGIN
    IF gen IS NULL OR gen < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF held IS NOT NULL AND held < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    denied := ql_private.authenticate(heartbeat_lease.credential_id,
                                      heartbeat_lease.secret_digest, wid, 'lease.heartbeat');
    IF denied IS NOT NULL THEN
        RETURN denied;
    END IF;

    -- Pass 1 reads without locks; pass 2 (only when the heartbeat applies) locks
    -- the lease and re-reads. Each read is one statement (ql_private.lease_state).
    FOR pass IN 1 .. 2 LOOP
        IF pass = 2 THEN
            PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = l.id FOR NO KEY UPDATE;
        END IF;
        SELECT * INTO v FROM ql_private.lease_state(oid_, wid, sid, gen, tok);
        IF NOT FOUND THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', 'offer_foreign');
        END IF;
        l := v.lease;
        category := v.category;
        IF category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', category);
        END IF;
        IF l.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: lease heartbeat before the starting ACK';
        END IF;
        IF held IS NOT NULL AND held <> l.lease_version THEN
            IF held = l.lease_version - 1 AND l.heartbeat_version = l.lease_version THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(l.id));
            END IF;
            RETURN jsonb_build_object('status', 'conflict', 'category', 'lease_version_mismatch');
        END IF;
    END LOOP;

    SELECT t.lease_ttl_seconds INTO ttl
      FROM ql_private.runs rr JOIN ql_private.tasks t ON t.id = rr.task_id
     WHERE rr.id = l.run_id;
    now_ts := clock_timestamp();
    UPDATE ql_private.run_leases rl
       SET expires_at = now_ts + make_interval(secs => ttl),
           lease_version = rl.lease_version + 1,
           heartbeat_version = rl.lease_version + 1,
           heartbeat_at = now_ts,
           updated_at = now_ts
     WHERE rl.id = l.id;
    RETURN jsonb_build_object('status', 'ok', 'lease', ql_private.lease_projection(l.id));
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint)
    TO ql_worker_ingress;
COMMENT ON FUNCTION ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint) IS
'Extend a started, unexpired lease by the task lease TTL (version+1, heartbeat_at/heartbeat_version), fenced by offer+token+worker/session/generation and lease_version (NULL = no version fence). {status: ok, lease: lease@v1 + cancelRequested} | idempotent (retry of the previous heartbeat: version = current-1 and current produced by a heartbeat; no write) | conflict (lease_fence categories, lease_expired once expired, lease_version_mismatch) | denied. Caller: ql_worker_ingress. Locks: the lease row only. QL001 bad input, QL020 not started.';
