-- Idle view: ql.idle_probe, ql.idle_ping, the notify triggers of
-- migration 0005 and their grants. Notification delivery itself needs commits
-- (this file rolls back), so tests/py/test_ingress_idle_view_notify.py proves
-- which paths notify; here: the triggers exist with the right timing, the
-- probe's answers on each state, its bounded read-only plan, and the grants.
BEGIN;
SELECT plan(24);
\ir fixtures.psql

-- Grants: worker-facing only.
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'ql_worker_ingress',
                          ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.idle_probe');
SELECT function_privs_are('ql', 'idle_ping', ARRAY['text'], 'ql_worker_ingress',
                          ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.idle_ping');
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'ql_runtime',
                          ARRAY[]::text[], 'runtime: nothing on ql.idle_probe');
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'public',
                          ARRAY[]::text[], 'PUBLIC: nothing on ql.idle_probe');
SELECT ok(NOT has_function_privilege('ql_worker_ingress', 'ql_private.idle_view_notify()', 'EXECUTE'),
          'the trigger function is not callable by the ingress');

-- Triggers: AFTER, row-level with WHEN where a bulk statement must stay cheap.
SELECT triggers_are('ql_private', 'runs',
    ARRAY['runs_idle_view_insert', 'runs_idle_view_requeue'], 'runs: the idle view triggers');
SELECT triggers_are('ql_private', 'attempts',
    ARRAY['attempts_idle_view_insert', 'attempts_idle_view_update'], 'attempts: the idle view triggers');
SELECT triggers_are('ql_private', 'worker_credentials',
    ARRAY['worker_credentials_idle_view_update', 'worker_credentials_idle_view_delete'],
    'worker_credentials: the idle view triggers');
SELECT triggers_are('ql_private', 'worker_sessions',
    ARRAY['worker_sessions_idle_view_update', 'worker_sessions_idle_view_delete'],
    'worker_sessions: the idle view triggers');
SELECT is((SELECT array_agg(tgname::text ORDER BY tgname) FROM pg_trigger
            WHERE tgname LIKE '%idle_view%' AND tgfoid = 'ql_private.idle_view_notify()'::regprocedure
              AND (tgtype & 2) = 0),  -- bit 1 = BEFORE
          ARRAY['attempts_idle_view_insert', 'attempts_idle_view_update', 'runs_idle_view_insert',
                'runs_idle_view_requeue', 'worker_credentials_idle_view_delete',
                'worker_credentials_idle_view_update', 'worker_sessions_idle_view_delete',
                'worker_sessions_idle_view_update'],
          'every idle view trigger is AFTER and calls ql_private.idle_view_notify()');
SELECT ok((SELECT pg_get_triggerdef(oid) LIKE '%expires_at < old.expires_at%'
             AND pg_get_triggerdef(oid) NOT LIKE '%heartbeat_at%'
             FROM pg_trigger WHERE tgname = 'worker_sessions_idle_view_update'),
          'session trigger: only fence facts and expiry moving back, never a heartbeat');

-- Probe answers.
SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
DELETE FROM ql_private.run_leases;
UPDATE ql_private.runs SET state = 'succeeded' WHERE state IN ('queued', 'dispatching');

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.idle_probe() AS p \gset
RESET ROLE;
SELECT is(:'p'::jsonb - 'nowMs', '{"idle": true, "reason": null, "wakeAtMs": null}'::jsonb,
          'empty queue, no leases: idle, no wake-up');
SELECT ok((:'p'::jsonb ->> 'nowMs')::bigint BETWEEN ql_private.epoch_ms(clock_timestamp()) - 5000
                                               AND ql_private.epoch_ms(clock_timestamp()),
          'nowMs is the database clock');

SELECT r[1] AS r1 FROM ql_test.enqueue(:'task', 1, 0) r \gset
SELECT is(ql.idle_probe() - 'nowMs', '{"idle": false, "reason": "candidate", "wakeAtMs": null}'::jsonb,
          'a dispatchable queued run: not idle');

UPDATE ql_private.attempts SET not_before = clock_timestamp() + interval '30 seconds'
 WHERE run_id = :'r1'::uuid;
SELECT ql.idle_probe() AS p \gset
SELECT is((:'p'::jsonb ->> 'idle')::boolean, true, 'a queued run still in backoff: idle');
SELECT is((:'p'::jsonb ->> 'wakeAtMs')::bigint,
          (SELECT ql_private.epoch_ms(not_before) FROM ql_private.attempts WHERE run_id = :'r1'::uuid),
          '... with the backoff end as the wake-up');

SELECT ql_test.fake_lease(:'r1', :'s1', false) AS offer \gset
UPDATE ql_private.runs SET state = 'dispatching' WHERE id = :'r1'::uuid;
SELECT is(ql.idle_probe() ->> 'reason', 'unstarted_lease',
          'a live unstarted lease (a response may be lost): not idle');
SELECT is((ql.idle_probe() ->> 'idle')::boolean, false, '... idle is false');
UPDATE ql_private.run_leases SET started_at = clock_timestamp() WHERE offer_id = :'offer'::uuid;
SELECT is((ql.idle_probe() ->> 'idle')::boolean, true, 'a started lease does not block idle');

-- More queued runs than the head can prove idle in bounded time.
SELECT ql_test.enqueue(:'task', 65, 0) IS NOT NULL AS queued \gset
UPDATE ql_private.attempts a SET not_before = clock_timestamp() + interval '1 hour'
  FROM ql_private.runs r WHERE r.current_attempt_id = a.id AND r.state = 'queued';
SELECT is(ql.idle_probe() - 'nowMs' - 'wakeAtMs', '{"idle": false, "reason": "truncated"}'::jsonb,
          'more than 64 queued runs, none dispatchable: not idle (truncated)');

-- Read-only, bounded plan.
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.idle_probe() IS NOT NULL AS probed \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'the probe writes nothing');
SELECT is((SELECT provolatile::text || prosecdef::text FROM pg_proc WHERE oid = 'ql.idle_probe()'::regprocedure),
          'vtrue', 'probe: SECURITY DEFINER');

-- Ping.
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.idle_ping('abc.1'), true, 'ingress may ping');
RESET ROLE;
SELECT throws_ok($$SELECT ql.idle_ping('bad token!')$$, 'QL001', NULL, 'malformed ping token: QL001');

SELECT * FROM finish();
ROLLBACK;
