-- ql.enqueue_runs as ql_runtime: runs pinned to the current revision with their
-- first claimed attempt and one run.queued event each; caps and refusals.
BEGIN;
SELECT plan(50);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'build') AS p1 \gset
SELECT :'p1'::jsonb ->> 'taskId' AS task \gset

SET LOCAL ROLE ql_runtime;
SELECT ql.enqueue_runs(:'task', 7, 3) AS e \gset
RESET ROLE;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'e'::jsonb) k), ARRAY['existing', 'runIds'], 'returns {runIds, existing}');
SELECT is(:'e'::jsonb -> 'existing', 'false'::jsonb, 'existing: false for new runs');
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

-- SPEC §9.2 scheduled enqueue: a future time keeps the runs out of the
-- candidate keyset (due_at, not_before = that time); a past one is ready now.
SELECT ql_test.publish('proj', 'sched') ->> 'taskId' AS sched \gset
SELECT ql_private.epoch_ms(clock_timestamp()) AS now_ms \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.enqueue_runs(:'sched', 0, 2, p_delay_ms => 3600000) -> 'runIds' ->> 0 AS delayed \gset
SELECT ql.enqueue_runs(:'sched', 0, 1, p_not_before_ms => :now_ms + 600000)
       -> 'runIds' ->> 0 AS at_time \gset
SELECT ql.enqueue_runs(:'sched', 0, 1, p_not_before_ms => 1000) -> 'runIds' ->> 0 AS past \gset
SELECT ql.enqueue_runs(:'sched', 0, 1, p_delay_ms => 0) -> 'runIds' ->> 0 AS no_delay \gset
RESET ROLE;
SELECT results_eq(
    format($$SELECT r.due_at IS NOT NULL, r.due_at = a.not_before,
                    r.due_at BETWEEN clock_timestamp() + interval '59 minutes' AND clock_timestamp() + interval '1 hour'
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'delayed'),
    $$VALUES (true, true, true)$$, 'delayMs: due_at = attempt not_before = now + delay');
SELECT ok((SELECT abs(extract(epoch FROM r.due_at - clock_timestamp()) - 600) < 5
             FROM ql_private.runs r WHERE r.id = :'at_time'::uuid), 'notBeforeMs: due at that time');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE id IN (:'past'::uuid, :'no_delay'::uuid) AND due_at IS NULL),
          2::bigint, 'a not-before in the past, or delay 0, is ready now (due_at NULL)');
SELECT is((SELECT payload ->> 'dueAtMs' FROM ql_private.events WHERE run_id = :'delayed'::uuid AND type = 'run.queued'),
          (SELECT ql_private.epoch_ms(due_at)::text FROM ql_private.runs WHERE id = :'delayed'::uuid),
          'run.queued carries dueAtMs when scheduled');
SELECT is((SELECT array_agg(id::text ORDER BY queue_seq) FROM ql_private.runs
            WHERE task_id = :'sched'::uuid AND due_at IS NULL),
          ARRAY[:'past', :'no_delay'], 'only the two ready runs are in the candidate keyset (due_at NULL)');

-- Idempotency key: the same key returns the same run, writes nothing.
SET LOCAL ROLE ql_runtime;
SELECT ql.enqueue_runs(:'sched', 5, 1, p_key => 'nightly-2024-05-01') AS k1 \gset
RESET ROLE;
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT ql.enqueue_runs(:'sched', 9, 1, p_delay_ms => 5000, p_key => 'nightly-2024-05-01') AS k2 \gset
RESET ROLE;
SELECT is(:'k1'::jsonb -> 'existing', 'false'::jsonb, 'a new key queues a run (existing false)');
SELECT is(:'k2'::jsonb, jsonb_build_object('runIds', :'k1'::jsonb -> 'runIds', 'existing', true),
          'the same key returns the same run (existing true), whatever the other arguments');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and writes nothing (no run, no event)');
SELECT is((SELECT idempotency_key FROM ql_private.runs WHERE id = (:'k1'::jsonb -> 'runIds' ->> 0)::uuid),
          'nightly-2024-05-01', 'the key is stored with the run');
SET LOCAL ROLE ql_runtime;
SELECT isnt(ql.enqueue_runs(ql_test.publish('proj', 'keyed') ->> 'taskId', 0, 1,
                            p_key => 'nightly-2024-05-01') -> 'runIds',
            :'k1'::jsonb -> 'runIds', 'keys are per task: another task''s same key is a new run');
SELECT is(ql.enqueue_runs(:'sched', 0, 1, p_key => repeat('k', 128)) -> 'existing', 'false'::jsonb,
          'a 128-character key is accepted');

-- Bounds and malformed arguments: QL006 / QL001 with the wire field.
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 2, p_key => %L)', :'sched', 'k')),
          'QL001 key', 'a key with count 2 -> QL001 key');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_key => %L)', :'sched', '')),
          'QL001 key', 'an empty key -> QL001 key');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_key => %L)', :'sched', repeat('k', 129))),
          'QL001 key', 'a 129-character key -> QL001 key');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_key => %L)', :'sched', E'a\nb')),
          'QL001 key', 'a key with a control character -> QL001 key');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_delay_ms => -1)', :'sched')),
          'QL006 delayMs', 'delay -1 -> QL006 delayMs');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_delay_ms => 31536000001)', :'sched')),
          'QL006 delayMs', 'delay above a year -> QL006 delayMs');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_not_before_ms => -1)', :'sched')),
          'QL006 notBeforeMs', 'notBeforeMs -1 -> QL006 notBeforeMs');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_not_before_ms => %s)', :'sched',
                                  :now_ms + 31536000000 + 60000)),
          'QL006 notBeforeMs', 'notBeforeMs beyond now + 1 year -> QL006 notBeforeMs');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 1, p_not_before_ms => 1, p_delay_ms => 1)', :'sched')),
          'QL001 delayMs', 'both delay and not-before -> QL001');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 0, 0)', :'sched')), 'QL001 count',
          'count 0 -> QL001 count');
SELECT is(ql_test.error_of(format('SELECT ql.enqueue_runs(%L, 99999, 1)', :'sched')), 'QL001 priority',
          'priority out of range -> QL001 priority');
SELECT is(ql_test.error_of('SELECT ql.enqueue_runs(''x'', 0, 1)'), 'QL001 taskId',
          'malformed task -> QL001 taskId');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'sched'::uuid), 7::bigint,
          'refusals wrote no run');

-- Roles
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 1)', :'sched'), '42501', NULL, 'ql_readonly cannot enqueue');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.enqueue_runs(%L, 0, 1)', :'sched'), '42501', NULL, 'the ingress cannot enqueue');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
