-- ql.queue_depth (SPEC §10): ready runs per priority (highest first, oldest
-- age) and queued / dispatching runs per task (deepest first), every count
-- capped at 1000; scheduled and cancel-requested runs are not ready; scheduled
-- runs apart (total, soonest due, by priority; per task ready vs scheduled,
-- each a range of runs_task_queued_due);
-- ql_readonly reads, the ingress cannot; no writes.
BEGIN;
SELECT plan(12);
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
SELECT ql.create_pool('proj', 'gpu') IS NOT NULL AS pooled \gset
SELECT ql.publish_revision('proj', 'later', ql_test.command(), 'proj/gpu') ->> 'taskId' AS later \gset
SELECT ql.enqueue_runs(:'later', 3, 3, p_delay_ms => 7200000) IS NOT NULL AS scheduled \gset
SELECT ql_private.epoch_ms(due_at) AS s_2_due FROM ql_private.runs WHERE id = :'s_2'::uuid \gset
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
          '[{"project": "proj", "task": "big", "pool": "proj/default", "queued": 1000,
             "ready": 1000, "readyCapped": true, "scheduled": 0, "scheduledCapped": false,
             "dispatching": 0, "capped": true},
            {"project": "proj", "task": "later", "pool": "proj/gpu", "queued": 3,
             "ready": 0, "readyCapped": false, "scheduled": 3, "scheduledCapped": false,
             "dispatching": 0, "capped": false},
            {"project": "proj", "task": "small", "pool": "proj/default", "queued": 2,
             "ready": 1, "readyCapped": false, "scheduled": 1, "scheduledCapped": false,
             "dispatching": 1, "capped": false}]'::jsonb,
          'per task, deepest first, queued split into ready and scheduled, with its pool; the task without runs is left out');
SELECT is(:'d'::jsonb -> 'tasksWithRuns', '3'::jsonb, 'three tasks have runs');
SELECT is(jsonb_build_array(:'d'::jsonb -> 'tasksExamined', :'d'::jsonb -> 'tasksCapped'),
          '[4, false]'::jsonb, 'every task examined (fewer than the 1000 cap)');
SELECT is((:'d'::jsonb -> 'scheduled') - 'nextDueAtMs',
          '{"runs": 4, "capped": false, "byPriority": [{"priority": 5, "runs": 1}, {"priority": 3, "runs": 3}]}'::jsonb,
          'scheduled runs apart from the ready ones: total and by priority');
SELECT is((:'d'::jsonb #>> '{scheduled,nextDueAtMs}')::bigint, :s_2_due::bigint,
          'scheduled: the soonest due time');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.queue_depth() -> 'cap', '1000'::jsonb, 'ql_runtime reads it too');
RESET ROLE;
-- More than the cap scheduled: the count stops at 1000 and says so.
SELECT ql.enqueue_runs(:'later', 0, 1000, p_delay_ms => 7200000) IS NOT NULL AS more \gset
SELECT is(jsonb_build_array(ql.queue_depth() #> '{scheduled,runs}', ql.queue_depth() #> '{scheduled,capped}'),
          '[1000, true]'::jsonb, 'scheduled capped at 1000');
-- A task's ready count is a range of runs_task_queued_due (not a walk of its
-- scheduled runs).
CREATE FUNCTION pg_temp.plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN ' || q LOOP
        plan := plan || line || E'\n';
    END LOOP;
    RETURN plan;
END
$$;
ANALYZE ql_private.runs;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT ok(pg_temp.plan(format(
              $$SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = %L AND r.state = 'queued' AND r.due_at IS NULL
                                       ORDER BY r.task_id, r.due_at LIMIT 1001) y$$, :'later'))
          ~ 'Index (Only )?Scan using runs_task_queued_due',
          'a task''s ready count reads a range of runs_task_queued_due');
RESET enable_seqscan;
RESET enable_bitmapscan;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.queue_depth()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
