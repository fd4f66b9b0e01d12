-- ql.heartbeat_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                    p_generation, p_offer_id, p_token_digest,
--                    p_lease_version) -> jsonb
--
-- Purpose: keep a STARTED lease alive (SPEC §5 /v1/leases/heartbeat, §7) and tell
--   the worker whether its run was cancelled. One fenced transaction: offer id +
--   token digest + worker/session/generation, then the lease version (both
--   ql_private.lease_open). Extends expires_at to clock_timestamp() + the lease
--   TTL pinned on the lease by its claim (run_leases.lease_ttl_seconds: a task
--   configured since does not reach a live lease, SPEC §9.1), bumps lease_version, records heartbeat_at and
--   heartbeat_version (= the new lease_version). Writes no event (heartbeats are
--   not run facts).
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
--   p_token_digest (SHA-256 of the lease token), p_lease_version (required,
--   >= 1): the version the worker holds (the last lease@v1 it received):
--   * equal to the current version: the heartbeat is applied;
--   * current - 1 while the current version was produced by a heartbeat
--     (heartbeat_version = lease_version): the retry of a heartbeat whose answer
--     was lost; answered {"status":"idempotent"} with the current projection
--     (exactly what the lost answer carried) and NO write — deliberately not
--     extended again, so a retry loop can never keep a lease alive on its own;
--   * anything else: {"status":"conflict","category":"stale_lease_version"}.
-- Fences (ql_private.lease_prelude, which also answers replays and conflicts):
--   the credential (ql_private.authenticate, action `lease.heartbeat`),
--   then ql_private.lease_open (offer, worker, token digest, session/generation,
--   live lease, attempt, revision), then the lease version.
-- Expiry: a started lease whose expires_at <= clock_timestamp() is never extended
--   (conflict `lease_expired`): from that instant the sweeper owns it. Both sides
--   decide on the same locked row (the heartbeat's lease lock vs the sweeper's
--   FOR UPDATE SKIP LOCKED with re-check), so no lease is ever both extended and
--   lost.
-- Returns {"status":"ok","lease":<lease@v1 + cancelRequested>} | idempotent |
--   {"status":"conflict","category":…} (lease_verdict categories, plus
--   stale_lease_version) | the denial envelope.
-- Writes: the lease row only (expires_at, lease_version, heartbeat_at,
--   heartbeat_version); nothing for a replay or a conflict; one security_audit
--   row when denied.
-- Locks: only the lease row (ql_private.lease_prelude / lease_open `lease`: FOR NO KEY UPDATE,
--   then the UPDATE), after an unlocked first read that answers conflicts and
--   replays without any lock. The attempt and run are only read: every change of
--   a started lease's attempt (completion, start failure, loss) also releases the
--   lease under its lock.
-- Idempotency: see p_lease_version.
-- Errors: QL001 malformed ids/digest, generation NULL or < 1, lease_version
--   NULL or < 1; QL020 the lease is not started (heartbeat before the starting ACK).
-- Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
--   so a plan a pooled connection made while the lease tables were small (a
--   sequential scan of run_leases) does not stay with it as they grow.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.heartbeat_lease(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_lease_version bigint
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_state record;
    v_lease ql_private.run_leases;
    v_now timestamptz;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    -- Pass 1 authenticates and decides on an unlocked read; pass 2 (only when the
    -- heartbeat applies) locks the lease and decides again on it
    -- (ql_private.lease_prelude).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_prelude(
            p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
            v_offer_id, v_token_digest, p_lease_version, 'lease.heartbeat', 'heartbeat',
            CASE v_pass WHEN 2 THEN 'lease' END, v_lease);
        IF v_state.answer IS NOT NULL THEN
            RETURN v_state.answer;
        END IF;
        v_lease := v_state.lease;
        IF v_lease.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: lease heartbeat before the starting ACK';
        END IF;
    END LOOP;

    v_now := clock_timestamp();
    UPDATE ql_private.run_leases rl
       SET expires_at = v_now + make_interval(secs => v_state.ttl),
           lease_version = rl.lease_version + 1,
           heartbeat_version = rl.lease_version + 1,
           heartbeat_at = v_now,
           updated_at = v_now
     WHERE rl.id = v_lease.id
    RETURNING rl.* INTO v_lease;
    -- The lease as just extended, with its attempt's state and the run's cancel
    -- flag as the locked read saw them (one snapshot, after the lease's lock).
    RETURN jsonb_build_object('status', 'ok', 'lease',
        ql_private.lease_answer(v_lease, (v_state.attempt).state, (v_state.run).cancel_requested));
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint)
    TO ql_worker_ingress;
