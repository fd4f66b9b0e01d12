-- ql.enqueue_runs as ql_runtime: runs pinned to the current revision with their
-- first claimed attempt and one run.queued event each; caps and refusals.
BEGIN;
SELECT plan(23);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'build') AS p1 \gset
SELECT :'p1'::jsonb ->> 'taskId' AS task \gset

SET LOCAL ROLE ql_runtime;
SELECT ql.enqueue_runs(:'task', 7, 3) AS e \gset
RESET ROLE;
SELECT is((SELECT array_agg(k) FROM jsonb_object_keys(:'e'::jsonb) k), ARRAY['runIds'], 'returns {runIds}');
SELECT is(jsonb_array_length(:'e'::jsonb -> 'runIds'), 3, 'three run ids');
SELECT is((SELECT array_agg(r.id::text ORDER BY r.queue_seq) FROM ql_private.runs r),
          (SELECT array_agg(x) FROM jsonb_array_elements_text(:'e'::jsonb -> 'runIds') x),
          'runIds are in queue order');
SELECT is((SELECT count(*) FROM ql_private.runs
            WHERE state = 'queued' AND priority = 7 AND runtime_owned AND NOT cancel_requested
              AND execution_revision_id = (:'p1'::jsonb ->> 'revisionId')::uuid
              AND task_id = :'task'::uuid AND finished_at IS NULL), 3::bigint,
          'queued, priority 7, runtime-owned, pinned to the current revision');
SELECT is((SELECT count(*) FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
            WHERE a.run_id = r.id AND a.attempt_no = 1 AND a.executor = 'remote_worker'
              AND a.state = 'claimed' AND a.not_before <= clock_timestamp()), 3::bigint,
          'each run''s current attempt is attempt 1, claimed, remote_worker, not_before passed');
SELECT is((SELECT count(*) FROM ql_private.attempts), 3::bigint, 'exactly one attempt per run');
SELECT is((SELECT count(*) FROM ql_private.events e JOIN ql_private.runs r ON r.id = e.run_id
            WHERE e.type = 'run.queued' AND e.attempt_id = r.current_attempt_id), 3::bigint,
          'one run.queued event per run, naming its attempt');
SELECT is((SELECT count(*) FROM ql_private.events), 3::bigint, 'and no other event');
SELECT is((SELECT count(*) FROM ql_private.runs
            WHERE (state, priority, queue_seq, id) IN (
                  SELECT state, priority, queue_seq, id FROM ql_private.runs
                   WHERE state IN ('queued', 'dispatching') AND runtime_owned AND NOT cancel_requested)),
          3::bigint, 'all inside the candidate index predicate');

-- Newer revision: new runs pin it, old runs keep theirs.
SELECT ql_test.publish('proj', 'build', ql_test.command('["echo","v2"]')) AS p2 \gset
SELECT ql_test.enqueue(:'task', 1) AS later \gset
SELECT is((SELECT execution_revision_id FROM ql_private.runs WHERE id = (:'later'::text[])[1]::uuid),
          (:'p2'::jsonb ->> 'revisionId')::uuid, 'a run enqueued after a publish pins the new revision');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE execution_revision_id = (:'p1'::jsonb ->> 'revisionId')::uuid),
          3::bigint, 'earlier runs stay pinned to revision 1');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 10001)', :'task'), 'QL002', NULL, 'count above 10000 -> QL002');
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 0)', :'task'), 'QL001', NULL, 'count 0 -> QL001');
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, NULL)', :'task'), 'QL001', NULL, 'count NULL -> QL001');
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 32768, 1)', :'task'), 'QL001', NULL, 'priority above smallint -> QL001');
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, -32769, 1)', :'task'), 'QL001', NULL, 'priority below smallint -> QL001');
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 1)', gen_random_uuid()), 'QL004', NULL, 'unknown task -> QL004');
SELECT throws_ok($$SELECT ql.enqueue_runs('not-a-uuid', 0, 1)$$, 'QL001', NULL, 'malformed task id -> QL001');
RESET ROLE;
UPDATE ql_private.tasks SET enabled = false WHERE id = :'task'::uuid;
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 1)', :'task'), 'QL001', NULL, 'disabled task -> QL001');
SELECT lives_ok(format('SELECT ql.enqueue_runs(%L, -32768, 1)', (ql_test.publish('proj', 'other') ->> 'taskId')),
                'priority -32768 (smallint minimum) is accepted');
SELECT is(jsonb_array_length(ql.enqueue_runs(ql_test.publish('proj', 'bulk') ->> 'taskId', 32767, 10000) -> 'runIds'),
          10000, 'count 10000 (the cap) is accepted');
RESET ROLE;
INSERT INTO ql_private.tasks (project_id, name)
SELECT id, 'unpublished' FROM ql_private.projects WHERE name = 'proj'
RETURNING id AS unpublished \gset
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 1)', :'unpublished'), 'QL001', NULL,
                 'task without a published revision -> QL001');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'task'::uuid), 4::bigint,
          'refused enqueues wrote no run');

SELECT * FROM finish();
ROLLBACK;
