-- ql_private.scan_and_claim(p_session, p_offer_id, p_token_digest, p_pages, p_page_size,
--                           p_claim_attempts) -> jsonb
--
-- Purpose: SPEC §3.3 steps 3–4 for a session that passed its fences: the page
--   loop of a pull. Reads at most `p_pages` keyset pages of `p_page_size`
--   candidates (each page reads p_page_size + 1 rows so `truncated` is exact)
--   from one of three sources, each its own statement (see "Page source"
--   below), evaluates placement once per distinct execution
--   revision, and after each page hands its passing candidates to the claim step
--   (ql_private.claim_page: claim order, session lock, SKIP LOCKED claims), at
--   most `p_claim_attempts` claim attempts in all; the next page is read only
--   when this one yielded no claim. When a first page had no passing candidate
--   at all, the following pages come from the placement classes the session
--   matches (ql_private.matching_classes, read through
--   ql_private.class_candidate_page — for a worker without the all-pools
--   grant ql_private.pool_class_candidate_page, the same within its granted
--   pools — from the head of the key order again;
--   ready and due runs of those classes): a head of runs it cannot take, ready
--   or due, is jumped over instead of read page by page. Returns {status: offered, offer} or
--   {status: idle, reason, stats, truncated}.
-- Page source: for a worker without the all-pools grant, a pool page over
--   the pools it holds a grant for — ql_private.pool_candidate_page (ready
--   and due runs) while a scheduled run is due or an offer expired unstarted,
--   else ql_private.pool_ready_candidate_page (ready runs alone) (SPEC
--   §13.1, §13.3: the keyset is per pool, runs_pool_keyset leads with the pool,
--   so other pools' runs are never read; a worker without any grant reads
--   nothing and is idle `no_candidates`), and once the pull switched to its
--   classes, ql_private.pool_class_candidate_page (migration 0024: one range
--   scan of runs_pool_class_keyset and of runs_pool_class_due per granted pool
--   and matching class — the class page within its pools, so a blocked head in
--   its own pool is jumped over too, SPEC §3.1). Otherwise the class page once
--   the pull switched to its classes; else
--   ql_private.candidate_page (ready runs, due scheduled runs and expired offers
--   merged) while a scheduled run is due or an offer expired unstarted at the
--   pull's `now` — two index probes (runs_due, run_leases_unstarted_expiry),
--   once per pull; else, the steady state, ql_private.ready_candidate_page (the
--   ready runs alone). Why three statements, not one with all sources under
--   one-time filters: a plan is started on every execution, branches that do
--   not run included, and that start-up was the largest single cost of a pull
--   (perf on a pull's backend; migration 0014). The two probes cannot change
--   what a page holds: sources they find empty at `now` are empty in the page.
-- Inputs: p_session (the session row, fences passed), p_offer_id, p_token_digest
--   (what a claim writes the lease with), p_pages, p_page_size,
--   p_claim_attempts (bounds already checked by ql_private.pull_bounds).
-- Fences: placement (ql_private.placement_evaluate) here; the session re-check
--   and every candidate fence in the claim step.
-- Writes: none unless a claim is attempted: an idle pull generates zero WAL.
-- Locks: none here; the claim step locks the session row before the pull's first
--   claim (FOR NO KEY UPDATE) and each try's run + attempt (SKIP LOCKED).
-- Cost: per page, ONE statement reads the keyset page; placement is evaluated
--   once per distinct revision per pull (verdicts kept in arrays — a plain loop
--   measured ~20 % cheaper per pull than one statement with CTEs and window
--   functions, whose executor start-up dominated); then one claim step, whose
--   every try is a single SKIP LOCKED statement. Stats: `claimAttempts` counts
--   the candidates a claim locked and re-checked (at most p_claim_attempts);
--   `races` every candidate lost to a competing claim — passed over because it
--   was locked or had been claimed since the scan, or locked but no longer
--   passing its fences.
-- Errors: QL010–QL014 from the session re-check.
-- Caller: ql.pull_offer, ql.pull_offers (which pin search_path, a generic plan and no
--   sequential scans for everything below it; in the same call: one round trip).
CREATE OR REPLACE FUNCTION ql_private.scan_and_claim(
    p_session ql_private.worker_sessions,
    p_offer_id uuid,
    p_token_digest bytea,
    p_pages integer,
    p_page_size integer,
    p_claim_attempts integer
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    -- In-progress transactions as of the pull's start: rows they hold are passed
    -- over by the scan (candidate_page); a later claimer's xid is above its xmax.
    v_snapshot pg_snapshot := pg_current_snapshot();
    v_own xid8 := pg_current_xact_id_if_assigned();
    v_classes integer[];        -- NULL: whole queue; else only these placement classes
    -- The pools the session's worker may take from (SPEC §13.1): NULL = every
    -- pool (the '*' grant); else the granted pools, read through their own
    -- keyset (ql_private.pool_candidate_page, SPEC §13.3). The claim re-checks
    -- the grant on the locked rows; this read only bounds the scan.
    v_pools uuid[] := (SELECT CASE WHEN w.all_pools THEN NULL
                                   ELSE ARRAY(SELECT g.pool_id
                                                FROM ql_private.worker_pool_grants g
                                               WHERE g.worker_id = w.id
                                               ORDER BY g.pool_id) END
                         FROM ql_private.workers w WHERE w.id = p_session.worker_id);
    v_candidate record;
    v_claim record;
    v_run_ids uuid[];           -- this page's passers, in scan order
    v_scores integer[];
    v_priorities smallint[];
    v_passing integer;
    v_examined_before integer := 0;
    v_rev_ids uuid[] := '{}';
    v_rev_passed boolean[] := '{}';
    v_rev_category text[] := '{}';
    v_rev_score integer[] := '{}';
    v_verdict record;
    v_k integer;
    v_after_priority smallint;
    v_after_seq bigint;
    v_after_id uuid;
    v_pages_read integer := 0;
    v_examined integer := 0;
    v_attempts integer := 0;
    v_races integer := 0;
    v_mm_executor integer := 0;
    v_mm_label integer := 0;
    v_mm_runtime integer := 0;
    v_truncated boolean := false;
    v_session_locked boolean := false;
    v_any_passed boolean := false;
    v_page refcursor;
    -- Whether the pull reads the whole queue (candidate_page) rather than the
    -- ready runs alone: a scheduled run is due or an offer expired unstarted at
    -- `now` (two index probes, once per pull; runs_due, run_leases_unstarted_expiry).
    -- Each probe reads the first entry of its index in index order (ORDER BY
    -- the indexed column, LIMIT 1), not an EXISTS with a range condition: a
    -- generic plan of that EXISTS made while run_leases was small walked
    -- run_leases_session_live_counted (every live lease of every session, with
    -- a heap fetch each) on every pull for the life of the connection; only an
    -- index ordered by the column serves the ORDER BY without a sort, so the
    -- planner picks it whatever the statistics (tests/sql/pull_offer.sql).
    v_whole_queue boolean := coalesce((
            SELECT dr.due_at FROM ql_private.runs dr
             WHERE dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
               AND dr.due_at IS NOT NULL
             ORDER BY dr.due_at LIMIT 1) <= v_now, false)
        OR coalesce((
            SELECT el.expires_at FROM ql_private.run_leases el
             WHERE el.released_at IS NULL AND el.started_at IS NULL
             ORDER BY el.expires_at LIMIT 1) <= v_now, false);
BEGIN
    IF v_pools IS NOT NULL AND cardinality(v_pools) = 0 THEN
        -- No grant: nothing this worker may take, so nothing is read (SPEC §13.1).
        RETURN ql_private.idle_result('no_candidates', 0, 0, 0, 0,
            '{"executor":0,"label":0,"runtime":0,"capacity":0}'::jsonb, false);
    END IF;
    FOR v_page_no IN 1 .. p_pages LOOP
        v_truncated := false;
        v_pages_read := v_pages_read + 1;
        v_run_ids := '{}';
        v_scores := '{}';
        v_priorities := '{}';
        v_passing := 0;
        -- The page's source, each its own statement (a plan is started on every
        -- execution, so none carries the others' branches): the session's
        -- placement classes once the pull switched to them (within the granted
        -- pools for a worker without the all-pools grant); the whole queue
        -- (three merged sources) while a scheduled run is due or an offer expired
        -- unstarted; else, the steady state, the ready runs alone.
        IF v_pools IS NOT NULL AND v_classes IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_class_candidate_page(v_pools, v_classes,
                           v_after_priority, v_after_seq, v_after_id, p_page_size, v_now,
                           v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_pools IS NOT NULL AND v_whole_queue THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_candidate_page(v_pools, v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_pools IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_ready_candidate_page(v_pools, v_after_priority,
                           v_after_seq, v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_classes IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.class_candidate_page(v_classes, v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_whole_queue THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.candidate_page(v_after_priority, v_after_seq, v_after_id,
                                                 p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSE
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.ready_candidate_page(v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        END IF;
        LOOP
            FETCH v_page INTO v_candidate;
            EXIT WHEN NOT FOUND;
            IF v_examined - v_examined_before >= p_page_size THEN
                v_truncated := true;  -- the (limit + 1)th row: more candidates exist
                EXIT;
            END IF;
            v_examined := v_examined + 1;
            v_after_priority := v_candidate.priority;
            v_after_seq := v_candidate.queue_seq;
            v_after_id := v_candidate.run_id;
            -- Placement once per distinct revision per pull (a page is mostly one
            -- task): the verdicts are kept in arrays indexed alike.
            v_k := array_position(v_rev_ids, v_candidate.execution_revision_id);
            IF v_k IS NULL THEN
                SELECT pe.passed, pe.category, pe.score INTO v_verdict
                  FROM ql_private.execution_revisions er,
                       ql_private.placement_evaluate(er.placement, p_session.capabilities) pe
                 WHERE er.id = v_candidate.execution_revision_id;
                v_rev_ids := v_rev_ids || v_candidate.execution_revision_id;
                v_rev_passed := v_rev_passed || v_verdict.passed;
                v_rev_category := v_rev_category || v_verdict.category;
                v_rev_score := v_rev_score || v_verdict.score;
                v_k := cardinality(v_rev_ids);
            END IF;
            IF v_rev_passed[v_k] THEN
                v_passing := v_passing + 1;
                v_run_ids[v_passing] := v_candidate.run_id;
                v_scores[v_passing] := v_rev_score[v_k];
                v_priorities[v_passing] := v_candidate.priority;
            ELSIF v_rev_category[v_k] = 'executor' THEN
                v_mm_executor := v_mm_executor + 1;
            ELSIF v_rev_category[v_k] = 'label' THEN
                v_mm_label := v_mm_label + 1;
            ELSE
                v_mm_runtime := v_mm_runtime + 1;
            END IF;
        END LOOP;
        CLOSE v_page;
        v_examined_before := v_examined;
        v_any_passed := v_any_passed OR v_passing > 0;

        -- Claim from this page before reading the next one: the common pull then
        -- costs one page.
        IF v_passing > 0 AND v_attempts < p_claim_attempts THEN
            v_claim := ql_private.claim_page(
                p_session, v_run_ids, v_scores, v_priorities, p_offer_id, p_token_digest,
                p_claim_attempts - v_attempts, v_session_locked);
            v_attempts := v_attempts + v_claim.attempts;
            v_races := v_races + v_claim.races;
            v_session_locked := v_claim.session_locked;
            IF v_claim.offer IS NOT NULL THEN
                RETURN jsonb_build_object('status', 'offered', 'offer', v_claim.offer);
            END IF;
            IF v_claim.capacity_full THEN
                RETURN ql_private.idle_result('capacity_full', v_pages_read, v_examined,
                    v_attempts, v_races, jsonb_build_object('executor', v_mm_executor,
                    'label', v_mm_label, 'runtime', v_mm_runtime, 'capacity', 1), v_truncated);
            END IF;
        END IF;
        EXIT WHEN NOT v_truncated OR v_attempts >= p_claim_attempts;
        -- The class-page fallback: a first page without a passing candidate is a
        -- head this session cannot take, so the next pages read only the runs of
        -- the placement classes it matches (runs_class_keyset), jumping over any
        -- number of others.
        -- The class pages start from the head of the key order again: no run
        -- of a matching class was in the first page (it would have passed), but
        -- due runs of one may sit before its last key (that page's due source
        -- read only the earliest-due runs), and must not be jumped over.
        -- A worker restricted to granted pools reads the same classes within
        -- its pools only (pool_class_candidate_page: the pool x class keysets).
        IF v_passing = 0 AND v_classes IS NULL THEN
            v_classes := ql_private.matching_classes(p_session.capabilities);
            EXIT WHEN cardinality(v_classes) = 0;
            v_after_priority := NULL;
            v_after_seq := NULL;
            v_after_id := NULL;
        END IF;
    END LOOP;

    RETURN ql_private.idle_result(
        CASE WHEN v_examined = 0 THEN 'no_candidates'
             WHEN NOT v_any_passed THEN 'placement_mismatch'
             ELSE 'contention' END,
        v_pages_read, v_examined, v_attempts, v_races,
        jsonb_build_object('executor', v_mm_executor, 'label', v_mm_label,
                           'runtime', v_mm_runtime, 'capacity', 0),
        v_truncated);
END
$$;
REVOKE ALL ON FUNCTION ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer) FROM PUBLIC;
