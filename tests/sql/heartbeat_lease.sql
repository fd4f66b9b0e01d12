-- ql.heartbeat_lease (SPEC §7): extends only started, unexpired leases by the
-- task lease TTL, fenced by offer/token/session and the (required) lease
-- version; retry of the previous heartbeat is idempotent (same expiresAtMs, no
-- write); any other version -> stale_lease_version; cancelRequested reaches the
-- worker; expired -> lease_expired (also after the sweeper); called as
-- ql_worker_ingress.
BEGIN;
SELECT plan(44);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET lease_ttl_seconds = 30 WHERE id = :'task'::uuid;
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5
  FROM ql_test.enqueue(:'task', 5, 0) r \gset

CREATE FUNCTION pg_temp.hb(cred text, dig bytea, worker text, session text, gen bigint,
                           offer text, token text, version bigint)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.heartbeat_lease(cred, dig, worker, session, gen, offer,
                              ql_test.token_digest(token), version)
$$;
-- ack at the lease's current version (pg_temp.version reads it as the test's owner).
CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT l.lease_version FROM ql_private.run_leases l
                      WHERE l.offer_id::text = offer), 1)
$$;
CREATE FUNCTION pg_temp.ack(cred text, dig bytea, worker text, session text, gen bigint,
                            offer text, token text, phase text)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(cred, dig, worker, session, gen, offer, ql_test.token_digest(token),
                        pg_temp.version(offer), phase)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.hb(text, bytea, text, text, bigint, text, text, bigint),
                          pg_temp.ack(text, bytea, text, text, bigint, text, text, text),
                          pg_temp.version(text)
    TO ql_worker_ingress;
SELECT format('%L, %L::bytea, %L', :'c1', :'d1', :'w1') AS w1args \gset
SELECT format('%L, %L::bytea, %L', :'c2', :'d2', :'w2') AS w2args \gset
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer) TO ql_worker_ingress;
CREATE FUNCTION pg_temp.event_count() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.events $$;

SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 4) n;
SELECT ql_test.claim('w2', :'s2', pg_temp.offer(5), 't5');

-- 1. not started: QL020, nothing changes
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.hb(%s, %L, 1, pg_temp.offer(1), %L, 1)', :'w1args', :'s1', 't1'),
                 'QL020', NULL, 'heartbeat before the starting ACK -> QL020');
SELECT throws_ok(format('SELECT pg_temp.hb(%s, %L, 1, pg_temp.offer(1), %L, NULL)', :'w1args', :'s1', 't1'),
                 'QL001', NULL, 'no version: QL001 (the fence is never optional)');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'the refused heartbeat wrote nothing');

-- 2. a heartbeat on a started lease extends it
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'starting') AS st \gset
RESET ROLE;
UPDATE ql_private.run_leases SET expires_at = clock_timestamp() + interval '2 seconds'
 WHERE offer_id = pg_temp.offer(1)::uuid;
SELECT (ql_test.lease(pg_temp.offer(1))).expires_at AS before_hb \gset
SELECT pg_temp.event_count() AS events_before \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 2) AS hb1 \gset
RESET ROLE;
SELECT is(:'hb1'::jsonb ->> 'status', 'ok', 'heartbeat on a started lease -> ok');
SELECT is(:'hb1'::jsonb #>> '{lease,leaseVersion}', '3', 'lease_version bumped');
SELECT is(:'hb1'::jsonb #>> '{lease,cancelRequested}', 'false', 'cancelRequested false');
SELECT is(:'hb1'::jsonb #>> '{lease,state}', 'starting', 'lease@v1 state');
SELECT ok((ql_test.lease(pg_temp.offer(1))).expires_at > :'before_hb'::timestamptz + interval '20 seconds',
          'expires_at moved forward');
SELECT results_eq(
    format($$SELECT expires_at - heartbeat_at, heartbeat_version, updated_at = heartbeat_at
               FROM ql_private.run_leases WHERE offer_id = %L$$, pg_temp.offer(1)),
    $$VALUES (interval '30 seconds', 3, true)$$,
    'extended by the task lease TTL from the heartbeat; heartbeat_version recorded');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'one row written (the lease)');
SELECT is(pg_temp.event_count(), :'events_before'::bigint, 'a heartbeat writes no event');

-- 3. retry of that heartbeat: idempotent, no write, not extended again
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 2) AS hb1r \gset
RESET ROLE;
SELECT is(:'hb1r'::jsonb ->> 'status', 'idempotent', 'same version again -> idempotent');
SELECT is(:'hb1r'::jsonb -> 'lease', :'hb1'::jsonb -> 'lease', 'answers what the lost response carried');
SELECT is(:'hb1r'::jsonb #>> '{lease,expiresAtMs}', :'hb1'::jsonb #>> '{lease,expiresAtMs}',
          'the same expiresAtMs: the lease was not extended twice');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'the replay wrote nothing');

