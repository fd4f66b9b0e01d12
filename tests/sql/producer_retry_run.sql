-- ql.producer_retry_run (SPEC §13.4): ql.retry_run on the token's project's
-- run, answering the show document; another project's run is not found;
-- illegal transitions as retry_run; scope; roles.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SELECT r[1] AS run, r[2] AS queued FROM ql_test.enqueue(:'task', 2) r \gset
SELECT (ql_test.enqueue(:'other_task'))[1] AS other_run \gset
SELECT ql.cancel_run(:'run') IS NOT NULL AS c \gset
SELECT ql.cancel_run(:'other_run') IS NOT NULL AS c \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'tttttttttttttttt', sha256('tok-t'), ARRAY['retry']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'cccccccccccccccc', sha256('tok-c'), ARRAY['cancel']) IS NOT NULL AS c \gset
RESET ROLE;

SET LOCAL ROLE ql_producer;
SELECT ql.producer_retry_run('tttttttttttttttt', sha256('tok-t'), :'run') AS shown \gset
RESET ROLE;
SELECT is((:'shown'::jsonb -> 'run' ->> 'state') || '/' || (:'shown'::jsonb -> 'run' ->> 'attempts'), 'queued/2',
          'the answer shows the run queued with attempt 2');
SELECT is(:'shown'::jsonb, ql.show_run(:'run'), 'the answer is the show document after the action');
SELECT ql_test.mark();
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_retry_run('tttttttttttttttt', sha256('tok-t'), %L)$$, :'other_run'),
                 'QL004', NULL, 'another project''s run: not found');
SELECT throws_ok(format($$SELECT ql.producer_retry_run('tttttttttttttttt', sha256('tok-t'), %L)$$, :'queued'),
                 'QL020', NULL, 'a queued run: illegal_transition');
SELECT throws_ok(format($$SELECT ql.producer_retry_run('cccccccccccccccc', sha256('tok-c'), %L)$$, :'run'),
                 'QL031', NULL, 'a token without retry: scope_missing');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals wrote nothing');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.retry_run(%L)$$, :'other_run'), '42501', NULL,
                 'the producer role cannot call ql.retry_run itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
