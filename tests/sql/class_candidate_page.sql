-- Placement classes (0006): placement_class_of, matching_classes and
-- class_candidate_page — the pages a pull reads when its first page had no
-- passing candidate, so matching runs behind a blocked head are reachable.
BEGIN;
SELECT plan(20);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT r[1] AS g0, r[2] AS g1, r[3] AS g2 FROM ql_test.enqueue(:'gpu', 3, 5) r \gset
SELECT r[1] AS p0, r[2] AS p1 FROM ql_test.enqueue(:'plain', 2, 0) r \gset
SELECT placement_class AS gpu_class FROM ql_private.runs WHERE id = :'g0' \gset
SELECT placement_class AS plain_class FROM ql_private.runs WHERE id = :'p0' \gset

SELECT isnt(:gpu_class, :plain_class, 'a distinct required placement is a distinct class');
SELECT is((SELECT count(DISTINCT placement_class) FROM ql_private.runs
            WHERE task_id = :'gpu'::uuid), 1::bigint, 'every run of a revision has its class');
SELECT is(ql_private.placement_class_of(
              (SELECT current_revision_id FROM ql_private.tasks WHERE id = :'gpu'::uuid)),
          :gpu_class, 'placement_class_of is stable: the existing class is returned');
SELECT throws_ok($$SELECT ql_private.placement_class_of(gen_random_uuid())$$, 'QL004',
                 'execution revision not found', 'unknown revision -> QL004');

SELECT is(ql_private.matching_classes(convert_from(ql_test.capabilities(), 'UTF8')::jsonb),
          ARRAY[:plain_class], 'a worker without the label matches only the plain class');
SELECT is(ql_private.matching_classes(convert_from(
              ql_test.capabilities(4, '{"gpu":"yes"}'), 'UTF8')::jsonb),
          ARRAY[least(:gpu_class, :plain_class), greatest(:gpu_class, :plain_class)],
          'a worker with the label matches both');

CREATE FUNCTION pg_temp.class_page(classes integer[], after_run text, lim integer)
RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(c.run_id::text ORDER BY c.priority DESC, c.queue_seq), '{}')
      FROM ql_private.class_candidate_page(
               classes,
               (SELECT priority FROM ql_private.runs WHERE id = after_run::uuid),
               (SELECT queue_seq FROM ql_private.runs WHERE id = after_run::uuid),
               after_run::uuid, lim) c
$$;

SELECT is(pg_temp.class_page(ARRAY[:plain_class], NULL, 8), ARRAY[:'p0', :'p1'],
          'only the given classes: the higher-priority gpu runs are jumped over');
SELECT is(pg_temp.class_page(ARRAY[:gpu_class, :plain_class], NULL, 8),
          ARRAY[:'g0', :'g1', :'g2', :'p0', :'p1'], 'several classes merge in key order');
SELECT is(pg_temp.class_page(ARRAY[:gpu_class, :plain_class], NULL, 2),
          ARRAY[:'g0', :'g1', :'g2'], 'limit + 1 rows across classes');
SELECT is(pg_temp.class_page(ARRAY[:gpu_class, :plain_class], :'g2', 8), ARRAY[:'p0', :'p1'],
          'keyset continues after the last row, across classes');
SELECT is(pg_temp.class_page('{}', NULL, 8), '{}'::text[], 'no class: empty page');

SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.proname = 'class_candidate_page'),
          'class_candidate_page is an inlinable SQL function');

-- Scheduled runs: those that came due are in the class pages (runs_class_due,
-- migration 0017) without the sweeper's promotion; those not yet due are not.
SELECT count(*) AS before_n FROM ql_private.class_candidate_page(
    (SELECT array_agg(id) FROM ql_private.placement_classes), NULL, NULL, NULL, 64) \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour'
 WHERE state = 'queued';
SELECT is((SELECT count(*) FROM ql_private.class_candidate_page(
               (SELECT array_agg(id) FROM ql_private.placement_classes), NULL, NULL, NULL, 64)),
          0::bigint, 'scheduled runs not yet due are not in the class pages');
SELECT is(ql_private.matching_classes(convert_from(
              ql_test.capabilities(4, '{"gpu":"yes"}'), 'UTF8')::jsonb),
          '{}'::integer[], 'a class whose runs are all in the future has nothing waiting');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second'
 WHERE state = 'queued';
SELECT is((SELECT count(*) FROM ql_private.class_candidate_page(
               (SELECT array_agg(id) FROM ql_private.placement_classes), NULL, NULL, NULL, 64)),
          :before_n::bigint, 'due scheduled runs are in the class pages, unpromoted');
SELECT cmp_ok(:before_n::bigint, '>', 0::bigint, '... which held runs before');
SELECT is(pg_temp.class_page(ARRAY[:plain_class], NULL, 8), ARRAY[:'p0', :'p1'],
          'due runs of a class, in key order');
SELECT is(ql_private.matching_classes(convert_from(ql_test.capabilities(), 'UTF8')::jsonb),
          ARRAY[:plain_class], 'a class with due runs is waiting');

-- Only classes with waiting runs are evaluated: 5,000 classes this worker would
-- match but that hold no run (stale: their runs are long gone) are not in the
-- result, nor is a class whose only runs are in flight.
UPDATE ql_private.runs SET due_at = NULL WHERE state = 'queued';
INSERT INTO ql_private.placement_classes (required)
SELECT jsonb_build_object('executors', '["remote-worker"]'::jsonb,
                          'labels', jsonb_build_object('stale', jsonb_build_array('v' || i)),
                          'runtimes', '{}'::jsonb)
  FROM generate_series(1, 5000) i;
SELECT is(cardinality(ql_private.matching_classes(convert_from(
              ql_test.capabilities(4, '{"stale":"v7"}'), 'UTF8')::jsonb)),
          1, 'a worker matching one of 5,000 stale classes gets only the waiting class');
UPDATE ql_private.runs SET state = 'dispatching' WHERE id IN (:'p0', :'p1');
SELECT is(ql_private.matching_classes(convert_from(ql_test.capabilities(), 'UTF8')::jsonb),
          '{}'::integer[], 'a class whose runs are all in flight has nothing waiting');

SELECT * FROM finish();
ROLLBACK;
