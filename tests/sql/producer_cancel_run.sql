-- ql.producer_cancel_run (SPEC §13.4): ql.cancel_run on the token's project's
-- run, answering the show document; another project's run is not found and
-- untouched; scope; roles.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SELECT (ql_test.enqueue(:'task'))[1] AS run \gset
SELECT (ql_test.enqueue(:'other_task'))[1] AS other_run \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'cccccccccccccccc', sha256('tok-c'), ARRAY['cancel']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'rrrrrrrrrrrrrrrr', sha256('tok-r'), ARRAY['read']) IS NOT NULL AS c \gset
RESET ROLE;

SET LOCAL ROLE ql_producer;
SELECT ql.producer_cancel_run('cccccccccccccccc', sha256('tok-c'), :'run') AS shown \gset
RESET ROLE;
SELECT is(:'shown'::jsonb -> 'run' ->> 'state', 'cancelled', 'the answer shows the run cancelled');
SELECT is(:'shown'::jsonb, ql.show_run(:'run'), 'the answer is the show document after the action');
SELECT is((SELECT payload ->> 'actor' FROM ql_private.events WHERE run_id = :'run'::uuid AND type = 'run.cancelled'),
          session_user::text, 'the event names the acting login');
SELECT ql_test.mark();
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_cancel_run('cccccccccccccccc', sha256('tok-c'), %L)$$, :'other_run'),
                 'QL004', NULL, 'another project''s run: not found');
SELECT throws_ok(format($$SELECT ql.producer_cancel_run('rrrrrrrrrrrrrrrr', sha256('tok-r'), %L)$$, :'run'),
                 'QL031', NULL, 'a token without cancel: scope_missing');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals wrote nothing');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.cancel_run(%L)$$, :'other_run'), '42501', NULL,
                 'the producer role cannot call ql.cancel_run itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
