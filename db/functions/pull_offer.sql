-- ql.pull_offer(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
--               p_offer_id, p_token_digest, p_bounds DEFAULT NULL) -> jsonb
--
-- Purpose: one pull = claim or recover, in one call and one round trip (SPEC §3.3,
--   R-PULL). The ingress passes the authenticated worker (certificate identity,
--   already matched with the body), the credential id and the SHA-256 of its
--   secret, and the SHA-256 of the worker's lease token; plaintext never reaches
--   the database.
--   0. validate arguments; authenticate the credential (a denial is recorded in
--      security_audit and returned as {status: denied, httpStatus, reason}) —
--      before any candidate is touched;
--   1. recover first, under a transaction advisory lock on the offer id (so a
--      retry racing its own still-running first request waits for it): an
--      existing lease with this offer id is replayed ({status: idempotent,
--      offer}) or refused ({status: conflict, category});
--   2. session fences (exists, owned, exact generation, active, unexpired,
--      capabilities digest intact) and a free slot (else idle capacity_full);
--      the offer-id probe of step 1, the session row and its live-lease count
--      are read by ONE statement after the advisory lock (the checks are made
--      on its values; only a failing fence calls ql_private.session_fence, for
--      its precise error);
--   3–4. bounded keyset scan, placement, atomic claim -> {status: offered, offer}
--      or {status: idle, reason, stats, truncated}.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id, p_offer_id (lowercase canonical UUIDs; the offer id is the
--   worker's idempotency key), p_generation (>= 1), p_token_digest (SHA-256 of
--   the lease token, 32 bytes), p_bounds ({pages, candidates, claimAttempts},
--   NULL = defaults; ql_private.pull_bounds).
-- Fences: the credential; an existing offer id's replay fences
--   (ql_private.recover_fence); the session fence (the read above, with
--   ql_private.session_fence's checks and errors, and,
--   on the locked row before a claim, ql_private.session_claim_lock); every
--   candidate fence re-checked on the locked rows (ql_private.claim_candidate).
-- Writes: only a claim (lease + run -> dispatching + one run.dispatched event) or
--   a denial audit row. Idle pulls and replays write nothing (zero WAL).
-- Locks: advisory xact lock on the offer id; see ql_private.scan_and_claim
--   (session row FOR NO KEY UPDATE before the first claim) and
--   ql_private.claim_candidate (run + attempt FOR NO KEY UPDATE SKIP LOCKED).
-- Idempotency: by offer id + token digest.
-- Planning: every statement below runs with a generic plan (planned once per
--   connection, not per call) and sequential scans disabled, so each plan is the
--   index path whatever the statistics said when it was made (a plan cached on
--   an empty queue would otherwise stick to the connection once it fills).
--   JIT is off: with sequential scans disabled a tiny table's plan costs 1e10,
--   far above jit_above_cost, and compiling it took ~30 ms of a sub-ms pull.
-- Errors: QL001 malformed argument; QL002 bound above cap; QL010 unknown
--   session; QL011 session replaced / wrong generation; QL012 session expired;
--   QL013 session closed; QL015 session draining (an operator drain: no new
--   offer); QL014 capabilities digest mismatch.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.pull_offer(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_bounds jsonb DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
    v_bounds record := ql_private.pull_bounds(p_bounds);
    v_result jsonb;
    v_read record;
    v_session ql_private.worker_sessions;
    v_live integer;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    v_result := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'offer.pull');
    IF v_result IS NOT NULL THEN
        RETURN v_result;
    END IF;
    -- Concurrent pulls of one offer id (a retry racing its own first request,
    -- whose ingress died mid-call) serialize here, so the later one always sees
    -- the earlier one's lease and replays it. An advisory lock writes no WAL.
    PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.offer:' || v_offer_id::text, 0));
    -- The read side in ONE statement, in one snapshot taken after the advisory
    -- lock: whether the offer id exists (a replay), this worker's session row,
    -- and its live leases (started, or unstarted and unexpired) — what were
    -- three statements in three function calls.
    SELECT EXISTS (SELECT 1 FROM ql_private.run_leases l WHERE l.offer_id = v_offer_id)
               AS replay,
           ws AS session,
           (SELECT count(*)::integer FROM ql_private.run_leases l
             WHERE l.session_id = ws.session_id AND l.released_at IS NULL
               AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp())) AS live
      INTO v_read
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws
        ON ws.session_id = v_session_id AND ws.worker_id = v_worker_id;
    IF v_read.replay THEN
        v_result := ql_private.recover_offer(v_worker_id, v_session_id, p_generation,
                                             v_offer_id, v_token_digest);
        IF v_result IS NOT NULL THEN
            RETURN v_result;
        END IF;
    END IF;
    v_session := v_read.session;
    v_live := v_read.live;
    IF v_session.session_id IS NULL OR v_session.generation <> p_generation
       OR v_session.state <> 'active' OR v_session.expires_at <= clock_timestamp() THEN
        -- A fence failed: ql_private.session_fence raises the precise error, in
        -- its order (a session that became valid in between is read again).
        v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
        v_live := ql_private.session_live_leases(v_session.session_id);
    END IF;
    IF v_session.capabilities_digest
       <> 'sha256:' || encode(sha256(v_session.capabilities_canonical), 'hex') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL014',
            MESSAGE = 'stored session capabilities do not match their digest';
    END IF;
    IF v_live >= v_session.slots THEN
        RETURN ql_private.idle_result('capacity_full', 0, 0, 0, 0,
            '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
    END IF;
    RETURN ql_private.scan_and_claim(v_session, v_offer_id, v_token_digest, v_bounds.pages,
                                     v_bounds.page_size, v_bounds.claim_attempts);
END
$$;
REVOKE ALL ON FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb)
    TO ql_worker_ingress;
