-- ql.grant_pool (SPEC §13.1) and the grant fence of the claim: a worker with no
-- grant only ever gets idle (and the pull writes nothing); a grant of pool A
-- offers A's runs and never B's — the claim statement itself refuses B's run on
-- the locked rows, whatever the scan handed it; '*' grants every pool, present
-- and future; errors and roles.
BEGIN;
SELECT plan(22);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w1'::uuid;
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.create_pool('acme', 'b') ->> 'poolId' AS pb \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
-- B's run first in the queue: a scan of the whole queue would meet it first.
SELECT (ql_test.enqueue(:'tb', 1, 5))[1] AS rb \gset
SELECT (ql_test.enqueue(:'ta', 1, 0))[1] AS ra \gset
SELECT is((SELECT array_agg(pool_id ORDER BY priority DESC) FROM ql_private.runs),
          ARRAY[:'pb'::uuid, :'pa'::uuid], 'each run carries its task''s pool');

CREATE FUNCTION pg_temp.pull(offer text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.pull_offer(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                         (SELECT session_id::text FROM ql_private.worker_sessions WHERE state = 'active'
                           AND worker_id = ql_test.worker_id('w1')::uuid), 1, offer,
                         sha256(convert_to(offer, 'UTF8')))
$$;

-- No grant: idle, nothing read, nothing written.
SELECT ql_test.mark();
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000001') #>> '{status}', 'idle', 'no grant: idle');
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000001') #>> '{stats,pages}', '0',
          'no grant: no candidate was even read');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'the idle pulls wrote nothing');

-- The claim statement's own fence: handed B's run directly, it refuses it.
SET LOCAL ROLE ql_runtime;
SELECT is(ql.grant_pool(:'w1', 'acme/a'), jsonb_build_object('workerId', :'w1', 'pool', 'acme/a', 'granted', true),
          'grant A: {workerId, pool, granted: true}');
SELECT is(ql.grant_pool(:'w1', 'acme/a') -> 'granted', 'false'::jsonb, 'granting it again changes nothing');
RESET ROLE;
SELECT is((SELECT array_agg(payload) FROM ql_private.events WHERE type = 'worker.pool_granted'
            AND worker_id = :'w1'::uuid),
          ARRAY[jsonb_build_object('workerId', :'w1', 'pool', 'acme/a', 'actor', session_user)],
          'one worker.pool_granted event naming the pool and the actor (none for the repeat)');
SELECT is((SELECT c.offer FROM ql_private.worker_sessions ws,
                  ql_private.claim_candidate(ws, ARRAY[:'rb'::uuid], ARRAY[0],
                                             '00000000-0000-4000-8000-0000000000b1'::uuid, sha256('t'::bytea)) c
            WHERE ws.session_id = :'s1'::uuid), NULL::jsonb,
          'claim_candidate refuses a run of a pool the worker holds no grant for (the locked-row fence)');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'rb'::uuid), 'queued', 'B''s run stays queued');

-- Granted A: A's run is offered, B's never.
SELECT pg_temp.pull('00000000-0000-4000-8000-000000000002') AS o2 \gset
SELECT is(:'o2'::jsonb #>> '{offer,lease,runId}', :'ra', 'granted A: A''s run is offered (B''s, ahead of it, is not)');
SELECT ql_test.mark();
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000003') ->> 'status', 'idle',
          'then idle: B''s run is never offered');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'that idle pull (a pool page read) wrote nothing');

-- '*': every pool, present and future.
SET LOCAL ROLE ql_runtime;
SELECT is(ql.grant_pool(:'w1', '*') -> 'granted', 'true'::jsonb, 'grant *');
RESET ROLE;
SELECT ok((SELECT all_pools FROM ql_private.workers WHERE id = :'w1'::uuid), 'workers.all_pools set');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type = 'worker.pool_granted'
            AND payload ->> 'pool' = '*'), 1::bigint, 'the * grant has its event too');
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000004') #>> '{offer,lease,runId}', :'rb',
          'with *: B''s run is offered');
SELECT ql.create_pool('later', 'new') AS lp \gset
SELECT ql.publish_revision('later', 'tl', ql_test.command(), 'later/new') ->> 'taskId' AS tl \gset
SELECT (ql_test.enqueue(:'tl', 1, 0))[1] AS rl \gset
SELECT is(pg_temp.pull('00000000-0000-4000-8000-000000000005') #>> '{offer,lease,runId}', :'rl',
          'with *: a pool created later is covered');

-- Errors, roles.
SELECT is(ql_test.error_of(format('SELECT ql.grant_pool(%L, %L)', :'w1', 'acme/none')), 'QL004 pool',
          'unknown pool: QL004 naming pool');
SELECT is(ql_test.error_of(format('SELECT ql.grant_pool(%L, %L)', :'w1', 'acme')), 'QL001 pool',
          'malformed pool: QL001 naming pool');
SELECT is(ql_test.error_of($$SELECT ql.grant_pool('00000000-0000-4000-8000-000000000000', 'acme/a')$$),
          'QL004 workerId', 'unknown worker: QL004 naming workerId');
SELECT is(ql_test.error_of($$SELECT ql.grant_pool('nope', 'acme/a')$$), 'QL001 workerId', 'malformed worker id');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.grant_pool(%L, %L)', :'w1', 'acme/b'), '42501', NULL,
                 'the ingress cannot grant pools');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
