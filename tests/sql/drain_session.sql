-- ql_private.drain_session, through ql.end_session(p_drain => true) (SPEC §9.5
-- `admin session close --drain`), on real claims: the session takes no new
-- offer (a pull: QL015 session_draining; a replay of a released offer:
-- conflict session_draining), its unstarted lease is released and its run
-- re-queued, its started leases may still ACK running, heartbeat and complete,
-- the session stays alive by heartbeat (answered with "draining": true) and
-- closes when its last lease ends; a session with nothing running closes at
-- once; a second drain is a no-op; roles.
BEGIN;
SELECT plan(31);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4, 0) r \gset

CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
CREATE FUNCTION pg_temp.version(n integer) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT l.lease_version FROM ql_private.run_leases l WHERE l.offer_id = pg_temp.offer(n)::uuid
$$;
CREATE FUNCTION pg_temp.sess(n integer) RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT l.session_id::text FROM ql_private.run_leases l WHERE l.offer_id = pg_temp.offer(n)::uuid
$$;
CREATE FUNCTION pg_temp.gen(n integer) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT l.session_generation FROM ql_private.run_leases l WHERE l.offer_id = pg_temp.offer(n)::uuid
$$;
CREATE FUNCTION pg_temp.wid() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT ql_test.worker_id('w1')
$$;
-- The worker's calls, each at the lease version the worker last saw.
CREATE FUNCTION pg_temp.ack(n integer, phase text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), pg_temp.wid(),
                        pg_temp.sess(n), pg_temp.gen(n),
                        pg_temp.offer(n), ql_test.token_digest('t' || n), pg_temp.version(n), phase)
$$;
CREATE FUNCTION pg_temp.beat(n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.heartbeat_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), pg_temp.wid(),
                              pg_temp.sess(n), pg_temp.gen(n),
                              pg_temp.offer(n), ql_test.token_digest('t' || n), pg_temp.version(n))
$$;
CREATE FUNCTION pg_temp.done(n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.complete_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), pg_temp.wid(),
                             pg_temp.sess(n), pg_temp.gen(n),
                             pg_temp.offer(n), ql_test.token_digest('t' || n), pg_temp.version(n),
                             'succeeded', 0, NULL)
$$;
CREATE FUNCTION pg_temp.pull(session text, n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.pull_offer(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), pg_temp.wid(),
                         session, 1, pg_temp.offer(n), ql_test.token_digest('t' || n))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer), pg_temp.version(integer), pg_temp.ack(integer, text),
                          pg_temp.sess(integer), pg_temp.gen(integer), pg_temp.wid(),
                          pg_temp.beat(integer), pg_temp.done(integer), pg_temp.pull(text, integer)
    TO ql_worker_ingress;

-- Offers 1..3 (runs r1..r3, real claims): 1 running, 2 starting, 3 never started.
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 3) n;
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(1, 'starting'), pg_temp.ack(1, 'running'), pg_temp.ack(2, 'starting');
RESET ROLE;

-- 1. the drain
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s1', true),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'state', 'draining', 'drain', true,
                             'leasesReleased', 1, 'leasesRunning', 2),
          'drain: {state: draining, drain: true, leasesReleased 1, leasesRunning 2}');
RESET ROLE;
SELECT results_eq(format($$SELECT state, closed_at IS NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
                  $$VALUES ('draining'::text, true)$$, 'the session is draining, not closed');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l JOIN ql_private.runs r ON r.id = l.run_id
                            WHERE l.offer_id = %L$$, pg_temp.offer(3)),
                  $$VALUES ('session_closed'::text, 'queued'::text)$$, 'the unstarted lease released, its run re-queued');
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases WHERE released_at IS NULL
            AND offer_id IN (pg_temp.offer(1)::uuid, pg_temp.offer(2)::uuid)), 2, 'the started leases stay live');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'session.draining'),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'generation', 1, 'leasesReleased', 1,
                             'leasesRunning', 2, 'state', 'draining', 'drain', true, 'actor', session_user),
          'one session.draining event naming the actor');
