-- ql_private.scan_and_claim(session, offer_id, token_digest, pages, page_size, claim_attempts) -> jsonb
--
-- Purpose: SPEC §3.3 steps 3–4 for a session that passed its fences. Reads at
--   most `pages` keyset pages of `page_size` candidates (each page reads
--   page_size + 1 rows so `truncated` is exact), evaluates placement once per
--   distinct execution revision, and after each page tries claims among its
--   passing candidates in (priority DESC, placementScore DESC, queue order), at
--   most `claim_attempts` times in all; the next page is read only when this one
--   yielded no claim. Returns {status: offered, offer} or
--   {status: idle, reason, stats, truncated}.
-- No writes unless a claim is attempted: an idle pull generates zero WAL.
-- Before the first claim the session row is locked (FOR NO KEY UPDATE) and its
--   fences and free slots re-verified, so concurrent pulls of one session can
--   never exceed its slots and a replaced session can never gain a lease.
-- Caller: ql.pull_offer. SQLSTATEs: QL010–QL013 from the session re-check.
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
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    p record;
    ev record;
    evals jsonb := '{}'::jsonb;
    verdict jsonb;
    passers jsonb := '[]'::jsonb;
    mismatches jsonb := '{"executor":0,"label":0,"runtime":0,"capacity":0}'::jsonb;
    after_priority smallint;
    after_seq bigint;
    after_id uuid;
    rows_in_page integer;
    pages_read integer := 0;
    examined integer := 0;
    attempts integer := 0;
    races integer := 0;
    truncated boolean := false;
    lease_id bigint;
    locked boolean := false;
    any_passed boolean := false;
BEGIN
    FOR page_no IN 1 .. p_pages LOOP
        rows_in_page := 0;
        truncated := false;
        pages_read := pages_read + 1;
        passers := '[]'::jsonb;
        FOR c IN SELECT * FROM ql_private.candidate_page(after_priority, after_seq, after_id,
                                                             p_page_size)
        LOOP
            rows_in_page := rows_in_page + 1;
            IF rows_in_page > p_page_size THEN
                truncated := true;  -- the (limit + 1)th row: more candidates exist
                EXIT;
            END IF;
            examined := examined + 1;
            after_priority := c.priority;
            after_seq := c.queue_seq;
            after_id := c.run_id;
            verdict := evals -> c.execution_revision_id::text;
            IF verdict IS NULL THEN
                SELECT pe.passed, pe.category, pe.score INTO ev
                  FROM ql_private.execution_revisions er,
                       ql_private.placement_evaluate(er.placement, s.capabilities) pe
                 WHERE er.id = c.execution_revision_id;
                verdict := jsonb_build_object('passed', ev.passed, 'category', ev.category,
                                              'score', ev.score);
                evals := evals || jsonb_build_object(c.execution_revision_id::text, verdict);
            END IF;
            IF (verdict ->> 'passed')::boolean THEN
                passers := passers || jsonb_build_object(
                    'attempt_id', c.attempt_id, 'revision_id', c.execution_revision_id,
                    'priority', c.priority, 'score', (verdict ->> 'score')::integer,
                    'queue_seq', c.queue_seq);
            ELSE
                mismatches := jsonb_set(mismatches, ARRAY[verdict ->> 'category'],
                    to_jsonb((mismatches ->> (verdict ->> 'category'))::integer + 1));
            END IF;
        END LOOP;
        any_passed := any_passed OR jsonb_array_length(passers) > 0;

        -- Claim from this page before reading the next one: the common pull then
        -- costs one page. Pages come in key order, so only equal-priority
        -- candidates on a later page can outscore one claimed here.
        FOR p IN SELECT * FROM jsonb_to_recordset(passers) AS x(
                     attempt_id uuid, revision_id uuid, priority integer, score integer,
                     queue_seq bigint)
                 ORDER BY x.priority DESC, x.score DESC, x.queue_seq
        LOOP
            EXIT WHEN attempts >= p_claim_attempts;
            IF NOT locked THEN
                IF NOT ql_private.session_claim_lock(s) THEN
                    mismatches := jsonb_set(mismatches, '{capacity}', '1'::jsonb);
                    RETURN ql_private.idle_result('capacity_full', pages_read, examined,
                                                  attempts, races, mismatches, truncated);
                END IF;
                locked := true;
            END IF;
            attempts := attempts + 1;
            BEGIN
                lease_id := ql_private.claim_candidate(s, p.attempt_id, p.revision_id,
                                                       p.score, p_offer_id, p_token_digest);
            EXCEPTION WHEN unique_violation THEN
                -- A concurrent pull with the same offer id committed first: this is a
                -- replay, answered from the durable lease (never a second lease).
                RETURN ql_private.recover_offer(s.worker_id, s.session_id, s.generation,
                                                p_offer_id, p_token_digest);
            END;
            IF lease_id IS NOT NULL THEN
                RETURN jsonb_build_object('status', 'offered',
                                          'offer', ql_private.offer_projection(lease_id));
            END IF;
            races := races + 1;
        END LOOP;
        EXIT WHEN NOT truncated OR attempts >= p_claim_attempts;
    END LOOP;

    RETURN ql_private.idle_result(
        CASE WHEN examined = 0 THEN 'no_candidates'
             WHEN NOT any_passed THEN 'placement_mismatch'
             ELSE 'contention' END,
        pages_read, examined, attempts, races, mismatches, truncated);
END
$$;
REVOKE ALL ON FUNCTION ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer) IS
'Pull steps 3-4: bounded keyset scan, placement per revision, claims in (priority DESC, score DESC, queue order) up to claim_attempts; {status: offered|idle}. Writes only when claiming. QL010-QL013 from the session re-check.';
