-- ql_private.close_drained_session (trigger run_leases_close_drained, migration
-- 0018): a draining session is closed when its last live lease is released —
-- by a completion, a loss the sweeper records, anything that releases a started
-- lease — with one session.drained event; an active session is never locked or
-- written by it; closing a draining session without drain (the escalation)
-- ends its started leases' fences as before.
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5
  FROM ql_test.enqueue(:'task', 5, 0) r \gset
SELECT ql_test.fake_lease(:'r1', :'s1', true) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s2', true) AS o3 \gset
SELECT ql_test.fake_lease(:'r4', :'s2', true) AS o4 \gset
UPDATE ql_private.attempts SET state = 'running'
 WHERE id IN (SELECT attempt_id FROM ql_private.run_leases);

SELECT ok((SELECT pg_get_triggerdef(t.oid) ~ 'AFTER UPDATE OF released_at ON ql_private\.run_leases FOR EACH ROW WHEN \(\(\(old\.released_at IS NULL\) AND \(new\.released_at IS NOT NULL\) AND \(new\.started_at IS NOT NULL\)\)\) EXECUTE FUNCTION ql_private\.close_drained_session\(\)'
             FROM pg_trigger t WHERE t.tgname = 'run_leases_close_drained'),
          'the trigger fires only for a started lease released now');

-- 1. an active session: neither locked nor written
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o3'::uuid;
SELECT results_eq(format($$SELECT state, xmax::text FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s2'),
                  $$VALUES ('active'::text, '0'::text)$$,
                  'a started lease of an active session released: the session untouched, not even locked');
SELECT is((SELECT count(*)::integer FROM ql_private.events WHERE type LIKE 'session.%'), 0, 'no event');

-- 2. a draining session closes with its last lease
UPDATE ql_private.worker_sessions SET state = 'draining' WHERE session_id = :'s1'::uuid;
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o1'::uuid;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid), 'draining',
          'one of two leases ended: still draining');
SELECT is((SELECT count(*)::integer FROM ql_private.events WHERE type = 'session.drained'), 0, '... no event yet');
-- The last one is lost: the sweeper releases it (lost) after its expiry.
SELECT ql_test.expire_lease(:'o2');
SET LOCAL ROLE ql_runtime;
SELECT ql.sweep_leases();
RESET ROLE;
SELECT is((ql_test.lease(:'o2')).release_reason, 'lost', 'the sweeper released the last lease as lost');
SELECT results_eq(format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
                  $$VALUES ('closed'::text, true)$$, '... and the draining session is closed with it');
SELECT is((SELECT jsonb_build_object('type', type, 'worker', worker_id, 'payload', payload)
             FROM ql_private.events WHERE type LIKE 'session.%'),
          jsonb_build_object('type', 'session.drained', 'worker', :'w1',
                             'payload', jsonb_build_object('sessionId', :'s1', 'workerId', :'w1', 'generation', 1)),
          'exactly one session.drained event, naming the worker');
-- Released again (a closed session): nothing more happens.
UPDATE ql_private.run_leases SET updated_at = clock_timestamp() WHERE offer_id = :'o2'::uuid;
SELECT is((SELECT count(*)::integer FROM ql_private.events WHERE type LIKE 'session.%'), 1, 'still one event');

-- 3. the escalation: closing a draining session without drain
SET LOCAL ROLE ql_runtime;
SELECT ql.end_session(:'s2', true) ->> 'state' AS st \gset
RESET ROLE;
SELECT is(:'st'::text, 'draining', 'session 2 drains (one started lease left)');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o1', ql_test.token_digest(:'o1'), 1) ->> 'category',
          'session_replaced', 'a lease of a drained (closed) session answers session_replaced');
RESET ROLE;
SET LOCAL ROLE ql_runtime;
SELECT is(ql.end_session(:'s2') - 'sessionId' - 'workerId',
          '{"state":"closed","drain":false,"leasesReleased":0,"leasesRunning":1}'::jsonb,
          'closing it without drain closes it at once (its started lease still live)');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s2'::uuid), 'closed', 'closed');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'lost'
 WHERE offer_id = :'o4'::uuid;
SELECT is((SELECT count(*)::integer FROM ql_private.events WHERE type = 'session.drained'), 1,
          'its last lease ending later writes no session.drained event');

SELECT * FROM finish();
ROLLBACK;
