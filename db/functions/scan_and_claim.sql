-- ql_private.scan_and_claim(session, offer_id, token_digest, pages, page_size, claim_attempts) -> jsonb
--
-- Purpose: SPEC §3.3 steps 3–4 for a session that passed its fences. Reads at
--   most `pages` keyset pages of `page_size` candidates (each page reads
--   page_size + 1 rows so `truncated` is exact), evaluates placement once per
--   distinct execution revision, and after each page tries claims among its
--   passing candidates in (priority DESC, placementScore DESC, queue order), at
--   most `claim_attempts` times in all; the next page is read only when this one
--   yielded no claim. When a page had no passing candidate at all, the following
--   pages come from ql_private.class_candidate_page over the placement classes
--   the session matches (ql_private.matching_classes): a head of runs it cannot
--   take is jumped over instead of read page by page. Returns {status: offered, offer} or
--   {status: idle, reason, stats, truncated}.
-- No writes unless a claim is attempted: an idle pull generates zero WAL.
-- Before the first claim the session row is locked (FOR NO KEY UPDATE) and its
--   fences and free slots re-verified, so concurrent pulls of one session can
--   never exceed its slots and a replaced session can never gain a lease.
-- Per page, ONE statement reads the keyset page (inlined candidate_page);
--   placement is evaluated once per distinct revision per pull (verdicts kept in
--   arrays — a plain loop measured ~20 % cheaper per pull than one statement
--   with CTEs and window functions, whose executor start-up dominated); then ONE
--   claim_candidate call tries the page's passers (a single SKIP LOCKED
--   statement). `claimAttempts` counts the candidates a claim
--   locked and re-checked (at most claim_attempts); `races` every candidate lost
--   to a competing claim — passed over because it was locked or had been
--   claimed since the scan, or locked but no longer passing its fences.
-- Caller: ql.pull_offer (which pins search_path, a generic plan and no
--   sequential scans for everything below it). SQLSTATEs: QL010–QL013 from the
--   session re-check.
CREATE OR REPLACE FUNCTION ql_private.scan_and_claim(
    s ql_private.worker_sessions,
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
    now_ts timestamptz := clock_timestamp();
    -- In-progress transactions as of the pull's start: rows they hold are passed
    -- over by the scan (candidate_page); a later claimer's xid is above its xmax.
    snap pg_snapshot := pg_current_snapshot();
    own xid8 := pg_current_xact_id_if_assigned();
    classes integer[];        -- NULL: whole queue; else only these placement classes
    c record;
    claim record;
    run_ids uuid[];           -- this page's passers, indexed by claim rank
    scores integer[];
    passing integer;
    next_rank integer;
    examined_before integer := 0;
    priorities smallint[];
    rev_ids uuid[] := '{}';
    rev_passed boolean[] := '{}';
    rev_category text[] := '{}';
    rev_score integer[] := '{}';
    ev record;
    k integer;
    j integer;
    swap_id uuid;
    swap_int integer;
    after_priority smallint;
    after_seq bigint;
    after_id uuid;
    pages_read integer := 0;
    examined integer := 0;
    attempts integer := 0;
    races integer := 0;
    mm_executor integer := 0;
    mm_label integer := 0;
    mm_runtime integer := 0;
    truncated boolean := false;
    locked boolean := false;
    any_passed boolean := false;
BEGIN
    FOR page_no IN 1 .. p_pages LOOP
        truncated := false;
        pages_read := pages_read + 1;
        run_ids := '{}';
        scores := '{}';
        priorities := '{}';
        passing := 0;
        FOR c IN
            SELECT x.run_id, x.execution_revision_id, x.priority, x.queue_seq
              FROM (SELECT cp.run_id, cp.execution_revision_id, cp.priority, cp.queue_seq
                      FROM ql_private.candidate_page(after_priority, after_seq, after_id,
                                                     p_page_size, now_ts, snap, own) cp
                     WHERE classes IS NULL
                    UNION ALL
                    SELECT cc.run_id, cc.execution_revision_id, cc.priority, cc.queue_seq
                      FROM ql_private.class_candidate_page(classes, after_priority,
                               after_seq, after_id, p_page_size, now_ts, snap, own) cc
                     WHERE classes IS NOT NULL) x
             ORDER BY -(x.priority::integer), x.queue_seq, x.run_id
        LOOP
            IF examined - examined_before >= p_page_size THEN
                truncated := true;  -- the (limit + 1)th row: more candidates exist
                EXIT;
            END IF;
            examined := examined + 1;
            after_priority := c.priority;
            after_seq := c.queue_seq;
            after_id := c.run_id;
            -- Placement once per distinct revision per pull (a page is mostly one
            -- task): the verdicts are kept in arrays indexed alike.
            k := array_position(rev_ids, c.execution_revision_id);
            IF k IS NULL THEN
                SELECT pe.passed, pe.category, pe.score INTO ev
                  FROM ql_private.execution_revisions er,
                       ql_private.placement_evaluate(er.placement, s.capabilities) pe
                 WHERE er.id = c.execution_revision_id;
                rev_ids := rev_ids || c.execution_revision_id;
                rev_passed := rev_passed || ev.passed;
                rev_category := rev_category || ev.category;
                rev_score := rev_score || ev.score;
                k := cardinality(rev_ids);
            END IF;
            IF rev_passed[k] THEN
                passing := passing + 1;
                run_ids[passing] := c.run_id;
                scores[passing] := rev_score[k];
                priorities[passing] := c.priority;
            ELSIF rev_category[k] = 'executor' THEN
                mm_executor := mm_executor + 1;
            ELSIF rev_category[k] = 'label' THEN
                mm_label := mm_label + 1;
            ELSE
                mm_runtime := mm_runtime + 1;
            END IF;
        END LOOP;
        examined_before := examined;
        -- Scan order is (priority DESC, queue order); claim order puts a higher
        -- placementScore first within a priority: a stable insertion sort, run
        -- only when scores differ (without preferred terms they are all 0).
        IF passing > 1 AND EXISTS (SELECT 1 FROM unnest(scores) sc WHERE sc <> scores[1]) THEN
            FOR i IN 2 .. passing LOOP
                j := i;
                WHILE j > 1 AND priorities[j - 1] = priorities[j]
                      AND scores[j - 1] < scores[j] LOOP
                    swap_id := run_ids[j]; run_ids[j] := run_ids[j - 1]; run_ids[j - 1] := swap_id;
                    swap_int := scores[j]; scores[j] := scores[j - 1]; scores[j - 1] := swap_int;
                    j := j - 1;
                END LOOP;
            END LOOP;
        END IF;
        any_passed := any_passed OR passing > 0;

        -- Claim from this page before reading the next one: the common pull then
        -- costs one page. Pages come in key order, so only equal-priority
        -- candidates on a later page can outscore one claimed here.
        next_rank := 1;
        WHILE next_rank <= passing AND attempts < p_claim_attempts LOOP
            IF NOT locked THEN
                IF NOT ql_private.session_claim_lock(s) THEN
                    RETURN ql_private.idle_result('capacity_full', pages_read, examined,
                        attempts, races, jsonb_build_object('executor', mm_executor,
                        'label', mm_label, 'runtime', mm_runtime, 'capacity', 1), truncated);
                END IF;
                locked := true;
            END IF;
            claim := ql_private.claim_candidate(
                s, run_ids[next_rank:passing], scores[next_rank:passing],
                p_offer_id, p_token_digest);
            IF claim.offer IS NOT NULL THEN
                attempts := attempts + 1;
                races := races + claim.consumed - 1;
                RETURN jsonb_build_object('status', 'offered', 'offer', claim.offer);
            END IF;
            -- Nothing claimed: every candidate gone through was a race, and the
            -- one the statement locked (whose fence then failed) an attempt.
            IF claim.locked THEN
                attempts := attempts + 1;
            END IF;
            races := races + claim.consumed;
            next_rank := next_rank + claim.consumed;
        END LOOP;
        EXIT WHEN NOT truncated OR attempts >= p_claim_attempts;
        -- A first page without a passing candidate is a head this session cannot
        -- take: the next pages read only the runs of the placement classes it
        -- matches (runs_class_keyset), jumping over any number of others.
        IF passing = 0 AND classes IS NULL THEN
            classes := ql_private.matching_classes(s.capabilities);
            EXIT WHEN cardinality(classes) = 0;
        END IF;
    END LOOP;

    RETURN ql_private.idle_result(
        CASE WHEN examined = 0 THEN 'no_candidates'
             WHEN NOT any_passed THEN 'placement_mismatch'
             ELSE 'contention' END,
        pages_read, examined, attempts, races,
        jsonb_build_object('executor', mm_executor, 'label', mm_label,
                           'runtime', mm_runtime, 'capacity', 0),
        truncated);
END
$$;
REVOKE ALL ON FUNCTION ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer) IS
'Pull steps 3-4: bounded keyset scan (one statement per page; placement once per distinct revision per pull; after a first page without a passer, only the session''s matching placement classes), then one SKIP LOCKED claim over the page''s passers in (priority DESC, score DESC, queue order), up to claim_attempts; {status: offered|idle}. Writes only when claiming. QL010-QL013 from the session re-check.';
