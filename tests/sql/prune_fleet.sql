-- ql.prune_fleet (SPEC §9.6): ended sessions past retention (never one with a
-- live lease, never a worker's newest), placement classes nothing references,
-- worker./session. events past retention; dry run; bounds; roles; the session
-- delete guard (migration 0017: live leases only).
BEGIN;
SELECT plan(24);
\ir fixtures.psql

-- Sessions: w1 opens three generations (1 and 2 are closed by the next open),
-- w2 one that is then closed (its newest).
SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s2 \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s3 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS t1 \gset
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp()
 WHERE session_id = :'t1';
SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT r[1] AS run_a, r[2] AS run_b FROM ql_test.enqueue(:'plain', 2) r \gset
-- s1 holds only a released lease (history); s2 a started, still live one.
SELECT ql_test.fake_lease(:'run_a', :'s1') AS offer_a \gset
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'offer_a';
SELECT ql_test.fake_lease(:'run_b', :'s2', true) AS offer_b \gset
UPDATE ql_private.worker_sessions SET closed_at = clock_timestamp() - interval '20 days'
 WHERE state = 'closed';

-- Classes: the plain task's (current revision), a stale one nothing references,
-- and gpu's first revision, whose run is queued while a republish moved the
-- task to another placement.
INSERT INTO ql_private.placement_classes (required)
VALUES ('{"executors": ["remote-worker"], "labels": {"stale": ["1"]}, "runtimes": {}}')
RETURNING id AS stale_class \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT r[1] AS run_g FROM ql_test.enqueue(:'gpu', 1) r \gset
SELECT placement_class AS gpu_class FROM ql_private.runs WHERE id = :'run_g' \gset
SELECT placement_class AS plain_class FROM ql_private.runs WHERE id = :'run_a' \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["big"]},"runtimes":{}},"preferred":[]}'))
    IS NOT NULL AS republished \gset

-- Events: three old worker./session. facts, one recent, one old run event.
INSERT INTO ql_private.events (type, worker_id, payload, created_at)
SELECT t, :'w1'::uuid, '{}', clock_timestamp() - interval '20 days'
  FROM unnest(ARRAY['worker.disabled', 'worker.enabled', 'session.closed']) t;
INSERT INTO ql_private.events (type, worker_id, payload) VALUES ('session.closed', :'w1'::uuid, '{}');
UPDATE ql_private.events SET created_at = clock_timestamp() - interval '20 days'
 WHERE run_id = :'run_a'::uuid;

SET LOCAL ROLE ql_runtime;
SELECT ql_test.mark();
SELECT is(ql.prune_fleet(14 * 86400, 1000, true),
          '{"sessions": 1, "placementClasses": 1, "fleetEvents": 3, "more": false}'::jsonb,
          'dry run counts what would go');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and deletes nothing');
SELECT is(ql.prune_fleet(14 * 86400, 1000),
          '{"sessions": 1, "placementClasses": 1, "fleetEvents": 3, "more": false}'::jsonb,
          'one pass: the old closed session, the stale class, the old fleet events');
RESET ROLE;
SELECT is((SELECT array_agg(session_id::text ORDER BY generation) FROM ql_private.worker_sessions
            WHERE worker_id = :'w1'::uuid), ARRAY[:'s2', :'s3'],
          's1 (closed, old, only a released lease) went; s2 (live lease) and s3 (active) stay');
SELECT ok(EXISTS (SELECT 1 FROM ql_private.worker_sessions WHERE session_id = :'t1'),
          'a worker''s newest session stays, however old (its generation counts on)');
SELECT ok(EXISTS (SELECT 1 FROM ql_private.run_leases WHERE offer_id = :'offer_a'),
          'the released lease stays: history keeps the session id');
SELECT is((SELECT array_agg(id ORDER BY id) FROM ql_private.placement_classes),
          ARRAY[least(:plain_class, :gpu_class), greatest(:plain_class, :gpu_class)],
          'the stale class went; a current revision''s and a queued run''s stay');
SELECT is((SELECT count(*) FROM ql_private.events WHERE run_id IS NULL), 1::bigint,
          'the recent fleet event stays');
SELECT ok(EXISTS (SELECT 1 FROM ql_private.events WHERE run_id = :'run_a'::uuid),
          'run events are not fleet events (they go with their run)');

-- In flight, the gpu run still holds its class; finished, it does not.
UPDATE ql_private.runs SET state = 'running' WHERE id = :'run_g';
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_fleet(14 * 86400) ->> 'placementClasses', '0', 'a run in flight keeps its class');
RESET ROLE;
UPDATE ql_private.runs SET state = 'queued', due_at = clock_timestamp() + interval '1 day'
 WHERE id = :'run_g';
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_fleet(14 * 86400) ->> 'placementClasses', '0', 'a scheduled run keeps its class');
RESET ROLE;
UPDATE ql_private.runs SET state = 'failed', due_at = NULL, finished_at = clock_timestamp()
 WHERE id = :'run_g';
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_fleet(14 * 86400) ->> 'placementClasses', '1',
          'once no run waits or runs and no current revision names it, the class goes');
-- An operator retry of that run finds its class again.
SELECT is(ql.retry_run(:'run_g') ->> 'state', 'queued', 'the failed run is retried');
RESET ROLE;
SELECT is((SELECT pc.required -> 'labels' FROM ql_private.runs r
             JOIN ql_private.placement_classes pc ON pc.id = r.placement_class
            WHERE r.id = :'run_g'), '{"gpu": ["yes"]}'::jsonb,
          '... and is queued in its (re-created) class, reachable by the class pages');

-- Batches: `more` while a kind filled its batch.
INSERT INTO ql_private.events (type, worker_id, payload, created_at)
SELECT 'worker.disabled', :'w1'::uuid, '{}', clock_timestamp() - interval '20 days'
  FROM generate_series(1, 3);
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_fleet(14 * 86400, 2) -> 'more', 'true'::jsonb, 'a full batch: more');
SELECT is(ql.prune_fleet(14 * 86400, 2) -> 'more', 'false'::jsonb, 'the rest: no more');
SELECT is(ql.prune_fleet(0) ->> 'sessions', '0',
          '0s retention: still no session with a live lease, none a worker''s newest');

-- Bounds and roles.
SELECT is(ql_test.error_of('SELECT ql.prune_fleet(-1)'), 'QL006 retainRuns',
          'negative retention -> QL006 retainRuns');
SELECT is(ql_test.error_of('SELECT ql.prune_fleet(0, 0)'), 'QL006 batch', 'batch 0 -> QL006 batch');
SELECT is(ql_test.error_of('SELECT ql.prune_fleet(0, 10001)'), 'QL006 batch',
          'batch above 10000 -> QL006 batch');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.prune_fleet(0)', '42501', NULL, 'the ingress cannot prune');
RESET ROLE;
SET LOCAL ROLE ql_readonly;
SELECT throws_ok('SELECT ql.prune_fleet(0)', '42501', NULL, 'a reader cannot prune');
RESET ROLE;

-- The session delete guard: a live lease refuses the delete, a released one not.
SELECT throws_ok(format('DELETE FROM ql_private.worker_sessions WHERE session_id = %L', :'s2'),
                 '23503', NULL, 'deleting a session with a live lease is refused');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'offer_b';
SELECT lives_ok(format('DELETE FROM ql_private.worker_sessions WHERE session_id = %L', :'s2'),
                'a session whose leases are all released may go');

SELECT * FROM finish();
ROLLBACK;
