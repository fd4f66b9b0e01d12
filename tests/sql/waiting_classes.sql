-- ql_private.waiting_classes (0017): the placement classes with a ready queued
-- run or a scheduled one due by the given time — and no other class, however
-- many exist.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT r[1] AS p0 FROM ql_test.enqueue(:'plain', 1) r \gset
SELECT r[1] AS g0 FROM ql_test.enqueue(:'gpu', 1) r \gset
SELECT placement_class AS plain_class FROM ql_private.runs WHERE id = :'p0' \gset
SELECT placement_class AS gpu_class FROM ql_private.runs WHERE id = :'g0' \gset
INSERT INTO ql_private.placement_classes (required)
SELECT jsonb_build_object('executors', '["remote-worker"]'::jsonb,
                          'labels', jsonb_build_object('stale', jsonb_build_array('v' || i)),
                          'runtimes', '{}'::jsonb)
  FROM generate_series(1, 100) i;

CREATE FUNCTION pg_temp.waiting(due_by timestamptz DEFAULT clock_timestamp()) RETURNS integer[]
LANGUAGE sql AS $$
    SELECT coalesce(array_agg(w ORDER BY w), '{}') FROM ql_private.waiting_classes(due_by) w
$$;

SELECT is(pg_temp.waiting(), ARRAY[least(:plain_class, :gpu_class), greatest(:plain_class, :gpu_class)],
          'the classes with ready queued runs, none of the 100 without a run');
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour' WHERE id = :'g0';
SELECT is(pg_temp.waiting(), ARRAY[:plain_class], 'a class whose only run is due later is not waiting now');
SELECT is(pg_temp.waiting('infinity'), ARRAY[least(:plain_class, :gpu_class), greatest(:plain_class, :gpu_class)],
          '... but is by infinity (what retention keeps)');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'g0';
SELECT is(pg_temp.waiting(), ARRAY[least(:plain_class, :gpu_class), greatest(:plain_class, :gpu_class)],
          'a scheduled run that came due makes its class waiting');
UPDATE ql_private.runs SET state = 'dispatching' WHERE id = :'p0';
SELECT is(pg_temp.waiting(), ARRAY[:gpu_class], 'a run in flight is not waiting');
UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'g0';
SELECT is(pg_temp.waiting('infinity'), '{}'::integer[], 'nor is a cancel-requested run');

SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.proname = 'waiting_classes'),
          'waiting_classes is an inlinable SQL function (the caller''s plan settings hold)');

SELECT * FROM finish();
ROLLBACK;
