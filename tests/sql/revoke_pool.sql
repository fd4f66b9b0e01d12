-- ql.revoke_pool (SPEC §13.1): the worker's UNSTARTED leases of the revoked
-- pool are released at once (grant_revoked, runs re-queued), its started ones
-- and other pools' leases stay; replays of the revoked pool's offers are
-- refused (lease_terminal), started or not, while the kept pool's replay still
-- answers; no new offer of the pool; idempotent; '*' revoked; errors; roles.
BEGIN;
SELECT plan(18);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w1'::uuid;
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql.create_pool('acme', 'a') IS NOT NULL, ql.create_pool('acme', 'b') IS NOT NULL;
SELECT ql.grant_pool(:'w1', 'acme/a') IS NOT NULL, ql.grant_pool(:'w1', 'acme/b') IS NOT NULL;
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
SELECT r[1] AS ra1, r[2] AS ra2, r[3] AS ra3 FROM ql_test.enqueue(:'ta', 3) r \gset
SELECT (ql_test.enqueue(:'tb', 1))[1] AS rb \gset
SELECT ql_test.fake_lease(:'ra1', :'s1', false) AS oa1 \gset
SELECT ql_test.fake_lease(:'ra2', :'s1', true) AS oa2 \gset
SELECT ql_test.fake_lease(:'rb', :'s1', false) AS ob \gset

CREATE FUNCTION pg_temp.pull(offer text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.pull_offer(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                         (SELECT session_id::text FROM ql_private.worker_sessions WHERE state = 'active'
                           AND worker_id = ql_test.worker_id('w1')::uuid), 1, offer,
                         sha256(convert_to(offer, 'UTF8')))
$$;
SELECT is(pg_temp.pull(:'oa1') ->> 'status', 'idempotent', 'before: A''s unstarted offer replays');

SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_pool(:'w1', 'acme/a') AS rv \gset
RESET ROLE;
SELECT is(:'rv'::jsonb, jsonb_build_object('workerId', :'w1', 'pool', 'acme/a', 'revoked', true, 'leasesReleased', 1),
          '{workerId, pool, revoked: true, leasesReleased: 1}');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l
                            JOIN ql_private.runs r ON r.id = l.run_id WHERE l.offer_id = %L$$, :'oa1'),
                  $$VALUES ('grant_revoked'::text, 'queued'::text)$$,
                  'A''s unstarted lease released (grant_revoked), its run re-queued at once');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'oa2'::uuid), NULL::timestamptz,
          'A''s started lease stays live: it may finish');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'ob'::uuid), NULL::timestamptz,
          'B''s unstarted lease stays live: B is still granted');
SELECT is((SELECT count(*) FROM ql_private.worker_pool_grants WHERE worker_id = :'w1'::uuid), 1::bigint,
          'only the grant of B is left');
SELECT is((SELECT array_agg(payload) FROM ql_private.events WHERE type = 'worker.pool_revoked'),
          ARRAY[jsonb_build_object('workerId', :'w1', 'pool', 'acme/a', 'leasesReleased', 1,
                                   'actor', session_user)],
          'one worker.pool_revoked event (pool, leasesReleased, actor)');

-- Replays.
SELECT is(pg_temp.pull(:'oa1'), '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'replay of the released A offer: conflict lease_terminal');
SELECT is(pg_temp.pull(:'oa2'), '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'replay of the started A offer: conflict lease_terminal (never handed back)');
SELECT is(pg_temp.pull(:'ob') ->> 'status', 'idempotent', 'replay of B''s offer still answers');

-- No new offer of A.
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000009') ->> 'status', 'idle',
          'A''s queued runs are not offered any more');

-- Idempotent.
SET LOCAL ROLE ql_runtime;
SELECT is(ql.revoke_pool(:'w1', 'acme/a'),
          jsonb_build_object('workerId', :'w1', 'pool', 'acme/a', 'revoked', false, 'leasesReleased', 0),
          'revoking again changes nothing');
RESET ROLE;

-- '*' revoked: leases of pools not explicitly granted are released.
SET LOCAL ROLE ql_runtime;
SELECT ql.grant_pool(:'w1', '*') IS NOT NULL;
RESET ROLE;
SELECT pg_temp.pull('00000000-0000-4000-8000-000000000010') #>> '{offer,lease,runId}' AS via_star \gset
SELECT ok(:'via_star' IN (:'ra1', :'ra3'), 'with * an A run is offered again');
SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_pool(:'w1', '*') AS rs \gset
RESET ROLE;
SELECT is((:'rs'::jsonb ->> 'leasesReleased')::int, 1, 'revoking * releases the unstarted A lease it allowed');
SELECT ok(NOT (SELECT all_pools FROM ql_private.workers WHERE id = :'w1'::uuid), 'workers.all_pools cleared');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'ob'::uuid), NULL::timestamptz,
          'the explicitly granted B lease stays');

-- Errors, roles.
SELECT is(ql_test.error_of(format('SELECT ql.revoke_pool(%L, %L)', :'w1', 'acme/zzz')), 'QL004 pool',
          'unknown pool: QL004 naming pool');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.revoke_pool(%L, %L)', :'w1', 'acme/b'), '42501', NULL,
                 'the ingress cannot revoke');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
