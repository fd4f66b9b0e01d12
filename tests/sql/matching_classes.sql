-- ql_private.matching_classes: the placement classes that have runs waiting
-- (ready, or scheduled and due) AND whose required placement the capabilities
-- satisfy — sorted ids, '{}' when none; classes without waiting runs (claimed,
-- cancelled, or only in the future) are never returned; QL001 for capabilities
-- that are not an object (from placement_evaluate). The scheduled-run cases
-- beside the class pages are in class_candidate_page.sql.
BEGIN;
SELECT plan(10);
\ir fixtures.psql

CREATE FUNCTION pg_temp.mc(labels text DEFAULT '{}', runtimes text DEFAULT '{}') RETURNS integer[]
LANGUAGE sql AS $$
    SELECT ql_private.matching_classes(
        convert_from(ql_test.capabilities(4, labels, runtimes), 'UTF8')::jsonb)
$$;

SELECT is(pg_temp.mc(), '{}'::integer[], 'nothing enqueued: no class');

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT ql_test.publish('proj', 'py', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{},"runtimes":{"python":[">=3.10.0"]}},"preferred":[]}'))
    ->> 'taskId' AS py \gset
SELECT (ql_test.enqueue(:'plain'))[1] AS p0 \gset
SELECT (ql_test.enqueue(:'gpu'))[1] AS g0 \gset
SELECT (ql_test.enqueue(:'py'))[1] AS y0 \gset
SELECT placement_class AS plain_c FROM ql_private.runs WHERE id = :'p0' \gset
SELECT placement_class AS gpu_c FROM ql_private.runs WHERE id = :'g0' \gset
SELECT placement_class AS py_c FROM ql_private.runs WHERE id = :'y0' \gset

SELECT is(pg_temp.mc(), ARRAY[:plain_c], 'no label, no runtime: the plain class only');
SELECT is(pg_temp.mc('{"gpu":"yes"}', '{"python":"3.12.1"}'),
          (SELECT array_agg(c ORDER BY c) FROM unnest(ARRAY[:plain_c, :gpu_c, :py_c]) c),
          'a worker satisfying every class: all three, sorted by id');
SELECT is(pg_temp.mc('{"gpu":"no"}', '{"python":"3.9.18"}'), ARRAY[:plain_c],
          'a label of another value and a runtime below the range: the plain class only');
SELECT is(pg_temp.mc('{}', '{"python":"3.10.0"}'),
          (SELECT array_agg(c ORDER BY c) FROM unnest(ARRAY[:plain_c, :py_c]) c),
          'the runtime range''s lower bound itself matches');

-- Waiting only: the gpu run claimed, then the plain run cancelled.
SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(4, '{"gpu":"yes"}')) ->> 'sessionId' AS s1 \gset
SELECT ql_test.fake_lease(:'g0', :'s1', false);
SELECT is(pg_temp.mc('{"gpu":"yes"}'), ARRAY[:plain_c], 'a class whose only run is dispatching is not waiting');
UPDATE ql_private.runs SET state = 'cancelled' WHERE id = :'p0'::uuid;
SELECT is(pg_temp.mc('{"gpu":"yes"}'), '{}'::integer[], '... nor one whose run was cancelled');
-- A class whose only run is scheduled in the future, then due.
SELECT ql.enqueue_runs(:'plain', 0, 1, NULL, 3600000) #>> '{runIds,0}' AS later \gset
SELECT is(pg_temp.mc(), '{}'::integer[], 'a run due in an hour: its class is not waiting');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'later'::uuid;
SELECT is(pg_temp.mc(), ARRAY[:plain_c], 'once due it is');

SELECT throws_ok($$SELECT ql_private.matching_classes('[1]'::jsonb)$$, 'QL001',
                 'capabilities must be a JSON object', 'capabilities not an object -> QL001');

SELECT * FROM finish();
ROLLBACK;
