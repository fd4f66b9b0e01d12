-- ql.throughput (SPEC §10): per minute of the window, runs dispatched (leases
-- claimed), succeeded and failed; every minute listed; older activity outside
-- the window; bad window -> QL006; ql_readonly reads, the ingress cannot.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4) r \gset
SELECT ql_test.fake_lease(:'r1', :'s1', true) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s1', true) AS o3 \gset
SELECT ql_test.fake_lease(:'r4', :'s1', true) AS o4 \gset
-- r4 was dispatched and failed an hour ago: outside a 15-minute window.
UPDATE ql_private.run_leases SET claimed_at = claimed_at - interval '1 hour' WHERE offer_id = :'o4'::uuid;
UPDATE ql_private.runs SET state = 'succeeded', finished_at = clock_timestamp()
 WHERE id IN (:'r1'::uuid, :'r2'::uuid);
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp() - interval '1 minute'
 WHERE id = :'r3'::uuid;
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp() - interval '1 hour'
 WHERE id = :'r4'::uuid;

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.throughput() AS t \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is(jsonb_array_length(:'t'::jsonb -> 'minutes'), 15, 'fifteen minutes listed, zeros included');
SELECT is((SELECT array_agg((e ->> 'minuteMs')::bigint - lag) FILTER (WHERE lag IS NOT NULL)
             FROM (SELECT e, lag((e ->> 'minuteMs')::bigint) OVER (ORDER BY o) AS lag
                     FROM jsonb_array_elements(:'t'::jsonb -> 'minutes') WITH ORDINALITY AS x(e, o)) y),
          array_fill(60000::bigint, ARRAY[14]), 'consecutive minutes, oldest first');
SELECT is((:'t'::jsonb -> 'minutes' -> 14 ->> 'minuteMs')::bigint,
          ql_private.epoch_ms(date_trunc('minute', clock_timestamp())), 'the current minute last');
SELECT is((SELECT jsonb_build_object('dispatched', sum((e ->> 'dispatched')::int),
                                     'succeeded', sum((e ->> 'succeeded')::int),
                                     'failed', sum((e ->> 'failed')::int))
             FROM jsonb_array_elements(:'t'::jsonb -> 'minutes') e),
          '{"dispatched": 3, "succeeded": 2, "failed": 1}'::jsonb,
          'window totals: 3 dispatched, 2 succeeded, 1 failed (the hour-old run is outside)');
SELECT is(:'t'::jsonb -> 'minutes' -> 13 ->> 'failed', '1', 'the failure of a minute ago in the previous minute');
SELECT is(:'t'::jsonb -> 'capped', '{"dispatched": false, "finished": false}'::jsonb, 'nothing capped');
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.throughput(p_minutes => 61)'), 'QL006 minutes', '61 minutes -> QL006 minutes');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.throughput()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
