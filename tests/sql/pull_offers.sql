-- ql.pull_offers (SPEC §18.1): a batch of claims, the free-slot cap, replay of
-- a partly-claimed batch (same offers, nothing written), conflicts per id,
-- idle batches write nothing, session fences, bad input; called as
-- ql_worker_ingress like the ingress does. (Concurrent batches:
-- tests/py/test_pull_offers.py, with truly concurrent connections.)
BEGIN;
SELECT plan(46);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(3)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') AS pub \gset
SELECT :'pub'::jsonb ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6, r[7] AS r7,
       r[8] AS r8
  FROM ql_test.enqueue(:'task', 8, 0) r \gset

-- batch(worker creds, session, generation, offer numbers, token labels [, bounds])
CREATE FUNCTION pg_temp.batch(cred text, dig bytea, worker text, session text, gen bigint,
                              offers integer[], tokens text[], bounds jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.pull_offers(cred, dig, worker, session, gen,
        ARRAY(SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
                FROM unnest(offers) WITH ORDINALITY AS o(n, i) ORDER BY i),
        ARRAY(SELECT sha256(convert_to(t, 'UTF8'))
                FROM unnest(tokens) WITH ORDINALITY AS o(t, i) ORDER BY i),
        bounds)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.batch(text, bytea, text, text, bigint, integer[], text[], jsonb)
    TO ql_worker_ingress;
SELECT format('%L, %L::bytea, %L', :'c1', :'d1', :'w1') AS w1args \gset
SELECT format('%L, %L::bytea, %L', :'c2', :'d2', :'w2') AS w2args \gset
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
CREATE FUNCTION pg_temp.lease_count() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.run_leases $$;
CREATE FUNCTION pg_temp.dispatched() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched' $$;
CREATE FUNCTION pg_temp.run_ids(b jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT ARRAY(SELECT o #>> '{candidate,runId}' FROM jsonb_array_elements(b -> 'offers') o) $$;
CREATE FUNCTION pg_temp.offer_ids(b jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT ARRAY(SELECT o ->> 'offerId' FROM jsonb_array_elements(b -> 'offers') o) $$;

-- 1. A batch of 4 on a 3-slot session: 3 claims, the 4th idle capacity_full.
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w1args, :'s1', 1, '{1,2,3,4}', '{t1,t2,t3,t4}') AS first \gset
RESET ROLE;
SELECT is(:'first'::jsonb ->> 'status', 'batch', 'a batch answers status batch');
SELECT is(pg_temp.run_ids(:'first'), ARRAY[:'r1', :'r2', :'r3'],
          'three claims, in queue order');
SELECT is(pg_temp.offer_ids(:'first'), ARRAY[pg_temp.offer(1), pg_temp.offer(2), pg_temp.offer(3)],
          'the claims carry the first three offer ids, in request order');
SELECT is(:'first'::jsonb #>> '{idle,reason}', 'capacity_full',
          'the 4th id finds no free slot: idle capacity_full');
SELECT is(:'first'::jsonb -> 'conflicts', '[]'::jsonb, 'no conflicts');
SELECT is(:'first'::jsonb -> 'recovered', '0'::jsonb, 'nothing replayed: recovered 0');
SELECT is(pg_temp.lease_count(), 3::bigint, 'at most the free slots are claimed: three leases');
SELECT is(pg_temp.dispatched(), 3::bigint, 'one run.dispatched event per claim');
SELECT is((SELECT array_agg(DISTINCT state) FROM ql_private.runs WHERE id IN (:'r1', :'r2', :'r3')),
          ARRAY['dispatching'], 'the claimed runs are dispatching (never starting/running)');
SELECT is((SELECT count(*) FROM ql_private.run_leases
            WHERE session_id = :'s1'::uuid AND token_digest = sha256(convert_to('t2', 'UTF8'))
              AND offer_id = pg_temp.offer(2)::uuid), 1::bigint,
          'each lease holds its own pair''s token digest');
SELECT ok(NOT (:'first'::text ~ encode(sha256(convert_to('t1', 'UTF8')), 'hex')),
          'the batch never carries a token digest');

-- 2. Replay of the partly-claimed batch: the same offers, nothing written.
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w1args, :'s1', 1, '{1,2,3,4}', '{t1,t2,t3,t4}') AS replay \gset
RESET ROLE;
SELECT is(:'replay'::jsonb -> 'offers', :'first'::jsonb -> 'offers',
          'a retry of the batch returns the very same offer for every claimed id');
SELECT is(:'replay'::jsonb #>> '{idle,reason}', 'capacity_full', 'the unclaimed id is idle again');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a replayed batch writes nothing');
SELECT is(:'replay'::jsonb -> 'recovered', '3'::jsonb, 'the three replays are counted as recovered');
SELECT is(pg_temp.lease_count(), 3::bigint, 'no second lease');

-- 3. Single and batch agree: a single pull of a batch id replays the same offer.
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.pull_offer(:w1args, :'s1', 1, pg_temp.offer(2), sha256(convert_to('t2', 'UTF8'))) -> 'offer',
          :'first'::jsonb -> 'offers' -> 1, 'ql.pull_offer replays a batch-claimed offer identically');
-- A batch with only replays never reads the session: a wrong token is a conflict
-- for its id alone, the others still replay.
SELECT pg_temp.batch(:w1args, :'s1', 1, '{1,2}', '{t1,wrong}') AS mixed \gset
RESET ROLE;
SELECT is(pg_temp.offer_ids(:'mixed'), ARRAY[pg_temp.offer(1)], 'the good pair replays');
SELECT is(:'mixed'::jsonb -> 'conflicts',
          jsonb_build_array(jsonb_build_object('offerId', pg_temp.offer(2), 'category', 'token_mismatch')),
          'the wrong token is a token_mismatch conflict for its id');
SELECT is(:'mixed'::jsonb -> 'idle', 'null'::jsonb, 'no new id: idle is null');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.batch(:w2args, :'s2', 1, '{1}', '{t1}') #>> '{conflicts,0,category}', 'offer_foreign',
          'another worker replaying an id -> offer_foreign');
RESET ROLE;

-- 4. A free slot reappears (an offer released): the retry claims the 4th id.
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = pg_temp.offer(3)::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w1args, :'s1', 1, '{1,2,3,4}', '{t1,t2,t3,t4}') AS retry \gset
RESET ROLE;
SELECT is(pg_temp.offer_ids(:'retry'), ARRAY[pg_temp.offer(1), pg_temp.offer(2), pg_temp.offer(4)],
          'replays of 1 and 2, and a claim for 4');
