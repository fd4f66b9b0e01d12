-- ql.idle_probe (the idle view's database answer): its grants, its answers on
-- each state (idle, candidate, backoff with its wake-up, live unstarted lease,
-- truncated head), and that it is read-only and SECURITY DEFINER. The triggers
-- that tell a replica to probe again are in idle_view_notify.sql.
BEGIN;
SELECT plan(18);
\ir fixtures.psql

SELECT has_function('ql', 'idle_probe', ARRAY[]::text[], 'ql.idle_probe() exists');

-- Grants: worker-facing only.
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'ql_worker_ingress',
                          ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.idle_probe');
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'ql_runtime',
                          ARRAY[]::text[], 'runtime: nothing on ql.idle_probe');
SELECT function_privs_are('ql', 'idle_probe', ARRAY[]::text[], 'public',
                          ARRAY[]::text[], 'PUBLIC: nothing on ql.idle_probe');

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

-- SPEC §9.2: scheduled runs: idle until the earliest due_at (the wake-up), a
-- due one makes the probe not idle even before the sweeper promotes it.
UPDATE ql_private.runs SET state = 'succeeded' WHERE state IN ('queued', 'dispatching');
DELETE FROM ql_private.run_leases;
SELECT ql.enqueue_runs(:'task', 0, 1, p_delay_ms => 600000) -> 'runIds' ->> 0 AS later \gset
SELECT ql.enqueue_runs(:'task', 0, 1, p_delay_ms => 60000) -> 'runIds' ->> 0 AS soon \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.idle_probe() AS p \gset
RESET ROLE;
SELECT is((:'p'::jsonb ->> 'idle')::boolean, true, 'only scheduled runs: idle');
SELECT is((:'p'::jsonb ->> 'wakeAtMs')::bigint,
          (SELECT ql_private.epoch_ms(due_at) FROM ql_private.runs WHERE id = :'soon'::uuid),
          '... waking up at the earliest due time');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'soon'::uuid;
UPDATE ql_private.attempts a SET not_before = clock_timestamp() - interval '1 second'
  FROM ql_private.runs r WHERE r.id = :'soon'::uuid AND a.id = r.current_attempt_id;
SELECT is(ql.idle_probe() - 'nowMs' - 'wakeAtMs', '{"idle": false, "reason": "candidate"}'::jsonb,
          'a due scheduled run (not yet promoted): not idle');

SELECT * FROM finish();
ROLLBACK;
