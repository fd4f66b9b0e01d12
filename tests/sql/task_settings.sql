-- ql.task_settings (SPEC §9.1, §15.2): the settings object (logLimitBytes too), unknown / malformed ids
-- with their COLUMN, read-only; readable by ql_readonly and ql_runtime, not by
-- the ingress.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET lease_ttl_seconds = 120, max_attempts = 5, retry_base_ms = 200,
                            retry_cap_ms = 9000, enabled = false, log_limit_bytes = 2048
 WHERE id = :'task'::uuid;

SELECT has_function('ql', 'task_settings', ARRAY['text'], 'ql.task_settings exists');
SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT is(ql.task_settings(:'task'),
          jsonb_build_object('taskId', :'task', 'leaseTtlS', 120, 'maxAttempts', 5,
                             'retryBaseMs', 200, 'retryCapMs', 9000, 'enabled', false,
                             'logLimitBytes', 2048),
          'ql_readonly reads the settings');
SELECT is(ql_test.error_of('SELECT ql.task_settings(''x'')'), 'QL001 taskId', 'malformed -> QL001 taskId');
SELECT is(ql_test.error_of(format('SELECT ql.task_settings(%L)', gen_random_uuid())), 'QL004 taskId',
          'unknown -> QL004 taskId');
RESET ROLE;
SET LOCAL ROLE ql_runtime;
SELECT is(ql.task_settings(:'task') ->> 'leaseTtlS', '120', 'ql_runtime reads it too');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.task_settings(%L)', :'task'), '42501', NULL, 'the ingress cannot read it');
RESET ROLE;
SELECT function_privs_are('ql', 'task_settings', ARRAY['text'], 'ql_readonly', ARRAY['EXECUTE'],
                          'readonly: EXECUTE');
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql.task_settings(text)'::regprocedure), 's'::"char",
          'STABLE: it cannot write');

SELECT * FROM finish();
ROLLBACK;
