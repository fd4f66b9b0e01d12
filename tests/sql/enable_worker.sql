-- ql.enable_worker (SPEC §9.5): a disabled worker authenticates again, one
-- worker.enabled event with the actor; idempotent; roles.
BEGIN;
SELECT plan(8);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql.disable_worker(:'w1') IS NOT NULL AS disabled \gset
SET LOCAL ROLE ql_runtime;
SELECT is(ql.enable_worker(:'w1'), jsonb_build_object('workerId', :'w1', 'disabled', false), '{workerId, disabled: false}');
RESET ROLE;
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'session.open'), NULL, 'its credential is accepted again');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'worker.enabled'),
          jsonb_build_object('workerId', :'w1', 'actor', session_user), 'one worker.enabled event naming the actor');
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.enable_worker(:'w1'), jsonb_build_object('workerId', :'w1', 'disabled', false), 'enabling again: same answer');
SELECT is(ql_test.error_of(format('SELECT ql.enable_worker(%L)', gen_random_uuid())), 'QL004 workerId', 'unknown -> QL004');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing written');
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.enable_worker(%L)', :'w1'), '42501', NULL, 'ql_readonly cannot enable');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.enable_worker(%L)', :'w1'), '42501', NULL, 'the ingress cannot enable');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