SELECT is(:'retry'::jsonb #>> '{conflicts,0,category}', 'lease_terminal',
          'the released offer 3 answers lease_terminal');
SELECT is(:'retry'::jsonb -> 'idle', 'null'::jsonb, 'every new id was claimed: idle is null');
SELECT is((pg_temp.run_ids(:'retry'))[3], :'r4', 'offer 4 took the next run in queue order');

-- Offers come in request order, replays and claims alike.
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w2args, :'s2', 1, '{10,9}', '{n10,n9}') AS first2 \gset
SELECT pg_temp.batch(:w2args, :'s2', 1, '{8,10,9}', '{n8,n10,n9}') AS order2 \gset
RESET ROLE;
SELECT is(pg_temp.offer_ids(:'order2'), ARRAY[pg_temp.offer(8), pg_temp.offer(10), pg_temp.offer(9)],
          'a new id before two replays: the offers keep the request order');
SELECT is(pg_temp.run_ids(:'order2'), ARRAY[:'r7', :'r5', :'r6'],
          'the replays are the same runs, the new id took the next one');

-- 5. An idle batch writes nothing; the queue runs dry mid-batch.
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w2args, :'s2', 1, '{11,12,13}', '{a,b,c}') AS dry \gset
RESET ROLE;
SELECT is(pg_temp.run_ids(:'dry'), ARRAY[:'r8'], 'the last run is claimed');
SELECT is(:'dry'::jsonb #>> '{idle,reason}', 'no_candidates', 'then the queue is empty: no_candidates');
SELECT is(:'dry'::jsonb #>> '{idle,stats,pages}', '1', 'idle carries the single pull''s stats');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.batch(:w2args, :'s2', 1, '{14,15,16}', '{d,e,f}') AS idle \gset
RESET ROLE;
SELECT is(:'idle'::jsonb -> 'offers', '[]'::jsonb, 'an empty queue: no offers');
SELECT is(:'idle'::jsonb #>> '{idle,reason}', 'no_candidates', 'idle no_candidates');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'an idle batch writes nothing');

-- 6. Session fences (only when a new id is to be claimed) and bad input.
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 2, ''{21}'', ''{x}'')', :'w1args', :'s1'),
                 'QL011', NULL, 'wrong generation -> QL011');
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 1, ''{21}'', ''{x}'')', :'w1args', :'s2'),
                 'QL010', NULL, 'another worker''s session -> QL010');
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 1, ''{}'', ''{}'')', :'w1args', :'s1'),
                 'QL001', NULL, 'an empty batch -> QL001');
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 1, %L, %L)', :'w1args', :'s1',
                        ARRAY(SELECT g FROM generate_series(31, 47) g),
                        ARRAY(SELECT 't' || g FROM generate_series(31, 47) g)),
                 'QL001', NULL, '17 pairs -> QL001');
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 1, ''{22,22}'', ''{x,y}'')', :'w1args', :'s1'),
                 'QL001', NULL, 'a duplicate offer id -> QL001');