SELECT is((SELECT count(*)::integer FROM ql_private.events WHERE type = 'session.closed'), 0,
          '... and no session.closed event');

-- 2. no new offer
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.pull(%L, 4)', :'s1'), 'QL015', 'session_draining',
                 'a pull gets no offer: QL015 session_draining');
SELECT is(pg_temp.pull(:'s1', 3), '{"status":"conflict","category":"session_draining"}'::jsonb,
          'the replay of the released offer: conflict session_draining (not session_replaced)');
SELECT is(pg_temp.ack(3, 'starting') ->> 'category', 'session_draining',
          'the released offer cannot start: session_draining');
SELECT is(pg_temp.pull(:'s1', 1) ->> 'status', 'idempotent',
          'the replay of a started offer rebuilds it (no new lease)');
RESET ROLE;
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases WHERE session_id = :'s1'::uuid), 3,
          'no lease was added to the draining session');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r4'::uuid), 'queued', 'run 4 stays queued');

-- 3. the started leases run on, the session stays alive
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(2, 'running') ->> 'status', 'ok', 'a started lease may still ACK running');
SELECT is(pg_temp.beat(1) ->> 'status', 'ok', '... and heartbeat');
SELECT ql.heartbeat_session(:'c1', :'d1', :'w1', :'s1', 1) AS hb \gset
RESET ROLE;
SELECT is((:'hb'::jsonb) - 'session', '{"status":"ok","draining":true}'::jsonb,
          'the session heartbeat extends it and says draining (in the envelope)');
SELECT is(:'hb'::jsonb #>> '{session,sessionId}', :'s1', '... with the session projection');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(1) #>> '{lease,state}', 'succeeded', 'the first started lease completes succeeded');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid), 'draining',
          'one lease left: still draining');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r1'::uuid), 'succeeded', 'run 1 succeeded');

-- 4. the last lease ends: the session closes
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(2) #>> '{lease,state}', 'succeeded', 'the last started lease completes succeeded');
RESET ROLE;
SELECT results_eq(format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
                  $$VALUES ('closed'::text, true)$$, 'with its last lease the session is closed');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'session.drained'),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'generation', 1),
          'one session.drained event');
SELECT throws_ok(format('SELECT ql.heartbeat_session(%L, %L::bytea, %L, %L, 1)', :'c1', :'d1', :'w1', :'s1'),
                 'QL013', NULL, 'the worker''s next session heartbeat: session_closed (it opens a new one)');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s1', true),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'state', 'closed', 'drain', true,
                             'leasesReleased', 0, 'leasesRunning', 0),
          'draining a closed session: a no-op');
RESET ROLE;

-- 5. nothing running: closed at once; a second drain is a no-op
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.claim('w1', :'s2', pg_temp.offer(5), 't5');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s2', true) - 'sessionId' - 'workerId',
          '{"state":"closed","drain":true,"leasesReleased":1,"leasesRunning":0}'::jsonb,
          'only an unstarted lease: released, and the session closed at once');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s2'::uuid), 'closed', 'closed');
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s3 \gset
SELECT ql_test.claim('w1', :'s3', pg_temp.offer(6), 't6');
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(6, 'starting');
RESET ROLE;
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s3', true) ->> 'state', 'draining', 'a started lease: draining');
SELECT ql_test.mark();
SELECT is(ql.end_session(:'s3', true) - 'sessionId' - 'workerId',
          '{"state":"draining","drain":true,"leasesReleased":0,"leasesRunning":1}'::jsonb,
          'draining it again: a no-op with the same shape');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... which wrote nothing (no second event)');

-- 6. drain_session refuses anything but an active session; roles
SELECT throws_ok(format('SELECT ql_private.drain_session(%L::uuid)', :'s3'), 'QL001', NULL,
                 'drain_session of a draining session -> QL001 (a caller bug)');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.end_session(%L, true)', :'s3'), '42501', NULL, 'the ingress cannot drain');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
