-- ql.end_session (SPEC §9.5): the operator closes a session like
-- ql.close_session (unstarted leases released, runs re-queued), one
-- session.closed event with the actor; a closed session is a no-op; roles.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS run FROM ql_test.enqueue(:'task', 1) r \gset
SELECT ql_test.fake_lease(:'run', :'s1', false) AS o1 \gset

SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s1'),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'state', 'closed', 'drain', false,
                             'leasesReleased', 1, 'leasesRunning', 0),
          '{sessionId, workerId, state: closed, drain: false, leasesReleased, leasesRunning}');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid), 'closed', 'closed');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l JOIN ql_private.runs r ON r.id = l.run_id
                            WHERE l.offer_id = %L$$, :'o1'),
                  $$VALUES ('session_closed'::text, 'queued'::text)$$, 'its unstarted lease released, run re-queued');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'session.closed'),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'generation', 1, 'leasesReleased', 1,
                             'drain', false, 'actor', session_user), 'one session.closed event naming the actor');
SELECT throws_ok(format('SELECT ql.heartbeat_session(%L, %L::bytea, %L, %L, 1)', :'c1', :'d1', :'w1', :'s1'),
                 'QL013', NULL, 'the worker''s next call finds it closed');
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s1'),
          jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'state', 'closed', 'drain', false,
                             'leasesReleased', 0, 'leasesRunning', 0),
          'closing it again: a no-op with the same shape');
SELECT is(ql_test.error_of(format('SELECT ql.end_session(%L)', gen_random_uuid())), 'QL004 sessionId', 'unknown -> QL004');
SELECT is(ql_test.error_of($$SELECT ql.end_session('x')$$), 'QL001 sessionId', 'malformed -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'no-op and refusals changed nothing');
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.end_session(%L)', :'s1'), '42501', NULL, 'ql_readonly cannot close');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.end_session(%L)', :'s1'), '42501', NULL, 'the ingress cannot use it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
