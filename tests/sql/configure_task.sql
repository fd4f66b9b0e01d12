-- ql.configure_task (SPEC §9.1): NULL leaves a setting unchanged, every bound
-- refused with QL006 naming the wire field (COLUMN), nothing changed on a
-- refusal, the new lease TTL applies to the next claim (read at claim time, not
-- copied at enqueue) and never to a lease already claimed (pinned on the lease,
-- as the live-log cap logLimitBytes is);
-- the retry policy is pinned on each attempt when it is created; roles: ql_runtime acts, ql_readonly and the ingress cannot.
BEGIN;
SELECT plan(39);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset

SELECT has_function('ql', 'configure_task',
                    ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean', 'integer'],
                    'ql.configure_task exists');
SELECT function_privs_are('ql', 'configure_task',
                          ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean', 'integer'],
                          'ql_runtime', ARRAY['EXECUTE'], 'runtime: EXECUTE');

SET LOCAL ROLE ql_runtime;
SELECT is(ql.configure_task(:'task'),
          jsonb_build_object('taskId', :'task', 'leaseTtlS', 60, 'maxAttempts', 3,
                             'retryBaseMs', 1000, 'retryCapMs', 300000, 'enabled', true,
                             'logLimitBytes', 4194304),
          'all NULL: the settings unchanged (defaults)');
SELECT is(ql.configure_task(:'task', p_lease_ttl_s => 86400, p_max_attempts => 100),
          jsonb_build_object('taskId', :'task', 'leaseTtlS', 86400, 'maxAttempts', 100,
                             'retryBaseMs', 1000, 'retryCapMs', 300000, 'enabled', true,
                             'logLimitBytes', 4194304),
          'upper bounds of TTL and attempts accepted, the rest unchanged');
SELECT is(ql.configure_task(:'task', p_retry_base_ms => 100, p_retry_cap_ms => 100) - 'taskId',
          '{"leaseTtlS": 86400, "maxAttempts": 100, "retryBaseMs": 100, "retryCapMs": 100, "enabled": true, "logLimitBytes": 4194304}'::jsonb,
          'cap = base accepted (lower bounds)');
SELECT is(ql.configure_task(:'task', p_retry_base_ms => 3600000, p_retry_cap_ms => 86400000,
                            p_lease_ttl_s => 5, p_max_attempts => 1, p_enabled => false,
                            p_log_limit_bytes => 1024) - 'taskId',
          '{"leaseTtlS": 5, "maxAttempts": 1, "retryBaseMs": 3600000, "retryCapMs": 86400000, "enabled": false, "logLimitBytes": 1024}'::jsonb,
          'every setting at once');
RESET ROLE;
SELECT results_eq(
    format($$SELECT lease_ttl_seconds, max_attempts, retry_base_ms, retry_cap_ms, enabled,
                    log_limit_bytes
               FROM ql_private.tasks WHERE id = %L$$, :'task'),
    $$VALUES (5, 1, 3600000, 86400000, false, 1024)$$, 'stored on the task');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.configure_task(:'task', p_log_limit_bytes => 67108864) ->> 'logLimitBytes', '67108864',
          'logLimitBytes upper bound (64 MiB) accepted');
SELECT is(ql.task_settings(:'task') ->> 'logLimitBytes', '67108864', 'task_settings shows logLimitBytes');
RESET ROLE;

