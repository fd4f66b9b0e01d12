-- ql.producer_enqueue (SPEC §13.4): a token's project only, its scope, revoked
-- and expired tokens refused per call, bad input writes nothing; roles.
BEGIN;
SELECT plan(15);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS task \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS other_task \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa', sha256('tok-a'), ARRAY['enqueue']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'rrrrrrrrrrrrrrrr', sha256('tok-r'), ARRAY['read']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'eeeeeeeeeeeeeeee', sha256('tok-e'), ARRAY['enqueue'], 60) IS NOT NULL AS c \gset
RESET ROLE;
UPDATE ql_private.project_tokens SET created_at = created_at - interval '1 hour',
       expires_at = clock_timestamp() - interval '1 second' WHERE id = 'eeeeeeeeeeeeeeee';

SET LOCAL ROLE ql_producer;
SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/build', 5, 2) AS e1 \gset
SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), :'task', p_key => 'k1') AS e2 \gset
SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), :'task', p_key => 'k1') AS e3 \gset
RESET ROLE;
SELECT is(jsonb_array_length(:'e1'::jsonb -> 'runIds'), 2, 'by "<project>/<name>": two runs');
SELECT is((SELECT array_agg(DISTINCT (r.task_id::text, r.priority)::text) FROM ql_private.runs r
            WHERE r.id IN (SELECT jsonb_array_elements_text(:'e1'::jsonb -> 'runIds')::uuid)),
          ARRAY[format('(%s,5)', :'task')], 'of the task, with the priority');
SELECT is(:'e3'::jsonb, jsonb_set(:'e2'::jsonb, '{existing}', 'true'), 'by id with a key: idempotent');
SELECT ql_test.mark();

SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), %L)$$, :'other_task'),
                 'QL004', NULL, 'another project''s task by id: not found');
SELECT throws_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'other/build')$$,
                 'QL004', NULL, 'another project''s task by name: not found');
SELECT throws_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-x'), 'acme/build')$$,
                 'QL030', NULL, 'a wrong digest is token_invalid');
SELECT throws_ok($$SELECT ql.producer_enqueue('zzzzzzzzzzzzzzzz', sha256('tok-a'), 'acme/build')$$,
                 'QL030', NULL, 'an unknown token id is token_invalid');
SELECT throws_ok($$SELECT ql.producer_enqueue('eeeeeeeeeeeeeeee', sha256('tok-e'), 'acme/build')$$,
                 'QL030', NULL, 'an expired token is token_invalid');
SELECT throws_ok($$SELECT ql.producer_enqueue('rrrrrrrrrrrrrrrr', sha256('tok-r'), 'acme/build')$$,
                 'QL031', NULL, 'a token without enqueue is scope_missing');
SELECT throws_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/build', 0, 0)$$,
                 'QL001', NULL, 'count 0 is invalid');
RESET ROLE;
SELECT is(ql_test.error_of($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'not a task')$$),
          'QL001 task', 'a malformed task names task');
SELECT is(ql_test.error_of($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/build', p_delay_ms => -1)$$),
          'QL006 delayMs', 'enqueue_runs'' bounds name their field');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals wrote nothing');
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/build')$$,
                 '42501', NULL, 'ql_runtime cannot call the producer API');
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format($$SELECT ql.enqueue_runs(%L, 0, 1)$$, :'task'), '42501', NULL,
                 'the producer role cannot call ql.enqueue_runs itself');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
