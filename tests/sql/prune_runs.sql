-- ql.prune_runs (SPEC §9.6): terminal runs older than the retention go with
-- their attempts, leases, events and idempotency keys, in batches; live runs
-- and recent terminal ones stay; dry run counts only; bounds; roles.
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS old1, r[2] AS old2, r[3] AS old3, r[4] AS recent, r[5] AS live FROM ql_test.enqueue(:'task', 5) r \gset
SELECT ql.enqueue_runs(:'task', 0, 1, p_key => 'once') -> 'runIds' ->> 0 AS keyed \gset
SELECT ql_test.fake_lease(:'old1', :'s1', true) AS o1 \gset
SELECT ql_test.fake_lease(:'live', :'s1', true) AS o5 \gset
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed' WHERE offer_id = :'o1'::uuid;
UPDATE ql_private.runs SET state = (ARRAY['succeeded', 'failed', 'cancelled'])[1 + (queue_seq % 3)::integer],
                           finished_at = clock_timestamp() - interval '20 days'
 WHERE id IN (:'old1'::uuid, :'old2'::uuid, :'old3'::uuid, :'keyed'::uuid);
UPDATE ql_private.runs SET state = 'succeeded', finished_at = clock_timestamp() - interval '1 day' WHERE id = :'recent'::uuid;
UPDATE ql_private.runs SET finished_at = clock_timestamp() - interval '21 days' WHERE id = :'old1'::uuid;
UPDATE ql_private.runs SET finished_at = clock_timestamp() - interval '30 days' WHERE id = :'live'::uuid;

SET LOCAL ROLE ql_runtime;
SELECT ql_test.mark();
SELECT is(ql.prune_runs(14 * 86400, 3, true), '{"runs": 3, "attempts": 3, "leases": 1, "events": 3, "more": true}'::jsonb,
          'dry run: the counts of one batch');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing deleted');
SELECT is(ql.prune_runs(14 * 86400, 3), '{"runs": 3, "attempts": 3, "leases": 1, "events": 3, "more": true}'::jsonb,
          'a batch of 3 (full: more)');
SELECT is(ql.prune_runs(14 * 86400, 3) - 'events' - 'leases', '{"runs": 1, "attempts": 1, "more": false}'::jsonb,
          'the last old run');
SELECT is(ql.prune_runs(14 * 86400, 3), '{"runs": 0, "attempts": 0, "leases": 0, "events": 0, "more": false}'::jsonb,
          'nothing left past the retention');
RESET ROLE;
SELECT is((SELECT array_agg(id::text ORDER BY queue_seq) FROM ql_private.runs), ARRAY[:'recent', :'live'],
          'the recent terminal run and the live run stay');
SELECT is((SELECT count(*) FROM ql_private.attempts WHERE run_id NOT IN (:'recent'::uuid, :'live'::uuid))
          + (SELECT count(*) FROM ql_private.events WHERE run_id NOT IN (:'recent'::uuid, :'live'::uuid))
          + (SELECT count(*) FROM ql_private.run_leases WHERE run_id NOT IN (:'recent'::uuid, :'live'::uuid)),
          0::bigint, 'no attempt, event or lease of a pruned run is left');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.enqueue_runs(:'task', 0, 1, p_key => 'once') -> 'existing', 'false'::jsonb,
          'the idempotency key went with its run: the key queues a new run');
SELECT is(ql.prune_runs(0) ->> 'runs', '1', 'retention 0 prunes every terminal run (the recent one)');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.runs WHERE state IN ('queued', 'starting')), 2::bigint, 'live runs never pruned');
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.prune_runs(-1)'), 'QL006 retainRuns', 'negative retention -> QL006 retainRuns');
SELECT is(ql_test.error_of('SELECT ql.prune_runs(0, 0)'), 'QL006 batch', 'batch 0 -> QL006 batch');
SELECT is(ql_test.error_of('SELECT ql.prune_runs(0, 10001)'), 'QL006 batch', 'batch 10001 -> QL006 batch');
RESET ROLE;
SET LOCAL ROLE ql_readonly;
SELECT throws_ok('SELECT ql.prune_runs(0)', '42501', NULL, 'ql_readonly cannot prune');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
