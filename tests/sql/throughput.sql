-- ql.throughput (SPEC §10): per minute of the window, runs dispatched (leases
-- claimed), succeeded and failed; every minute listed; older activity outside
-- the window; bad window -> QL006; ql_readonly reads, the ingress cannot.
-- Times are pinned to one minute start (m0) taken once and assertions find
-- minutes by their minuteMs key: the test passes across a minute boundary.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4) r \gset
SELECT ql_test.fake_lease(:'r1', :'s1', true) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s1', true) AS o3 \gset
SELECT ql_test.fake_lease(:'r4', :'s1', true) AS o4 \gset
SELECT date_trunc('minute', clock_timestamp()) AS m0 \gset
SELECT ql_private.epoch_ms(:'m0'::timestamptz) AS m0_ms,
       ql_private.epoch_ms(:'m0'::timestamptz - interval '1 minute') AS m1_ms \gset
-- r1..r3 dispatched in minute m0; r4 dispatched and failed an hour before:
-- outside a 15-minute window.
UPDATE ql_private.run_leases SET claimed_at = :'m0'::timestamptz
 WHERE offer_id IN (:'o1'::uuid, :'o2'::uuid, :'o3'::uuid);
UPDATE ql_private.run_leases SET claimed_at = :'m0'::timestamptz - interval '1 hour' WHERE offer_id = :'o4'::uuid;
UPDATE ql_private.runs SET state = 'succeeded', finished_at = :'m0'::timestamptz
 WHERE id IN (:'r1'::uuid, :'r2'::uuid);
UPDATE ql_private.runs SET state = 'failed', finished_at = :'m0'::timestamptz - interval '1 minute'
 WHERE id = :'r3'::uuid;
UPDATE ql_private.runs SET state = 'failed', finished_at = :'m0'::timestamptz - interval '1 hour'
 WHERE id = :'r4'::uuid;

CREATE FUNCTION pg_temp.minute(t jsonb, ms bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT e - 'minuteMs' FROM jsonb_array_elements(t -> 'minutes') e WHERE (e ->> 'minuteMs')::bigint = ms
$$;

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
SELECT ok((:'t'::jsonb -> 'minutes' -> 14 ->> 'minuteMs')::bigint
             BETWEEN :m0_ms AND ql_private.epoch_ms(date_trunc('minute', clock_timestamp())),
          'the current minute last');
SELECT is((SELECT jsonb_build_object('dispatched', sum((e ->> 'dispatched')::int),
                                     'succeeded', sum((e ->> 'succeeded')::int),
                                     'failed', sum((e ->> 'failed')::int))
             FROM jsonb_array_elements(:'t'::jsonb -> 'minutes') e),
          '{"dispatched": 3, "succeeded": 2, "failed": 1}'::jsonb,
          'window totals: 3 dispatched, 2 succeeded, 1 failed (the hour-old run is outside)');
SELECT is(jsonb_build_array(pg_temp.minute(:'t', :m1_ms), pg_temp.minute(:'t', :m0_ms)),
          '[{"dispatched": 0, "succeeded": 0, "failed": 1, "estimated": false},
            {"dispatched": 3, "succeeded": 2, "failed": 0, "estimated": false}]'::jsonb,
          'each count in its own minute (found by minuteMs)');
SELECT is(:'t'::jsonb -> 'capped', '{"dispatched": false, "finished": false}'::jsonb, 'nothing capped');
-- A busy minute: 1500 runs finished evenly over minute m0 - 2 (one per 40 ms).
-- Only the first cap (1000) rows of a minute are read; the rest is
-- extrapolated from their rate: 1000 x 60 s / 39.96 s ≈ 1502.
SELECT ql_test.publish('proj', 'busy') ->> 'taskId' AS busy \gset
SELECT ql_test.enqueue(:'busy', 1500) IS NOT NULL AS enqueued \gset
UPDATE ql_private.runs r SET state = 'succeeded',
       finished_at = :'m0'::timestamptz - interval '2 minutes' + b.i * interval '40 milliseconds'
  FROM (SELECT id, row_number() OVER (ORDER BY queue_seq) - 1 AS i FROM ql_private.runs
         WHERE task_id = :'busy'::uuid) b
 WHERE r.id = b.id;
SELECT ql.throughput() AS busy_t \gset
SELECT ok((SELECT (x ->> 'succeeded')::int BETWEEN 1450 AND 1550 AND (x ->> 'estimated')::boolean
             FROM pg_temp.minute(:'busy_t', :m1_ms - 60000) x),
          'a minute past the cap is extrapolated from the rate of its first 1000 rows, marked estimated');
SELECT is(:'busy_t'::jsonb -> 'capped', '{"dispatched": false, "finished": true}'::jsonb,
          'capped says which series had an estimated minute');

SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.throughput(p_minutes => 61)'), 'QL006 minutes', '61 minutes -> QL006 minutes');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.throughput()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
