-- ql_private.ready_candidate_page: the page a pull reads in the steady state —
-- the ready queued runs alone (candidate_page's first source), never a scheduled
-- run or an expired offer (those are candidate_page's) — and that it stays
-- inlinable, so the pull's statement plans as one range scan of
-- runs_candidate_keyset (docs/EXPLAIN.md).
BEGIN;
SELECT plan(12);
\ir fixtures.psql

SELECT has_function('ql_private', 'ready_candidate_page',
                    ARRAY['smallint', 'bigint', 'uuid', 'integer', 'timestamp with time zone',
                          'pg_snapshot', 'xid8'],
                    'ql_private.ready_candidate_page(smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) exists');
SELECT is((SELECT l.lanname || '/' || p.provolatile::text || '/' || p.proisstrict || '/' || p.prosecdef
                  || '/' || p.proretset || '/' || coalesce(array_to_string(p.proconfig, ','), 'no SET')
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.ready_candidate_page(smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8)'::regprocedure),
          'sql/s/false/false/true/no SET',
          'inlinable: SQL, STABLE, not strict, not SECURITY DEFINER, set-returning, no SET clause');
SELECT hasnt_function('ql_private', 'scan_page', 'the four-source scan_page is gone (0014)');

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT r[1] AS h0, r[2] AS h1 FROM ql_test.enqueue(:'plain', 2, 5) r \gset
SELECT r[1] AS p0, r[2] AS p1, r[3] AS p2 FROM ql_test.enqueue(:'plain', 3, 0) r \gset

-- page(fn, after_run, limit) -> run ids in key order, of either page function.
CREATE FUNCTION pg_temp.page(fn text, after_run text, lim integer)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    result text[];
BEGIN
    EXECUTE format(
        'SELECT coalesce(array_agg(c.run_id::text ORDER BY c.priority DESC, c.queue_seq), ''{}'')
           FROM ql_private.%s($1, $2, $3, $4, clock_timestamp(), pg_current_snapshot(),
                              pg_current_xact_id_if_assigned()) c',
        CASE fn WHEN 'ready' THEN 'ready_candidate_page' ELSE 'candidate_page' END)
       INTO result
      USING (SELECT r.priority FROM ql_private.runs r WHERE r.id = after_run::uuid),
            (SELECT r.queue_seq FROM ql_private.runs r WHERE r.id = after_run::uuid),
            after_run::uuid, lim;
    RETURN result;
END
$$;

SELECT is(pg_temp.page('ready', NULL, 8), ARRAY[:'h0', :'h1', :'p0', :'p1', :'p2'],
          'every ready run, priority DESC then queue order');
SELECT is(pg_temp.page('ready', NULL, 8), pg_temp.page('whole', NULL, 8),
          'no due run, no expired offer: the same page as candidate_page');
SELECT is(pg_temp.page('ready', NULL, 2), ARRAY[:'h0', :'h1', :'p0'],
          'limit 2: limit + 1 rows (so truncated is exact)');
SELECT is(pg_temp.page('ready', :'h1', 2), ARRAY[:'p0', :'p1', :'p2'],
          'after the keyset position of h1: from p0 on');

-- A scheduled run that came due and an offer that expired unstarted are
-- candidate_page's sources only.
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'p1';
SELECT ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(4)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.fake_lease(:'h0', :'s1') AS o1 \gset
UPDATE ql_private.runs SET state = 'dispatching' WHERE id = :'h0';
UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'
 WHERE offer_id = :'o1'::uuid;
SELECT is(pg_temp.page('ready', NULL, 8), ARRAY[:'h1', :'p0', :'p2'],
          'neither the due scheduled run nor the expired offer''s run');
SELECT is(pg_temp.page('whole', NULL, 8), ARRAY[:'h0', :'h1', :'p0', :'p1', :'p2'],
          '... which candidate_page does read');

-- Inlined into the caller's statement: the keyset index scan, no function scan.
CREATE FUNCTION pg_temp.plan(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    result text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
        result := result || line || E'\n';
    END LOOP;
    RETURN result;
END
$$;
SET LOCAL enable_seqscan = off;
SELECT pg_temp.plan(
    'SELECT * FROM ql_private.ready_candidate_page(NULL, NULL, NULL, 8, now(),'
    ' pg_current_snapshot(), pg_current_xact_id_if_assigned()) c'
    ' ORDER BY -(c.priority::integer), c.queue_seq, c.run_id') AS ready_plan \gset
SELECT unalike(:'ready_plan'::text, '%Function Scan on ready_candidate_page%',
               'ready_candidate_page is inlined (no function scan of it)');
-- (Index or bitmap scan: on this small, unanalyzed table the planner may pick
-- either; the pull pins its plan to the index path, docs/EXPLAIN.md.)
SELECT alike(:'ready_plan'::text, '%Scan % runs_candidate_keyset%',
             'one scan of runs_candidate_keyset');
SELECT unalike(:'ready_plan'::text, '%runs_due%',
               'no scheduled-run source in the plan');

SELECT * FROM finish();
ROLLBACK;