-- Bounds: QL006 with the wire field; nothing changed.
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_lease_ttl_s => 4)', :'task')),
          'QL006 leaseTtlS', 'leaseTtlS 4 -> QL006 leaseTtlS');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_lease_ttl_s => 86401)', :'task')),
          'QL006 leaseTtlS', 'leaseTtlS 86401 -> QL006 leaseTtlS');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_max_attempts => 0)', :'task')),
          'QL006 maxAttempts', 'maxAttempts 0 -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_max_attempts => 101)', :'task')),
          'QL006 maxAttempts', 'maxAttempts 101 -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_retry_base_ms => 99)', :'task')),
          'QL006 retryBaseMs', 'retryBaseMs 99 -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_retry_base_ms => 3600001)', :'task')),
          'QL006 retryBaseMs', 'retryBaseMs above 1 h -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_retry_cap_ms => 86400001)', :'task')),
          'QL006 retryCapMs', 'retryCapMs above 24 h -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_retry_base_ms => 2000, p_retry_cap_ms => 1000)', :'task')),
          'QL006 retryCapMs', 'cap below base (both given) -> QL006 retryCapMs');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_retry_cap_ms => 200000)', :'task')),
          'QL006 retryCapMs', 'cap below the stored base -> QL006 retryCapMs');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_log_limit_bytes => 1023)', :'task')),
          'QL006 logLimitBytes', 'logLimitBytes under 1 KiB -> QL006 logLimitBytes');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L, p_log_limit_bytes => 67108865)', :'task')),
          'QL006 logLimitBytes', 'logLimitBytes over 64 MiB -> QL006 logLimitBytes');
SELECT is(ql_test.error_of('SELECT ql.configure_task(''nope'')'), 'QL001 taskId',
          'malformed task id -> QL001 taskId');
SELECT is(ql_test.error_of(format('SELECT ql.configure_task(%L)', gen_random_uuid())), 'QL004 taskId',
          'unknown task -> QL004 taskId');
SELECT throws_ok(format('SELECT ql.configure_task(%L, p_lease_ttl_s => 4)', :'task'), 'QL006',
                 'leaseTtlS must be between 5 and 86400', 'the message names the field and its bounds');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'no refusal changed anything');

-- The lease TTL is read at claim: a run queued before the change gets the new TTL.
UPDATE ql_private.tasks SET enabled = true WHERE id = :'task'::uuid;
SET LOCAL ROLE ql_runtime;
SELECT ql.configure_task(:'task', p_lease_ttl_s => 7200) IS NOT NULL AS configured \gset
RESET ROLE;
SELECT ql_test.claim('w1', :'s1', gen_random_uuid()::text, 'tok') ->> 'offerId' AS offer \gset
SELECT ok((SELECT expires_at - claimed_at FROM ql_private.run_leases WHERE offer_id = :'offer'::uuid)
          = interval '7200 seconds', 'the next claim''s lease runs for the new TTL (2 h)');

-- ... and is pinned on the lease there (SPEC 9.1: new settings apply to
-- attempts claimed afterwards): a TTL configured after the claim does not reach
-- the claimed lease — its starting ACK and its heartbeats extend it by the TTL
-- it was claimed with — while the next claim gets the new one.
SET LOCAL ROLE ql_runtime;
SELECT ql.configure_task(:'task', p_lease_ttl_s => 5) IS NOT NULL AS shortened \gset
RESET ROLE;
SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                    :'offer', ql_test.token_digest('tok'), 1, 'starting') ->> 'status' AS acked \gset
SELECT is((SELECT expires_at - started_at FROM ql_private.run_leases WHERE offer_id = :'offer'::uuid),
          interval '7200 seconds', 'the starting ACK extends by the TTL pinned at claim, not the new 5 s');
SELECT ql.heartbeat_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                          :'offer', ql_test.token_digest('tok'), 2) ->> 'status' AS beat \gset
SELECT is((SELECT expires_at - heartbeat_at FROM ql_private.run_leases WHERE offer_id = :'offer'::uuid),
          interval '7200 seconds', 'a heartbeat after the change still extends by the pinned 2 h');
SELECT is(:'acked' || '/' || :'beat', 'ok/ok', 'both applied');
SELECT ql_test.claim('w1', :'s1', gen_random_uuid()::text, 'tok2') ->> 'offerId' AS offer2 \gset
SELECT is((SELECT lease_ttl_seconds || ' ' || (expires_at - claimed_at)
             FROM ql_private.run_leases WHERE offer_id = :'offer2'::uuid),
          '5 00:00:05', 'the next claim pins and runs for the new TTL (5 s)');