-- 4. wrong versions
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 1) ->> 'category',
          'stale_lease_version', 'an older version -> stale_lease_version');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 4) ->> 'category',
          'stale_lease_version', 'a future version -> stale_lease_version');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'mismatches write nothing');

-- 5. another heartbeat, then a running ACK: the heartbeat replay no longer applies
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 3) #>> '{lease,leaseVersion}', '4',
          'the current version: applied');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running') #>> '{lease,leaseVersion}', '5',
          'running ACK -> version 5');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 4) ->> 'category',
          'stale_lease_version', 'version - 1 after an ACK is not a heartbeat replay');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 5) #>> '{lease,state}', 'running',
          'heartbeat of a running lease');
RESET ROLE;

-- 6. cancellation reaches the worker through its heartbeat
SELECT is(ql.cancel_run(:'r1') ->> 'cancelRequested', 'true', 'cancel of a started run is a request');
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 6) AS hbc \gset
RESET ROLE;
SELECT is(:'hbc'::jsonb ->> 'status', 'ok', 'the lease is still extended (the worker needs time to stop)');
SELECT is(:'hbc'::jsonb #>> '{lease,cancelRequested}', 'true', 'cancelRequested true');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r1'::uuid), 'running', 'the run keeps running until completion');

-- 7. fences
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(1), 'wrong', 7) ->> 'category', 'token_mismatch',
          'another token -> token_mismatch');
SELECT is(pg_temp.hb(:w2args, :'s2', 1, pg_temp.offer(1), 't1', 7) ->> 'category', 'offer_foreign',
          'another worker -> offer_foreign');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(99), 't99', 1) ->> 'category', 'offer_foreign',
          'unknown offer -> offer_foreign');
SELECT is(pg_temp.hb(:w1args, :'s1', 2, pg_temp.offer(1), 't1', 7) ->> 'category', 'session_replaced',
          'wrong generation -> session_replaced');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'fenced heartbeats write nothing');

-- a replaced session: its started lease can no longer be kept alive
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w2args, :'s2', 1, pg_temp.offer(5), 't5', 'starting') ->> 'status', 'ok', 'w2 starts lease 5');
RESET ROLE;
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2b \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w2args, :'s2', 1, pg_temp.offer(5), 't5', 2) ->> 'category', 'session_replaced',
          'heartbeat from the replaced session -> session_replaced');
SELECT is(pg_temp.hb(:w2args, :'s2b', 2, pg_temp.offer(5), 't5', 2) ->> 'category', 'session_replaced',
          'the new session cannot adopt it');
RESET ROLE;
SELECT is((ql_test.lease(pg_temp.offer(5))).released_at, NULL, 'the started lease stays live (sweeper decides)');

-- 8. expiry: an expired started lease is never extended
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'starting');
RESET ROLE;
SELECT ql_test.expire_lease(pg_temp.offer(2));
SELECT (ql_test.lease(pg_temp.offer(2))).expires_at AS expired_at \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 2) ->> 'category', 'lease_expired',
          'expired started lease -> lease_expired');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 1) ->> 'category', 'lease_expired',
          'also at an old version (expiry answers first)');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'no write');
SELECT is((ql_test.lease(pg_temp.offer(2))).expires_at, :'expired_at'::timestamptz, 'not extended');
SET LOCAL ROLE ql_runtime;
SELECT ql.sweep_leases();
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 2) ->> 'category', 'lease_expired',
          'after the sweeper marked it lost: still lease_expired');

-- 9. completed lease -> lease_terminal; bad input; denial
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 'starting');
SELECT ql.complete_lease(:w1args, :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'), 2, 'succeeded', 0);
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 2) ->> 'category', 'lease_terminal',
          'completed lease -> lease_terminal (version - 1 of a completion is no heartbeat replay)');
SELECT is(pg_temp.hb(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 3) ->> 'category', 'lease_terminal',
          '... nor is its current version');
SELECT throws_ok(format('SELECT pg_temp.hb(%s, %L, 1, pg_temp.offer(3), %L, 0)', :'w1args', :'s1', 't3'),
                 'QL001', NULL, 'lease version 0 -> QL001');
SELECT is(ql.heartbeat_lease(:'c1', sha256('nope'), :'w1', :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'), 2) ->> 'reason',
          'bad_secret', 'wrong secret -> denied');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