SELECT throws_ok(format('SELECT ql.pull_offers(%s, %L, 1, ARRAY[%L], ARRAY[%L::bytea, %L::bytea])',
                        :'w1args', :'s1', pg_temp.offer(23), '\x00', '\x00'),
                 'QL001', NULL, 'digests not indexed like the ids -> QL001');
SELECT throws_ok(format('SELECT ql.pull_offers(%s, %L, 1, ARRAY[%L], ARRAY[%L::bytea])',
                        :'w1args', :'s1', pg_temp.offer(23), '\x00'),
                 'QL001', NULL, 'a digest that is not 32 bytes -> QL001');
SELECT throws_ok(format('SELECT ql.pull_offers(%s, %L, 1, ARRAY[%L], ARRAY[%L::bytea])',
                        :'w1args', :'s1', 'not-a-uuid', sha256('x')),
                 'QL001', NULL, 'a malformed offer id -> QL001');
SELECT throws_ok(format('SELECT pg_temp.batch(%s, %L, 1, ''{24}'', ''{x}'', ''{"pages":17}'')',
                        :'w1args', :'s1'),
                 'QL002', NULL, 'a bound above its cap -> QL002');
SELECT is(pg_temp.batch(:'c1', sha256('wrong'), :'w1', :'s1', 1, '{25}', '{x}') ->> 'status', 'denied',
          'a wrong secret is denied before anything is read');
RESET ROLE;
SELECT is(pg_temp.lease_count(), 8::bigint, 'the refused batches claimed nothing');

-- 7. Catalog: the ingress executes it; nobody else.
SELECT ok(has_function_privilege('ql_worker_ingress',
          'ql.pull_offers(text, bytea, text, text, bigint, text[], bytea[], jsonb)', 'EXECUTE'),
          'ql_worker_ingress executes ql.pull_offers');
SELECT ok(NOT has_function_privilege('ql_runtime',
          'ql.pull_offers(text, bytea, text, text, bigint, text[], bytea[], jsonb)', 'EXECUTE'),
          'ql_runtime does not');

SELECT * FROM finish();
ROLLBACK;