-- The live-log cap (SPEC 15.2) likewise: pinned on the lease by its claim.
SELECT is((SELECT array_agg(log_limit_bytes ORDER BY claimed_at) FROM ql_private.run_leases
            WHERE offer_id IN (:'offer'::uuid, :'offer2'::uuid)),
          ARRAY[67108864, 67108864], 'both claims pinned the task''s logLimitBytes (64 MiB)');

-- The retry policy is pinned on each attempt when it is created (enqueue,
-- retry policy, operator retry): the ended attempt's own max attempts, base and
-- cap decide; the next attempt takes the task's policy as configured now.
SELECT ql_test.publish('proj', 'policy') ->> 'taskId' AS ptask \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.configure_task(:'ptask', p_max_attempts => 3, p_retry_base_ms => 100,
                         p_retry_cap_ms => 100) IS NOT NULL AS p1 \gset
SELECT r[1] AS pr FROM ql_test.enqueue(:'ptask', 1, 0) r \gset
SELECT ql.configure_task(:'ptask', p_max_attempts => 1, p_retry_base_ms => 3600000,
                         p_retry_cap_ms => 3600000) IS NOT NULL AS p2 \gset
RESET ROLE;
CREATE FUNCTION pg_temp.fail_current(run uuid) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    att uuid;
BEGIN
    SELECT current_attempt_id INTO att FROM ql_private.runs WHERE id = run;
    UPDATE ql_private.attempts SET state = 'failed', finished_at = clock_timestamp() WHERE id = att;
    RETURN ql_private.apply_retry(run, att, 'test_failure');
END
$$;
SELECT is(pg_temp.fail_current(:'pr'), 'retried',
          'attempt 1 fails: retried (its pinned max attempts 3, not the task''s 1 now)');
SELECT results_eq(
    format($$SELECT a.attempt_no, a.not_before <= a.created_at + interval '100 ms',
                    a.max_attempts, a.retry_base_ms, a.retry_cap_ms
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'pr'),
    $$VALUES (2, true, 1, 3600000, 3600000)$$,
    'backoff within attempt 1''s pinned cap (100 ms); attempt 2 pins the policy as configured now');
SELECT is(pg_temp.fail_current(:'pr'), 'failed', 'attempt 2 fails: its own pinned max attempts (1) end the run');
SET LOCAL ROLE ql_runtime;
SELECT ql.configure_task(:'ptask', p_max_attempts => 4) IS NOT NULL AS p3 \gset
SELECT ql.retry_run(:'pr') ->> 'attemptNo' AS retried_no \gset
RESET ROLE;
SELECT is((SELECT a.max_attempts FROM ql_private.runs r JOIN ql_private.attempts a
             ON a.id = r.current_attempt_id WHERE r.id = :'pr'::uuid), 4,
          'an operator retry''s attempt pins the policy as configured now');

-- Disabled task refuses enqueues.
SET LOCAL ROLE ql_runtime;
SELECT ql.configure_task(:'task', p_enabled => false) ->> 'enabled' AS enabled \gset
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1)', :'task')), 'QL001 taskId',
          'a disabled task refuses enqueues (QL001 taskId)');
RESET ROLE;
SELECT is(:'enabled'::text, 'false', 'disabled');

-- Roles
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.configure_task(%L)', :'task'), '42501', NULL,
                 'ql_readonly cannot configure');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.configure_task(%L)', :'task'), '42501', NULL,
                 'the ingress cannot configure');
RESET ROLE;
SELECT function_privs_are('ql', 'configure_task',
                          ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean', 'integer'],
                          'public', ARRAY[]::text[], 'PUBLIC: nothing');

SELECT * FROM finish();
ROLLBACK;
