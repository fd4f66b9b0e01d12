-- ql.producer_run_log (SPEC §13.4, §15.3): ql.run_log's page of the token's
-- project's run, scope log; another project's run is not found; roles.
BEGIN;
SELECT plan(10);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SELECT (ql_test.enqueue(:'task'))[1] AS run \gset
SELECT (ql_test.enqueue(:'other_task'))[1] AS other_run \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'llllllllllllllll', sha256('tok-l'), ARRAY['log']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'rrrrrrrrrrrrrrrr', sha256('tok-r'), ARRAY['read']) IS NOT NULL AS c \gset
RESET ROLE;

SET LOCAL ROLE ql_producer;
SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), :'run') AS page \gset
SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), :'run', 1, 0, 4) AS page1 \gset
RESET ROLE;
SELECT is(:'page'::jsonb, ql.run_log(:'run'::uuid), 'the page of ql.run_log (latest attempt)');
SELECT is(:'page1'::jsonb, ql.run_log(:'run'::uuid, 1, 0, 4),
          'attempt, offset and max bytes reach ql.run_log');
SELECT is((:'page'::jsonb) ->> 'attemptNumber', '1', 'the run''s attempt');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), %L)$$, :'other_run'),
                 'QL004', NULL, 'another project''s run: not found');
SELECT throws_ok(format($$SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), %L)$$, gen_random_uuid()),
                 'QL004', NULL, 'an unknown run: not found');
SELECT throws_ok(format($$SELECT ql.producer_run_log('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, :'run'),
                 'QL031', NULL, 'a token without the log scope (read only): scope_missing');
SELECT throws_ok(format($$SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-r'), %L)$$, :'run'),
                 'QL030', NULL, 'a wrong digest: token_invalid');
RESET ROLE;
SELECT is(ql_test.error_of(format($$SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), %L)$$, :'other_run')),
          'QL004 runId', 'the foreign run''s not-found names runId');
SELECT is(ql_test.error_of(format($$SELECT ql.producer_run_log('llllllllllllllll', sha256('tok-l'), %L, 2)$$, :'run')),
          'QL004 attempt', 'an unknown attempt of the run: ql.run_log''s not-found (attempt)');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.run_log(%L::uuid)$$, :'run'), '42501', NULL,
                 'the producer role cannot call ql.run_log itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
