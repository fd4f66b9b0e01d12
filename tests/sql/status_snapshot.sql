-- ql.status_snapshot: queue depth by priority and task, oldest waiting run,
-- sessions with slot use, live leases by state, denials of the last hour;
-- read-only; executable by ql_readonly and ql_runtime, not by the ingress.
BEGIN;
SELECT plan(27);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'build') ->> 'taskId' AS build \gset
SELECT ql_test.publish('proj', 'test') ->> 'taskId' AS test \gset
SELECT ql_test.enqueue(:'build', 3, 5) AS high \gset
SELECT ql_test.enqueue(:'build', 2, 0) AS low \gset
SELECT ql_test.enqueue(:'test', 1, 0) AS low2 \gset
-- Age the first high-priority run so "oldest waiting" has a known lower bound.
UPDATE ql_private.runs SET created_at = clock_timestamp() - interval '10 minutes'
 WHERE id = (:'high'::text[])[1]::uuid;

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(4, '{"zone":"a"}', '{"python":"3.12.1"}'))
       ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(2)) ->> 'sessionId' AS s2 \gset
-- Leases: one unstarted (the oldest run: it stops being "waiting"), one
-- started, one unstarted that expired.
SELECT ql_test.fake_lease((:'high'::text[])[1], :'s1', false) AS offer_a \gset
SELECT ql_test.fake_lease((:'high'::text[])[2], :'s1', true) AS offer_b \gset
SELECT ql_test.fake_lease((:'low'::text[])[1], :'s2', false) AS offer_c \gset
SELECT ql_test.expire_lease(:'offer_c');

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.record_auth_denial(NULL, NULL, 'offer.pull', 'missing_credential');
SELECT ql.record_auth_denial(NULL, NULL, 'offer.pull', 'missing_credential');
SELECT ql.record_auth_denial(NULL, NULL, 'session.open', 'identity_mismatch');
RESET ROLE;
INSERT INTO ql_private.security_audit (occurred_at, action, outcome, reason)
VALUES (clock_timestamp() - interval '2 hours', 'offer.pull', 'denied', 'bad_secret'),
       (clock_timestamp(), 'offer.pull', 'allowed', 'ok');

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.status_snapshot() AS snap \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a snapshot writes nothing');

