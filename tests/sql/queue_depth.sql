-- ql.queue_depth (SPEC §10): ready runs per priority (highest first, oldest
-- age) and queued / dispatching runs per task (deepest first), every count
-- capped at 1000; scheduled and cancel-requested runs are not ready;
-- ql_readonly reads, the ingress cannot; no writes.
BEGIN;
SELECT plan(8);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'small') ->> 'taskId' AS small \gset
SELECT ql_test.publish('proj', 'big') ->> 'taskId' AS big \gset
SELECT ql_test.publish('proj', 'idle') ->> 'taskId' AS idle \gset
SELECT r[1] AS s_1, r[2] AS s_2 FROM ql_test.enqueue(:'small', 3, 5) r \gset
SELECT r[1] AS b_1 FROM ql_test.enqueue(:'big', 1002, 0) r \gset
SELECT ql_test.fake_lease(:'s_1', :'s1', false) IS NOT NULL AS leased \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour' WHERE id = :'s_2'::uuid;
-- b_1 is a retry: created an hour ago, ready again (its current attempt's
-- not_before) a minute ago: it has waited a minute, not an hour.
UPDATE ql_private.runs SET created_at = created_at - interval '1 hour' WHERE id = :'b_1'::uuid;
UPDATE ql_private.attempts SET not_before = not_before - interval '1 minute'
 WHERE id = (SELECT current_attempt_id FROM ql_private.runs WHERE id = :'b_1'::uuid);

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.queue_depth() AS d \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is((SELECT jsonb_agg(e - 'oldestWaitingAgeMs') FROM jsonb_array_elements(:'d'::jsonb -> 'byPriority') e),
          '[{"priority": 5, "runs": 1, "capped": false}, {"priority": 0, "runs": 1000, "capped": true}]'::jsonb,
          'ready runs per priority, highest first: offered and scheduled runs are not ready; capped at 1000');
SELECT ok((:'d'::jsonb #>> '{byPriority,1,oldestWaitingAgeMs}')::bigint BETWEEN 60000 AND 600000,
          'the oldest ready run of priority 0 has waited a minute (since its retry''s not_before, not its creation an hour ago)');
SELECT is((SELECT jsonb_agg(e - 'taskId') FROM jsonb_array_elements(:'d'::jsonb -> 'byTask') e),
          '[{"project": "proj", "task": "big", "queued": 1000, "dispatching": 0, "capped": true},
            {"project": "proj", "task": "small", "queued": 2, "dispatching": 1, "capped": false}]'::jsonb,
          'per task, deepest first; the task without runs is left out');
SELECT is(:'d'::jsonb -> 'tasksWithRuns', '2'::jsonb, 'two tasks have runs');
SELECT is(jsonb_build_array(:'d'::jsonb -> 'tasksExamined', :'d'::jsonb -> 'tasksCapped'),
          '[3, false]'::jsonb, 'every task examined (fewer than the 1000 cap)');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.queue_depth() -> 'cap', '1000'::jsonb, 'ql_runtime reads it too');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.queue_depth()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
