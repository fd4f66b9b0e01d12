-- ql.create_pool (SPEC §13.1): a pool of one project, the project (with its
-- default pool) created when needed; idempotent; names checked; roles.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.create_pool('acme', 'edge-routers') AS p1 \gset
SELECT ql.create_pool('acme', 'edge-routers') AS p2 \gset
RESET ROLE;
SELECT is(:'p1'::jsonb - 'poolId', '{"project":"acme","name":"edge-routers","created":true}'::jsonb,
          '{poolId, project, name, created: true}');
SELECT is(:'p2'::jsonb, jsonb_set(:'p1'::jsonb, '{created}', 'false'), 'again: the same pool, created = false');
SELECT results_eq($$SELECT pl.name FROM ql_private.pools pl JOIN ql_private.projects p ON p.id = pl.project_id
                     WHERE p.name = 'acme' ORDER BY pl.name$$,
                  $$VALUES ('default'::text), ('edge-routers'::text)$$,
                  'the project was created with its default pool');
SELECT ql_test.publish('other', 'task') ->> 'pool' AS pub_pool \gset
SELECT is(:'p2'::jsonb, jsonb_set(:'p1'::jsonb, '{created}', 'false'::jsonb), 'again: the same pool, created = false');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.create_pool('acme', 'Edge')$$, 'QL001', NULL, 'uppercase pool name refused');
SELECT throws_ok($$SELECT ql.create_pool('acme', '-x')$$, 'QL001', NULL, 'a name starting with - refused');
SELECT throws_ok($$SELECT ql.create_pool('acme', repeat('a', 64))$$, 'QL001', NULL, '64 chars refused');
SELECT throws_ok($$SELECT ql.create_pool('bad/project', 'x')$$, 'QL001', NULL, 'bad project refused');
RESET ROLE;
SELECT is(ql_test.error_of($$SELECT ql.create_pool('acme', 'a/b')$$), 'QL001 name', 'the error names the field name');
SELECT ok((SELECT count(*) = 0 FROM ql_private.projects WHERE name = 'bad/project'), 'a refusal changes nothing');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT ql.create_pool('acme', 'x')$$, '42501', NULL, 'the ingress cannot create pools');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