-- Queue
SELECT is((:'snap'::jsonb #>> '{queue,runs}')::int, 5,
          'runs = not started (the started run has left the queue)');
SELECT is((:'snap'::jsonb #>> '{queue,offered}')::int, 1, 'offered = live unstarted unexpired leases');
SELECT is((:'snap'::jsonb #>> '{queue,waiting}')::int, 4, 'waiting = runs - offered');
SELECT is((:'snap'::jsonb #>> '{queue,capped}')::boolean, false, 'not capped');
SELECT is(:'snap'::jsonb #> '{queue,estimate}', 'null'::jsonb, 'no estimate below the cap');
SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'priority', e ->> 'runs'))
             FROM jsonb_array_elements(:'snap'::jsonb #> '{queue,byPriority}') e),
          '[["5","2"],["0","3"]]'::jsonb, 'by priority, highest first');
SELECT ok((:'snap'::jsonb #>> '{queue,byPriority,0,oldestWaitingAgeMs}')::bigint BETWEEN 0 AND 60000,
          'priority 5: the aged run is offered (dispatching), so the oldest waiting one is recent');
SELECT ok((:'snap'::jsonb #>> '{queue,oldestWaitingAgeMs}')::bigint < 600000,
          'overall oldest waiting run excludes the offered one');
SELECT is((SELECT jsonb_agg(jsonb_build_array(e ->> 'task', e ->> 'runs', e ->> 'project'))
             FROM jsonb_array_elements(:'snap'::jsonb #> '{queue,byTask}') e),
          '[["build","4","proj"],["test","1","proj"]]'::jsonb,
          'by task (queued + dispatching), deepest first');
SELECT is(:'snap'::jsonb #> '{queue,otherTasks}', '{"runs":0,"tasks":0}'::jsonb, 'no tasks beyond the list');

-- Sessions
SELECT is((:'snap'::jsonb #>> '{sessions,active}')::int, 2, 'two active sessions');
SELECT is((:'snap'::jsonb #>> '{sessions,slots}')::int, 6, 'total slots');
SELECT is((:'snap'::jsonb #>> '{sessions,slotsUsed}')::int, 2,
          'slots used: live leases (an expired unstarted one frees its slot)');
SELECT is((SELECT e FROM jsonb_array_elements(:'snap'::jsonb #> '{sessions,list}') e
            WHERE e ->> 'sessionId' = :'s1') - 'lastHeartbeatAgeMs' - 'expiresInMs',
          jsonb_build_object('workerId', :'w1', 'worker', 'w1', 'sessionId', :'s1', 'generation', 1,
                             'slots', 4, 'slotsUsed', 2, 'slotsFree', 2,
                             'labels', '{"zone":"a"}'::jsonb, 'runtimes', '{"python":"3.12.1"}'::jsonb),
          'session w1: worker, generation, slots, capabilities');
SELECT ok((SELECT (e ->> 'expiresInMs')::bigint > 0 AND (e ->> 'lastHeartbeatAgeMs')::bigint >= 0
             FROM jsonb_array_elements(:'snap'::jsonb #> '{sessions,list}') e
            WHERE e ->> 'sessionId' = :'s2'), 'heartbeat age and expiry are reported');

-- Leases
SELECT is(:'snap'::jsonb -> 'leases',
          '{"unstarted":1,"started":1,"expiredUnstarted":1,"expiredStarted":0}'::jsonb,
          'live leases by state');

-- Denials
SELECT is(:'snap'::jsonb -> 'denials',
          '{"windowS":3600,"total":3,"byReason":{"identity_mismatch":1,"missing_credential":2},"capped":false}'::jsonb,
          'denials of the last hour by reason (older ones and allowed decisions not counted)');

-- A session that is replaced no longer shows; closing frees its slots.
SELECT ql_test.open_session('w2', ql_test.capabilities(3)) ->> 'sessionId' AS s2b \gset
SELECT ql.status_snapshot() AS snap2 \gset
SELECT is((:'snap2'::jsonb #>> '{sessions,active}')::int, 2, 'still two active sessions after a replacement');
SELECT is((SELECT e ->> 'generation' FROM jsonb_array_elements(:'snap2'::jsonb #> '{sessions,list}') e
            WHERE e ->> 'workerId' = :'w2'), '2', 'the replacement is listed with generation 2');

-- Empty database shape
DELETE FROM ql_private.run_leases;
UPDATE ql_private.runs SET state = 'succeeded';
SELECT ql.status_snapshot() AS empty \gset
SELECT is(:'empty'::jsonb #> '{queue,byPriority}', '[]'::jsonb, 'no priorities when nothing is queued');
SELECT is(:'empty'::jsonb #> '{queue,oldestWaitingAgeMs}', 'null'::jsonb, 'no oldest run');

-- Grants
SELECT ok(has_function_privilege('ql_readonly', 'ql.status_snapshot()', 'EXECUTE'), 'ql_readonly may call it');
SELECT ok(has_function_privilege('ql_runtime', 'ql.status_snapshot()', 'EXECUTE'), 'ql_runtime may call it');
SELECT ok(NOT has_function_privilege('ql_worker_ingress', 'ql.status_snapshot()', 'EXECUTE'),
          'the ingress may not');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.status_snapshot()', '42501', NULL, 'ingress call refused');
RESET ROLE;

-- The NOTIFY queue's fill level (pg_notification_queue_usage): a fraction,
-- empty here (no listener holds it).
SELECT is((:'snap'::jsonb ->> 'notificationQueueUsage')::float8, 0::float8,
          'notificationQueueUsage reports the NOTIFY queue fill level');
SELECT * FROM finish();
ROLLBACK;
