-- ql.producer_show_run (SPEC §13.4): the show document of the token's
-- project's run; another project's run is not found; scope; roles.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SELECT (ql_test.enqueue(:'task'))[1] AS run \gset
SELECT (ql_test.enqueue(:'other_task'))[1] AS other_run \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'rrrrrrrrrrrrrrrr', sha256('tok-r'), ARRAY['read']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'cccccccccccccccc', sha256('tok-c'), ARRAY['cancel']) IS NOT NULL AS c \gset
RESET ROLE;

SET LOCAL ROLE ql_producer;
SELECT ql.producer_show_run('rrrrrrrrrrrrrrrr', sha256('tok-r'), :'run') AS shown \gset
RESET ROLE;
SELECT is(:'shown'::jsonb, ql.show_run(:'run'), 'the show document of ql.show_run');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_show_run('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, :'other_run'),
                 'QL004', NULL, 'another project''s run: not found');
SELECT throws_ok(format($$SELECT ql.producer_show_run('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, gen_random_uuid()),
                 'QL004', NULL, 'an unknown run: not found');
SELECT throws_ok(format($$SELECT ql.producer_show_run('cccccccccccccccc', sha256('tok-c'), %L)$$, :'run'),
                 'QL031', NULL, 'a token without read: scope_missing');
SELECT throws_ok(format($$SELECT ql.producer_show_run('rrrrrrrrrrrrrrrr', sha256('tok-c'), %L)$$, :'run'),
                 'QL030', NULL, 'a wrong digest: token_invalid');
RESET ROLE;
SELECT is(ql_test.error_of(format($$SELECT ql.producer_show_run('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, :'other_run')),
          'QL004 runId', 'the not-found names runId');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.show_run(%L)$$, :'run'), '42501', NULL,
                 'the producer role cannot call ql.show_run itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
