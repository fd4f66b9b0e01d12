-- ql.pull_offer(credential_id, secret_digest, worker_id, session_id, generation,
--               offer_id, token_digest, bounds DEFAULT NULL) -> jsonb
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
--   3–4. bounded keyset scan, placement, atomic claim -> {status: offered, offer}
--      or {status: idle, reason, stats, truncated}.
-- Writes: only a claim (lease + run -> dispatching + one run.dispatched event) or
--   a denial audit row. Idle pulls and replays write nothing (zero WAL).
-- Caller: ql_worker_ingress. Locks: advisory xact lock on the offer id; see
--   ql_private.scan_and_claim (session row FOR NO KEY UPDATE before the first
--   claim) and ql_private.claim_candidate (run + attempt FOR NO KEY UPDATE SKIP
--   LOCKED). Idempotency: by offer id + token digest.
-- Planning: every statement below runs with a generic plan (planned once per
--   connection, not per call) and sequential scans disabled, so each plan is the
--   index path whatever the statistics said when it was made (a plan cached on
--   an empty queue would otherwise stick to the connection once it fills).
--   JIT is off: with sequential scans disabled a tiny table's plan costs 1e10,
--   far above jit_above_cost, and compiling it took ~30 ms of a sub-ms pull.
-- SQLSTATEs: QL001 malformed argument; QL002 bound above cap; QL010 unknown
--   session; QL011 session replaced / wrong generation; QL012 session expired;
--   QL013 session closed; QL014 capabilities digest mismatch.
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
    v_worker uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    b record := ql_private.pull_bounds(p_bounds);
    result jsonb;
    s ql_private.worker_sessions;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    result := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker, 'offer.pull');
    IF result IS NOT NULL THEN
        RETURN result;
    END IF;
    -- Concurrent pulls of one offer id (a retry racing its own first request,
    -- whose ingress died mid-call) serialize here, so the later one always sees
    -- the earlier one's lease and replays it. An advisory lock writes no WAL.
    PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.offer:' || v_offer::text, 0));
    result := ql_private.recover_offer(v_worker, v_session, p_generation, v_offer, v_token);
    IF result IS NOT NULL THEN
        RETURN result;
    END IF;
    s := ql_private.session_fence(v_worker, v_session, p_generation, false);
    IF s.capabilities_digest
       <> 'sha256:' || encode(sha256(s.capabilities_canonical), 'hex') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL014',
            MESSAGE = 'stored session capabilities do not match their digest';
    END IF;
    IF ql_private.session_live_leases(s.session_id) >= s.slots THEN
        RETURN ql_private.idle_result('capacity_full', 0, 0, 0, 0,
            '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
    END IF;
    RETURN ql_private.scan_and_claim(s, v_offer, v_token, b.pages, b.page_size,
                                     b.claim_attempts);
END
$$;
REVOKE ALL ON FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb)
    TO ql_worker_ingress;
COMMENT ON FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb) IS
'One pull = claim or recover (SPEC 3.3). Caller: ql_worker_ingress. Authenticates first (denial audited, {status: denied}); replays an existing offer id ({status: idempotent|conflict}); session fences; bounded keyset scan + placement + atomic SKIP LOCKED claim ({status: offered|idle}). Writes only on claim or denial; idle pulls write nothing. SQLSTATEs: QL001 malformed argument, QL002 bound above cap, QL010-QL014 session fences.';
