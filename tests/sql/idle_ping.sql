-- ql.idle_ping (the idle view's barrier ping): its grants, that the ingress may
-- ping, and that a malformed token is refused. Delivery of the notification
-- needs a commit (this file rolls back): tests/py/test_ingress_idle_view_notify.py.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SELECT has_function('ql', 'idle_ping', ARRAY['text'], 'ql.idle_ping(text) exists');

-- Grants: worker-facing only.
SELECT function_privs_are('ql', 'idle_ping', ARRAY['text'], 'ql_worker_ingress',
                          ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.idle_ping');
SELECT function_privs_are('ql', 'idle_ping', ARRAY['text'], 'ql_runtime',
                          ARRAY[]::text[], 'runtime: nothing on ql.idle_ping');

SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.idle_ping('abc.1'), true, 'ingress may ping');
SELECT is(ql.idle_ping(p_token => 'A-z_0.9'), true, 'named notation: p_token');
RESET ROLE;
SELECT throws_ok($$SELECT ql.idle_ping('bad token!')$$, 'QL001', NULL, 'malformed ping token: QL001');

SELECT * FROM finish();
ROLLBACK;
