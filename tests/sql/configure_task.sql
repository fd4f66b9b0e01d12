-- ql.configure_task (SPEC §9.1): NULL leaves a setting unchanged, every bound
-- refused with QL006 naming the wire field (COLUMN), nothing changed on a
-- refusal, the new lease TTL applies to the next claim (read at claim time, not
-- copied at enqueue); roles: ql_runtime acts, ql_readonly and the ingress cannot.
BEGIN;
SELECT plan(26);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset

SELECT has_function('ql', 'configure_task',
                    ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean'],
                    'ql.configure_task exists');
SELECT function_privs_are('ql', 'configure_task',
                          ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean'],
                          'ql_runtime', ARRAY['EXECUTE'], 'runtime: EXECUTE');

SET LOCAL ROLE ql_runtime;
SELECT is(ql.configure_task(:'task'),
          jsonb_build_object('taskId', :'task', 'leaseTtlS', 60, 'maxAttempts', 3,
                             'retryBaseMs', 1000, 'retryCapMs', 300000, 'enabled', true),
          'all NULL: the settings unchanged (defaults)');
SELECT is(ql.configure_task(:'task', p_lease_ttl_s => 86400, p_max_attempts => 100),
          jsonb_build_object('taskId', :'task', 'leaseTtlS', 86400, 'maxAttempts', 100,
                             'retryBaseMs', 1000, 'retryCapMs', 300000, 'enabled', true),
          'upper bounds of TTL and attempts accepted, the rest unchanged');
SELECT is(ql.configure_task(:'task', p_retry_base_ms => 100, p_retry_cap_ms => 100) - 'taskId',
          '{"leaseTtlS": 86400, "maxAttempts": 100, "retryBaseMs": 100, "retryCapMs": 100, "enabled": true}'::jsonb,
          'cap = base accepted (lower bounds)');
SELECT is(ql.configure_task(:'task', p_retry_base_ms => 3600000, p_retry_cap_ms => 86400000,
                            p_lease_ttl_s => 5, p_max_attempts => 1, p_enabled => false) - 'taskId',
          '{"leaseTtlS": 5, "maxAttempts": 1, "retryBaseMs": 3600000, "retryCapMs": 86400000, "enabled": false}'::jsonb,
          'every setting at once');
RESET ROLE;
SELECT results_eq(
    format($$SELECT lease_ttl_seconds, max_attempts, retry_base_ms, retry_cap_ms, enabled
               FROM ql_private.tasks WHERE id = %L$$, :'task'),
    $$VALUES (5, 1, 3600000, 86400000, false)$$, 'stored on the task');

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
                          ARRAY['text', 'integer', 'integer', 'integer', 'integer', 'boolean'],
                          'public', ARRAY[]::text[], 'PUBLIC: nothing');

SELECT * FROM finish();
ROLLBACK;
