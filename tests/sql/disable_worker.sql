-- ql.disable_worker (SPEC §9.5): the worker's credentials are refused with 403
-- worker_disabled, its session closed (unstarted leases released, runs
-- re-queued, started ones kept), one worker.disabled event with the actor;
-- idempotent; unknown ids; roles. With drain: the session drains instead
-- (unstarted leases released, no new offer, no new session), and only the
-- calls that let its started leases end are let through until it closes.
BEGIN;
SELECT plan(33);
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
SELECT is(:'d'::jsonb, jsonb_build_object('workerId', :'w1', 'disabled', true, 'drain', false, 'sessionsClosed', 1,
                                          'sessionsDraining', 0, 'leasesReleased', 1),
          '{workerId, disabled, drain: false, sessionsClosed, sessionsDraining, leasesReleased}');
SELECT ok((SELECT disabled_at IS NOT NULL FROM ql_private.workers WHERE id = :'w1'::uuid), 'disabled_at set');
SELECT results_eq(format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
                  $$VALUES ('closed'::text, true)$$, 'its session is closed');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l JOIN ql_private.runs r ON r.id = l.run_id
                            WHERE l.offer_id = %L$$, :'o1'),
                  $$VALUES ('session_closed'::text, 'queued'::text)$$, 'the unstarted lease released, its run re-queued');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'o2'::uuid), NULL::timestamptz,
          'the started lease stays live');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'worker.disabled' AND worker_id = :'w1'::uuid),
          jsonb_build_object('workerId', :'w1', 'drain', false, 'sessionsClosed', 1, 'sessionsDraining', 0,
                             'leasesReleased', 1, 'actor', session_user),
          'one worker.disabled event naming the actor');
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'session.open'),
          '{"status":"denied","httpStatus":403,"reason":"worker_disabled"}'::jsonb,
          'its credential is refused: 403 worker_disabled');
SELECT is(ql.open_session(:'c1', :'d1', :'w1', ql_test.capabilities()) ->> 'reason', 'worker_disabled',
          'it cannot open a new session');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.disable_worker(:'w1'), jsonb_build_object('workerId', :'w1', 'disabled', true, 'drain', false,
                                                       'sessionsClosed', 0, 'sessionsDraining', 0, 'leasesReleased', 0),
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
             FROM pg_proc WHERE oid = 'ql.disable_worker(text, boolean)'::regprocedure),
          'it notifies c:<credentialId> for each credential (replicas drop cached facts)');

-- With drain (worker w2): its started lease runs on, nothing new starts.
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS s2 \gset
SELECT r[1] AS u2, r[2] AS st2, r[3] AS q2 FROM ql_test.enqueue(:'task', 3) r \gset
SELECT ql_test.fake_lease(:'u2', :'s2', false) AS o3 \gset
SELECT ql_test.fake_lease(:'st2', :'s2', true) AS o4 \gset
UPDATE ql_private.attempts SET state = 'running' WHERE id = (ql_test.lease(:'o4')).attempt_id;
SET LOCAL ROLE ql_runtime;
SELECT is(ql.disable_worker(:'w2', true),
          jsonb_build_object('workerId', :'w2', 'disabled', true, 'drain', true, 'sessionsClosed', 0,
                             'sessionsDraining', 1, 'leasesReleased', 1),
          'drain: {drain: true, sessionsClosed 0, sessionsDraining 1, leasesReleased 1}');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s2'::uuid), 'draining',
          'its session is draining');
SELECT is((ql_test.lease(:'o3')).release_reason, 'session_closed', 'its unstarted lease released');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'worker.disabled' AND worker_id = :'w2'::uuid),
          jsonb_build_object('workerId', :'w2', 'drain', true, 'sessionsClosed', 0, 'sessionsDraining', 1,
                             'leasesReleased', 1, 'actor', session_user),
          'one worker.disabled event naming the actor, drain: true');
SELECT is(ql_private.authenticate(:'c2', :'d2', :'w2'::uuid, 'session.open') ->> 'reason', 'worker_disabled',
          'drain: a new session is refused (worker_disabled)');
SELECT is(ql_private.authenticate(:'c2', :'d2', :'w2'::uuid, 'offer.pull') ->> 'reason', 'worker_disabled',
          '... and so is every pull');
SELECT is(ql_private.authenticate(:'c2', :'d2', :'w2'::uuid, 'lease.heartbeat'), NULL,
          '... but a lease heartbeat is let through while the session drains');
SELECT is(ql_private.authenticate(:'c2', :'d2', :'w2'::uuid, 'session.heartbeat'), NULL,
          '... and so is its session heartbeat');
SELECT is(ql_private.authenticate(:'c2', 'x'::bytea, :'w2'::uuid, 'lease.heartbeat') ->> 'reason', 'malformed_credential',
          '... with its real credential only');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.pull_offer(:'c2', :'d2', :'w2', :'s2', 1, gen_random_uuid()::text, ql_test.token_digest('x')),
          '{"status":"denied","httpStatus":403,"reason":"worker_disabled"}'::jsonb, 'a pull: 403 worker_disabled');
SELECT is(ql.ack_lease(:'c2', :'d2', :'w2', :'s2', 1, :'o3', ql_test.token_digest(:'o3'), 1, 'starting') ->> 'category',
          'session_draining', 'the released lease cannot start');
SELECT is(ql.heartbeat_session(:'c2', :'d2', :'w2', :'s2', 1) ->> 'draining', 'true',
          'the session heartbeat keeps the draining session alive');
SELECT is(ql.heartbeat_lease(:'c2', :'d2', :'w2', :'s2', 1, :'o4', ql_test.token_digest(:'o4'), 1) ->> 'status', 'ok',
          'the started lease heartbeats');
SELECT is(ql.complete_lease(:'c2', :'d2', :'w2', :'s2', 1, :'o4', ql_test.token_digest(:'o4'), 2, 'succeeded', 0, NULL)
              #>> '{lease,state}', 'succeeded', '... and completes succeeded');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s2'::uuid), 'closed',
          'with its last lease the session closed');
SELECT is(ql_private.authenticate(:'c2', :'d2', :'w2'::uuid, 'lease.heartbeat') ->> 'reason', 'worker_disabled',
          'no draining session left: every call refused again');
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases WHERE worker_id = :'w2'::uuid), 2,
          'no lease was ever added for the disabled worker');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'q2'::uuid), 'queued', 'its queued run stays queued');

SELECT * FROM finish();
ROLLBACK;
