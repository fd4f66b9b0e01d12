-- ql.producer_list_runs (SPEC §13.4): one task of the token's project; another
-- project's task is not found; the task is required; scope; roles.
BEGIN;
SELECT plan(10);
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
SELECT ql_test.publish('acme', 'deploy') ->> 'taskId' AS task2 \gset
SELECT ql_test.enqueue(:'task2', 2) AS runs2 \gset
SET LOCAL ROLE ql_producer;
SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), NULL, NULL, 3) AS p1 \gset
SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), NULL, NULL, 3, :'p1'::jsonb ->> 'next') AS p2 \gset
RESET ROLE;
SELECT is((SELECT jsonb_agg(x ORDER BY n) FROM (
              SELECT x, 1 AS n FROM jsonb_array_elements(:'p1'::jsonb -> 'runs') x
              UNION ALL SELECT x, 2 FROM jsonb_array_elements(:'p2'::jsonb -> 'runs') x) y),
          (SELECT jsonb_agg(x) FROM jsonb_array_elements(
               ql.list_runs(NULL, NULL, 100) -> 'runs') x WHERE x ->> 'project' = 'acme'),
          'without a task: every run of the project (list_runs'' fields and order), in pages');
SELECT is(:'p2'::jsonb -> 'next', 'null'::jsonb, 'the last page says so');
SELECT ok(NOT (:'p1'::text || :'p2'::text) LIKE '%' || :'other_task' || '%', 'never another project''s run');
SELECT is(ql_test.error_of($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), NULL, p_states => ARRAY['bogus'])$$),
          'QL001 state', 'without a task too, list_runs'' checks name their field');
SELECT is(ql_test.error_of($$SELECT ql.producer_list_runs('rrrrrrrrrrrrrrrr', sha256('tok-r'), 'acme/build', p_limit => 0)$$),
          'QL006 limit', 'list_runs'' bounds name their field');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.list_runs()$$, '42501', NULL, 'the producer role cannot call ql.list_runs itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
