-- ql.show_run (SPEC §9.4): the run, its attempts (number order, worker/session
-- of the latest lease, result) and events (oldest first, payload fields + type,
-- atMs, attemptId), never a token or secret digest; unknown / malformed ids;
-- ql_readonly and ql_runtime read, the ingress cannot.
BEGIN;
SELECT plan(15);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = :'task'::uuid;
SELECT ql.enqueue_runs(:'task', 3, 1, p_key => 'k-1') -> 'runIds' ->> 0 AS run \gset
SELECT ql_test.claim('w1', :'s1', '00000000-0000-4000-8000-000000000001', 'tok1') IS NOT NULL AS c1 \gset
SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                    '00000000-0000-4000-8000-000000000001', ql_test.token_digest('tok1'), 1, 'starting') IS NOT NULL AS a1 \gset
SELECT ql.complete_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                         '00000000-0000-4000-8000-000000000001', ql_test.token_digest('tok1'), 2, 'failed', 3, NULL,
                         '{"exitCode": 3, "durationMs": 10, "outputTail": "boom", "outputBytes": 4}') IS NOT NULL AS f1 \gset

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.show_run(:'run') AS shown \gset
RESET ROLE;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'shown'::jsonb) k), ARRAY['attempts', 'events', 'run'],
          '{run, attempts, events}');
SELECT is((:'shown'::jsonb -> 'run') - 'queuedAtMs' - 'updatedAtMs' - 'notBeforeMs',
          jsonb_build_object('runId', :'run', 'taskId', :'task',
                             'projectId', (SELECT project_id FROM ql_private.tasks WHERE id = :'task'::uuid),
                             'project', 'proj', 'taskName', 'task', 'pool', 'proj/default',
                             'state', 'queued', 'priority', 3, 'attempts', 2, 'finishedAtMs', NULL,
                             'cancelRequested', false,
                             'executionRevisionId', (SELECT execution_revision_id FROM ql_private.runs WHERE id = :'run'::uuid),
                             'key', 'k-1'),
          'the run object (retried: attempt 2 current, queued again), with project, task name and pool');
SELECT is(jsonb_array_length(:'shown'::jsonb -> 'attempts'), 2, 'two attempts');
SELECT is((:'shown'::jsonb -> 'attempts' -> 0) - 'attemptId' - 'claimedAtMs' - 'startedAtMs' - 'finishedAtMs',
          jsonb_build_object('number', 1, 'state', 'failed', 'workerId', :'w1', 'sessionId', :'s1',
                             'exitCode', 3, 'reason', 'failed',
                             'result', '{"exitCode": 3, "durationMs": 10, "outputTail": "boom", "outputBytes": 4}'::jsonb),
          'attempt 1: worker and session of its lease, exit code, reason, result');
SELECT ok((:'shown'::jsonb #>> '{attempts,0,claimedAtMs}') IS NOT NULL
          AND (:'shown'::jsonb #>> '{attempts,0,startedAtMs}') IS NOT NULL
          AND (:'shown'::jsonb #>> '{attempts,0,finishedAtMs}') IS NOT NULL, 'attempt 1 timings');
SELECT is((:'shown'::jsonb -> 'attempts' -> 1) - 'attemptId',
          '{"number": 2, "state": "claimed", "workerId": null, "sessionId": null, "claimedAtMs": null, "startedAtMs": null, "finishedAtMs": null, "exitCode": null, "reason": null, "result": null}'::jsonb,
          'attempt 2: never claimed');
SELECT is((SELECT array_agg(e ->> 'type' ORDER BY o) FROM jsonb_array_elements(:'shown'::jsonb -> 'events') WITH ORDINALITY x(e, o)),
          ARRAY['run.queued', 'run.dispatched', 'run.starting', 'attempt.failed', 'run.retry_scheduled'],
          'events oldest first');
SELECT ok((SELECT bool_and(e ? 'atMs' AND e ? 'attemptId') FROM jsonb_array_elements(:'shown'::jsonb -> 'events') e),
          'each event has atMs and attemptId');
SELECT is(:'shown'::jsonb #>> '{events,1,offerId}', '00000000-0000-4000-8000-000000000001', 'payload fields are merged in');
SELECT ok(:'shown'::text !~* '"(leaseToken|token|tokenDigest|token_digest|secret|secretDigest|secret_digest)"',
          'no token, secret or their digest anywhere');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of(format('SELECT ql.show_run(%L)', gen_random_uuid())), 'QL004 runId', 'unknown run -> QL004 runId');
SELECT is(ql_test.error_of($$SELECT ql.show_run('nope')$$), 'QL001 runId', 'malformed -> QL001 runId');
RESET ROLE;
-- A run of a task published into another pool carries that pool (SPEC §13.1).
SELECT ql.create_pool('proj', 'gpu') IS NOT NULL AS pooled \gset
SELECT ql.publish_revision('proj', 'render', ql_test.command(), 'proj/gpu') ->> 'taskId' AS gpu_task \gset
SELECT ql_test.enqueue(:'gpu_task') AS gpu_run \gset
SET LOCAL ROLE ql_readonly;
SELECT is(ql.show_run((:'gpu_run'::text[])[1]) -> 'run' -> 'pool', '"proj/gpu"'::jsonb,
          'pool: the pool the run carries, P/N');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.show_run(%L)', :'run'), '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
