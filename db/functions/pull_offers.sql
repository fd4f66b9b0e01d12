-- ql.pull_offers(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
--                p_offer_ids, p_token_digests, p_bounds DEFAULT NULL) -> jsonb
--
-- Purpose: a batched pull (SPEC §18.1, R-BATCH): up to 16 (offer id, lease token)
--   pairs of one session in one call and one round trip, each claimed or
--   recovered by exactly the rules of a single pull (SPEC §3.3, ql.pull_offer),
--   with ONE credential check and ONE read of the session for the batch.
--   0. validate arguments (1–16 pairs, distinct offer ids, 32-byte digests);
--      authenticate the credential once (a denial is recorded and returned as
--      {status: denied, httpStatus, reason}) — before anything else is read;
--   1. every offer id's transaction advisory lock (the one ql.pull_offer takes),
--      in offer-id order so two batches sharing ids never deadlock; then ONE
--      statement reads which ids already have a lease, the session row and its
--      live-lease count;
--   2. recover first: each existing id is replayed (its same offer, rebuilt
--      from the durable lease) or refused with its category
--      (ql_private.recover_offer, the single pull's step 1);
--   3. only if a new id is left: the session fences and capabilities digest
--      (as ql.pull_offer: a failing fence calls ql_private.session_fence for
--      its precise error, raised for the whole batch) and the free slots
--      (slots - live leases; none -> idle capacity_full);
--   4. the new ids in request order, at most as many as free slots: each one
--      is a single pull's steps 3–4 (ql_private.scan_and_claim — bounded keyset
--      scan, placement, the session row locked and its slots re-counted on the
--      locked row before every claim, SKIP LOCKED claim with every candidate
--      fence re-checked); the first idle answer ends the batch (a later id
--      would find the same queue).
--   A retry of the same batch returns the same offer for every id that was
--   claimed (step 2) and tries the ids that were not (step 4).
-- Returns {status: batch, offers: [offer@v1 projection …] (replays and claims,
--   in the order of their offer ids in the request), conflicts: [{offerId, category} …], idle: NULL |
--   {reason, stats, truncated}, recovered: how many of the offers are replays
--   (the single pull's `idempotent`)} — idle is set when some new id was not claimed.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id (lowercase canonical UUIDs), p_generation (>= 1), p_offer_ids
--   (1–16 distinct canonical UUIDs), p_token_digests (SHA-256 of each lease
--   token, indexed like p_offer_ids), p_bounds (per claim, as ql.pull_offer;
--   ql_private.pull_bounds).
-- Fences: the credential; each existing offer id's replay fences
--   (ql_private.recover_fence); the session fence (read once; re-checked on
--   the locked row before each claim, ql_private.session_claim_lock); every
--   candidate fence on the locked rows (ql_private.claim_candidate).
-- Writes: only claims (per claim: lease + run -> dispatching + one
--   run.dispatched event) or a denial audit row. An idle batch and a batch of
--   replays write nothing (zero WAL).
-- Locks: advisory xact locks on the offer ids; the session row FOR NO KEY
--   UPDATE before the first claim; run + attempt FOR NO KEY UPDATE SKIP LOCKED.
-- Idempotency: by offer id + token digest, per pair.
-- Planning: as ql.pull_offer (generic plans, no sequential scans, no JIT).
-- Errors: QL001 malformed argument (count, duplicate id, digest, generation);
--   QL002 bound above cap; QL010–QL015 session fences (only when a new id is
--   to be claimed); QL014 capabilities digest mismatch.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.pull_offers(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_ids text[],
    p_token_digests bytea[],
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
    v_bounds record := ql_private.pull_bounds(p_bounds);
    v_count integer := coalesce(cardinality(p_offer_ids), 0);
    v_offer_ids uuid[] := '{}';
    v_digests bytea[] := '{}';
    v_result jsonb;
    v_read record;
    v_session ql_private.worker_sessions;
    v_live integer;
    v_free integer;
    v_offers jsonb[] := '{}';        -- by request position (NULL: no offer for it)
    v_conflicts jsonb := '[]'::jsonb;
    v_recovered integer := 0;        -- offers replayed, not claimed (the ingress counts them)
    v_idle jsonb;
    v_new integer[] := '{}';
    v_i integer;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF v_count < 1 OR v_count > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'offers must hold 1 to 16 entries';
    END IF;
    IF coalesce(cardinality(p_token_digests), 0) <> v_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'tokenDigests must be indexed like offerIds';
    END IF;
    FOR v_i IN 1 .. v_count LOOP
        v_offer_ids := v_offer_ids || ql_private.parse_uuid(p_offer_ids[v_i], 'offerId');
        v_digests := v_digests || ql_private.require_digest(p_token_digests[v_i], 'tokenDigest');
    END LOOP;
    IF (SELECT count(DISTINCT o) FROM unnest(v_offer_ids) o) <> v_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'offer ids must be distinct';
    END IF;
    v_result := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'offer.pull');
    IF v_result IS NOT NULL THEN
        RETURN v_result;
    END IF;
    -- The single pull's lock per offer id (a retry racing its own first request
    -- waits for it), taken in one order so overlapping batches cannot deadlock.
    PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.offer:' || o::text, 0))
       FROM unnest(v_offer_ids) o ORDER BY o;
    SELECT ARRAY(SELECT l.offer_id FROM ql_private.run_leases l
                  WHERE l.offer_id = ANY (v_offer_ids)) AS replays,
           ws AS session,
           (SELECT count(*)::integer FROM ql_private.run_leases l
             WHERE l.session_id = ws.session_id AND l.released_at IS NULL
               AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp())) AS live
      INTO v_read
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws
        ON ws.session_id = v_session_id AND ws.worker_id = v_worker_id;
    FOR v_i IN 1 .. v_count LOOP
        IF v_offer_ids[v_i] = ANY (v_read.replays) THEN
            v_result := ql_private.recover_offer(v_worker_id, v_session_id, p_generation,
                                                 v_offer_ids[v_i], v_digests[v_i]);
            IF v_result ->> 'status' = 'idempotent' THEN
                v_offers[v_i] := v_result -> 'offer';
                v_recovered := v_recovered + 1;
            ELSE
                v_conflicts := v_conflicts || jsonb_build_array(jsonb_build_object(
                    'offerId', v_offer_ids[v_i], 'category', v_result ->> 'category'));
            END IF;
        ELSE
            v_new := v_new || v_i;
        END IF;
    END LOOP;
    IF cardinality(v_new) > 0 THEN
        v_session := v_read.session;
        v_live := v_read.live;
        IF v_session.session_id IS NULL OR v_session.generation <> p_generation
           OR v_session.state <> 'active' OR v_session.expires_at <= clock_timestamp() THEN
            v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
            v_live := ql_private.session_live_leases(v_session.session_id);
        END IF;
        IF v_session.capabilities_digest
           <> 'sha256:' || encode(sha256(v_session.capabilities_canonical), 'hex') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL014',
                MESSAGE = 'stored session capabilities do not match their digest';
        END IF;
        v_free := v_session.slots - v_live;
        IF v_free <= 0 THEN
            v_idle := ql_private.idle_result('capacity_full', 0, 0, 0, 0,
                '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
        END IF;
        FOREACH v_i IN ARRAY v_new LOOP
            EXIT WHEN v_idle IS NOT NULL;
            IF v_free <= 0 THEN
                -- Every free slot was filled by this batch: the rest waits.
                v_idle := ql_private.idle_result('capacity_full', 0, 0, 0, 0,
                    '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
                EXIT;
            END IF;
            v_result := ql_private.scan_and_claim(v_session, v_offer_ids[v_i], v_digests[v_i],
                                                  v_bounds.pages, v_bounds.page_size,
                                                  v_bounds.claim_attempts);
            IF v_result ->> 'status' = 'offered' THEN
                v_offers[v_i] := v_result -> 'offer';
                v_free := v_free - 1;
            ELSE
                v_idle := v_result - 'status';
            END IF;
        END LOOP;
    END IF;
    RETURN jsonb_build_object('status', 'batch',
                              'offers', coalesce((SELECT jsonb_agg(o ORDER BY n)
                                                    FROM unnest(v_offers) WITH ORDINALITY AS u(o, n)
                                                   WHERE o IS NOT NULL), '[]'::jsonb),
                              'conflicts', v_conflicts, 'idle', v_idle,
                              'recovered', v_recovered);
END
$$;
REVOKE ALL ON FUNCTION ql.pull_offers(text, bytea, text, text, bigint, text[], bytea[], jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.pull_offers(text, bytea, text, text, bigint, text[], bytea[], jsonb)
    TO ql_worker_ingress;
