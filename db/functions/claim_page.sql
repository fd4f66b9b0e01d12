-- ql_private.claim_page(p_session, p_run_ids, p_scores, p_priorities, p_offer_id,
--                       p_token_digest, p_attempts_left, p_session_locked)
--   -> (offer, attempts, races, session_locked, capacity_full)
--
-- Purpose: the claim step of one keyset page of a pull (SPEC §3.2 claim order,
--   §3.3 step 3). p_run_ids are the page's passing candidates in scan order
--   (priority DESC, queue order) with their placement scores and priorities. It
--   puts a higher placementScore first within a priority (claim order: priority
--   DESC, score DESC, queue order; a stable insertion sort, run only when the
--   scores differ — without preferred terms they are all 0), then hands the rest
--   of the list to ql_private.claim_candidate (ONE SKIP LOCKED statement per
--   try) until a claim succeeds, the list is used up, or p_attempts_left claim
--   attempts were made. Only equal-priority candidates on a later page can
--   outscore one claimed here, since pages come in key order.
-- Inputs: p_session (the session row that passed its fences), p_run_ids,
--   p_scores, p_priorities (the page's passers, indexed alike, scan order),
--   p_offer_id, p_token_digest (what the lease is written with), p_attempts_left
--   (what is left of the pull's claim-attempt budget), p_session_locked (whether
--   this pull already holds the session lock).
-- Returns offer = the offer@v1 projection of the claim, NULL when nothing was
--   claimed; attempts = candidates a claim locked and re-checked; races =
--   candidates lost to a competing claim (passed over because locked or claimed
--   since the scan, or locked but no longer passing its fences); session_locked
--   = whether the pull now holds the session lock; capacity_full = the session
--   had no free slot at the lock (nothing tried).
-- Fences: before its first claim attempt of the pull, the session row is locked
--   and re-verified (ql_private.session_claim_lock: still active, same
--   generation, unexpired, capabilities unchanged, a free slot), so concurrent
--   pulls of one session can never exceed its slots and a replaced session can
--   never gain a lease; every candidate fence is re-checked on the locked rows by
--   ql_private.claim_candidate.
-- Writes: only a claim (ql_private.claim_candidate: one lease, the run ->
--   dispatching, one run.dispatched event).
-- Locks: the session row FOR NO KEY UPDATE (once per pull, when
--   p_session_locked is false); each try's run + attempt FOR NO KEY UPDATE SKIP
--   LOCKED.
-- Errors: QL010–QL014 from the session re-check.
-- Caller: ql_private.scan_and_claim (once per page that has passing candidates).
CREATE OR REPLACE FUNCTION ql_private.claim_page(
    p_session ql_private.worker_sessions,
    p_run_ids uuid[],
    p_scores integer[],
    p_priorities smallint[],
    p_offer_id uuid,
    p_token_digest bytea,
    p_attempts_left integer,
    p_session_locked boolean,
    OUT offer jsonb,
    OUT attempts integer,
    OUT races integer,
    OUT session_locked boolean,
    OUT capacity_full boolean
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_run_ids uuid[] := p_run_ids;
    v_scores integer[] := p_scores;
    v_count integer := cardinality(p_run_ids);
    v_claim record;
    v_next integer := 1;
    v_j integer;
    v_swap_id uuid;
    v_swap_score integer;
BEGIN
    attempts := 0;
    races := 0;
    session_locked := p_session_locked;
    capacity_full := false;
    IF v_count > 1 AND EXISTS (SELECT 1 FROM unnest(v_scores) sc WHERE sc <> v_scores[1]) THEN
        FOR v_i IN 2 .. v_count LOOP
            v_j := v_i;
            WHILE v_j > 1 AND p_priorities[v_j - 1] = p_priorities[v_j]
                  AND v_scores[v_j - 1] < v_scores[v_j] LOOP
                v_swap_id := v_run_ids[v_j];
                v_run_ids[v_j] := v_run_ids[v_j - 1];
                v_run_ids[v_j - 1] := v_swap_id;
                v_swap_score := v_scores[v_j];
                v_scores[v_j] := v_scores[v_j - 1];
                v_scores[v_j - 1] := v_swap_score;
                v_j := v_j - 1;
            END LOOP;
        END LOOP;
    END IF;

    WHILE v_next <= v_count AND attempts < p_attempts_left LOOP
        IF NOT session_locked THEN
            IF NOT ql_private.session_claim_lock(p_session) THEN
                capacity_full := true;
                RETURN;
            END IF;
            session_locked := true;
        END IF;
        v_claim := ql_private.claim_candidate(
            p_session, v_run_ids[v_next:v_count], v_scores[v_next:v_count],
            p_offer_id, p_token_digest);
        IF v_claim.offer IS NOT NULL THEN
            offer := v_claim.offer;
            attempts := attempts + 1;
            races := races + v_claim.consumed - 1;
            RETURN;
        END IF;
        -- Nothing claimed: every candidate gone through was a race, and the
        -- one the statement locked (whose fence then failed) an attempt.
        IF v_claim.locked THEN
            attempts := attempts + 1;
        END IF;
        races := races + v_claim.consumed;
        v_next := v_next + v_claim.consumed;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION ql_private.claim_page(
    ql_private.worker_sessions, uuid[], integer[], smallint[], uuid, bytea, integer, boolean)
    FROM PUBLIC;
