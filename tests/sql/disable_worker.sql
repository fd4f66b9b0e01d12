-- ql.disable_worker (SPEC §9.5): the worker's credentials are refused with 403
-- worker_disabled, its session closed (unstarted leases released, runs
-- re-queued, started ones kept), one worker.disabled event with the actor;
-- idempotent; unknown ids; roles.
BEGIN;
SELECT plan(15);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS unstarted, r[2] AS started FROM ql_test.enqueue(:'task', 2) r \gset
SELECT ql_test.fake_lease(:'unstarted', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'started', :'s1', true) AS o2 \gset

SET LOCAL ROLE ql_runtime;
SELECT ql.disable_worker(:'w1') AS d \gset
RESET ROLE;
SELECT is(:'d'::jsonb, jsonb_build_object('workerId', :'w1', 'disabled', true, 'sessionsClosed', 1, 'leasesReleased', 1),
          '{workerId, disabled, sessionsClosed, leasesReleased}');
SELECT ok((SELECT disabled_at IS NOT NULL FROM ql_private.workers WHERE id = :'w1'::uuid), 'disabled_at set');
SELECT results_eq(format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
                  $$VALUES ('closed'::text, true)$$, 'its session is closed');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l JOIN ql_private.runs r ON r.id = l.run_id
                            WHERE l.offer_id = %L$$, :'o1'),
                  $$VALUES ('session_closed'::text, 'queued'::text)$$, 'the unstarted lease released, its run re-queued');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'o2'::uuid), NULL::timestamptz,
          'the started lease stays live');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'worker.disabled' AND worker_id = :'w1'::uuid),
          jsonb_build_object('workerId', :'w1', 'sessionsClosed', 1, 'leasesReleased', 1, 'actor', session_user),
          'one worker.disabled event naming the actor');
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'session.open'),
          '{"status":"denied","httpStatus":403,"reason":"worker_disabled"}'::jsonb,
          'its credential is refused: 403 worker_disabled');
SELECT is(ql.open_session(:'c1', :'d1', :'w1', ql_test.capabilities()) ->> 'reason', 'worker_disabled',
          'it cannot open a new session');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.disable_worker(:'w1'), jsonb_build_object('workerId', :'w1', 'disabled', true, 'sessionsClosed', 0, 'leasesReleased', 0),
          'disabling again: nothing to do');
SELECT is(ql_test.error_of(format('SELECT ql.disable_worker(%L)', gen_random_uuid())), 'QL004 workerId', 'unknown -> QL004');
SELECT is(ql_test.error_of($$SELECT ql.disable_worker('x')$$), 'QL001 workerId', 'malformed -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'repeat and refusals changed nothing (no second event)');

SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.disable_worker(%L)', :'w1'), '42501', NULL, 'ql_readonly cannot disable');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.disable_worker(%L)', :'w1'), '42501', NULL, 'the ingress cannot disable');
RESET ROLE;
SELECT ok((SELECT prosrc ~ 'pg_notify\(''ql_dispatch'', ''c:'' \|\| c\.credential_id\)'
             FROM pg_proc WHERE oid = 'ql.disable_worker(text)'::regprocedure),
          'it notifies c:<credentialId> for each credential (replicas drop cached facts)');

SELECT * FROM finish();
ROLLBACK;
