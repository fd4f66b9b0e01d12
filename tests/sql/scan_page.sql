-- ql_private.scan_page: the page a pull reads next — candidate_page's rows while
-- no placement classes are given, class_candidate_page's once they are — and
-- that it stays inlinable, so the pull's statement plans as the two branches
-- written in place (the keyset index scans of docs/EXPLAIN.md).
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT has_function('ql_private', 'scan_page',
                    ARRAY['integer[]', 'smallint', 'bigint', 'uuid', 'integer', 'timestamp with time zone',
                          'pg_snapshot', 'xid8'],
                    'ql_private.scan_page(integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) exists');
SELECT is((SELECT l.lanname || '/' || p.provolatile::text || '/' || p.proisstrict || '/' || p.prosecdef
                  || '/' || p.proretset || '/' || coalesce(array_to_string(p.proconfig, ','), 'no SET')
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.scan_page(integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8)'::regprocedure),
          'sql/s/false/false/true/no SET',
          'inlinable: SQL, STABLE, not strict, not SECURITY DEFINER, set-returning, no SET clause');

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT r[1] AS g0, r[2] AS g1, r[3] AS g2 FROM ql_test.enqueue(:'gpu', 3, 5) r \gset
SELECT r[1] AS p0, r[2] AS p1, r[3] AS p2 FROM ql_test.enqueue(:'plain', 3, 0) r \gset
SELECT placement_class AS gpu_class FROM ql_private.runs WHERE id = :'g0' \gset
SELECT placement_class AS plain_class FROM ql_private.runs WHERE id = :'p0' \gset

-- page(classes, after_run, limit) -> run ids in key order; the same for the two
-- page functions scan_page chooses between.
CREATE FUNCTION pg_temp.page(fn text, classes integer[], after_run text, lim integer)
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    result text[];
BEGIN
    EXECUTE format(
        'SELECT coalesce(array_agg(c.run_id::text ORDER BY c.priority DESC, c.queue_seq), ''{}'')
           FROM %s c', CASE fn
            WHEN 'scan' THEN 'ql_private.scan_page($1, $2, $3, $4, $5, clock_timestamp(),
                                   pg_current_snapshot(), pg_current_xact_id_if_assigned())'
            WHEN 'whole' THEN 'ql_private.candidate_page($2, $3, $4, $5, clock_timestamp(),
                                   pg_current_snapshot(), pg_current_xact_id_if_assigned())'
            ELSE 'ql_private.class_candidate_page($1, $2, $3, $4, $5, clock_timestamp(),
                      pg_current_snapshot(), pg_current_xact_id_if_assigned())' END)
       INTO result
      USING classes,
            (SELECT r.priority FROM ql_private.runs r WHERE r.id = after_run::uuid),
            (SELECT r.queue_seq FROM ql_private.runs r WHERE r.id = after_run::uuid),
            after_run::uuid, lim;
    RETURN result;
END
$$;

-- Whole queue while p_classes is NULL.
SELECT is(pg_temp.page('scan', NULL, NULL, 8), pg_temp.page('whole', NULL, NULL, 8),
          'classes NULL: the whole-queue page (candidate_page)');
SELECT is(pg_temp.page('scan', NULL, NULL, 8), ARRAY[:'g0', :'g1', :'g2', :'p0', :'p1', :'p2'],
          '... every candidate, priority DESC then queue order');
SELECT is(pg_temp.page('scan', NULL, NULL, 2), ARRAY[:'g0', :'g1', :'g2'],
          'limit 2: limit + 1 rows (so truncated is exact)');
SELECT is(pg_temp.page('scan', NULL, :'g1', 2), ARRAY[:'g2', :'p0', :'p1'],
          'after the keyset position of g1: from g2 on');

-- Only the given classes once the pull switched to them.
SELECT is(pg_temp.page('scan', ARRAY[:plain_class], NULL, 8), pg_temp.page('class', ARRAY[:plain_class], NULL, 8),
          'classes given: the class page (class_candidate_page)');
SELECT is(pg_temp.page('scan', ARRAY[:plain_class], NULL, 8), ARRAY[:'p0', :'p1', :'p2'],
          '... only runs of those classes: the gpu head is jumped over');
SELECT is(pg_temp.page('scan', ARRAY[:plain_class, :gpu_class], :'g2', 8), ARRAY[:'p0', :'p1', :'p2'],
          '... after a keyset position, across classes');
SELECT is(pg_temp.page('scan', '{}'::integer[], NULL, 8), '{}'::text[],
          'no matching class: an empty page');

-- Inlined into the caller's statement: the index scans, no function scan.
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
-- Stable arguments (now(), the snapshot functions), as the caller's plain values.
SELECT pg_temp.plan(format(
    'SELECT * FROM ql_private.scan_page(%s, NULL, NULL, NULL, 8, now(), pg_current_snapshot(),'
    '                                   pg_current_xact_id_if_assigned()) c'
    ' ORDER BY -(c.priority::integer), c.queue_seq, c.run_id', 'NULL')) AS whole_plan \gset
SELECT pg_temp.plan(format(
    'SELECT * FROM ql_private.scan_page(%s, NULL, NULL, NULL, 8, now(), pg_current_snapshot(),'
    '                                   pg_current_xact_id_if_assigned()) c'
    ' ORDER BY -(c.priority::integer), c.queue_seq, c.run_id', 'ARRAY[' || :plain_class || ']'))
    AS class_plan \gset
SELECT unalike(:'whole_plan' || :'class_plan', '%Function Scan on scan_page%',
               'scan_page is inlined (no function scan of it)');
-- (Index or bitmap scan: on this small, unanalyzed table the planner may pick
-- either; the pull pins its plan to the index path, docs/EXPLAIN.md.)
SELECT alike(:'whole_plan'::text, '%Scan % runs_candidate_keyset%',
             'classes NULL: the whole queue through runs_candidate_keyset');
SELECT alike(:'class_plan'::text, '%Scan % runs_class_keyset%',
             'classes given: only the classes, through runs_class_keyset');
SELECT alike(pg_temp.plan(
    'SELECT * FROM ql_private.scan_page(NULL, NULL, NULL, NULL, 8, clock_timestamp(),'
    '                                   pg_current_snapshot(), pg_current_xact_id_if_assigned())'),
    '%Function Scan on scan_page%',
    'a volatile argument (clock_timestamp()) defeats inlining: callers pass a plain value');

SELECT * FROM finish();
ROLLBACK;
