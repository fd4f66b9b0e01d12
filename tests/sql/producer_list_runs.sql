-- ql.producer_list_runs (SPEC §13.4): one task of the token's project; another
-- project's task is not found; the task is required; scope; roles.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SELECT ql_test.enqueue(:'task', 3) AS runs \gset
SELECT ql_test.enqueue(:'other_task', 1) AS other_runs \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'rrrrrrrrrrrrrrrr', sha256('tok-r'), ARRAY['read']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'eeeeeeeeeeeeeeee', sha256('tok-e'), ARRAY['enqueue']) IS NOT NULL AS c \gset
RESET ROLE;

SET LOCAL ROLE ql_producer;
SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), 'acme/build', ARRAY['queued'], 2) AS page \gset
RESET ROLE;
SELECT is(:'page'::jsonb, ql.list_runs(:'task', ARRAY['queued'], 2), 'the list_runs page of the task');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, :'other_task'),
                 'QL004', NULL, 'another project''s task: not found');
SELECT throws_ok($$SELECT ql.producer_list_runs('eeeeeeeeeeeeeeee', sha256('tok-e'), 'acme/build')$$,
                 'QL031', NULL, 'a token without read: scope_missing');
SELECT throws_ok($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-e'), 'acme/build')$$,
                 'QL030', NULL, 'a wrong digest: token_invalid');
RESET ROLE;
SELECT is(ql_test.error_of($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), NULL)$$),
          'QL001 task', 'the task is required');
SELECT is(ql_test.error_of($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), 'acme/build', p_limit => 0)$$),
          'QL006 limit', 'list_runs'' bounds name their field');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.list_runs()$$, '42501', NULL, 'the producer role cannot call ql.list_runs itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
