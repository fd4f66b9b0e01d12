-- ql.cancel_runs (SPEC §9.5): a task's queued runs (scheduled ones included)
-- cancelled in bulk like ql.cancel_run, one run.cancelled event each with the
-- actor; other tasks and other states untouched; only `queued`; the wait bound
-- waitMs 0..60000; roles. Runs another transaction holds (waited for, bounded,
-- then cancelled or listed) need a second connection:
-- tests/py/test_admin_operations.py (test_run_cancel_bulk_waits_*).
BEGIN;
SELECT plan(16);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'a') ->> 'taskId' AS ta \gset
SELECT ql_test.publish('proj', 'b') ->> 'taskId' AS tb \gset
SELECT ql_test.enqueue(:'ta', 3) AS ra \gset
SELECT ql.enqueue_runs(:'ta', 0, 2, p_delay_ms => 600000) IS NOT NULL AS sched \gset
SELECT ql_test.enqueue(:'tb', 2) AS rb \gset
SELECT ql_test.fake_lease((:'ra'::text[])[1], :'s1', false) AS offer \gset

SET LOCAL ROLE ql_runtime;
SELECT is(ql.cancel_runs(:'ta', 'queued'), '{"cancelled": 4, "notCancelled": []}'::jsonb,
          'the task''s 4 queued runs (2 ready, 2 scheduled) cancelled');
RESET ROLE;
SELECT is((SELECT array_agg(DISTINCT r.state || '/' || a.state) FROM ql_private.runs r
             JOIN ql_private.attempts a ON a.id = r.current_attempt_id
            WHERE r.task_id = :'ta'::uuid AND r.id <> (:'ra'::text[])[1]::uuid),
          ARRAY['cancelled/cancelled'], 'runs and attempts cancelled');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'ta'::uuid AND finished_at IS NOT NULL
              AND cancel_requested), 4::bigint, 'finished, cancel_requested');
SELECT is((SELECT state FROM ql_private.runs WHERE id = (:'ra'::text[])[1]::uuid), 'dispatching',
          'a dispatching run (offer out) is not touched');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'tb'::uuid AND state = 'queued'), 2::bigint,
          'another task''s runs are not touched');
SELECT is((SELECT array_agg(DISTINCT payload - 'attemptId') FROM ql_private.events
            WHERE type = 'run.cancelled' AND run_id IN (SELECT id FROM ql_private.runs WHERE task_id = :'ta'::uuid)),
          ARRAY[jsonb_build_object('leaseReleased', false, 'actor', session_user, 'bulk', true)],
          'one run.cancelled event each, naming the actor');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type = 'run.cancelled'), 4::bigint, 'four events');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.cancel_runs(:'ta', 'queued', 0), '{"cancelled": 0, "notCancelled": []}'::jsonb,
          'again: nothing left to cancel');
SELECT is(ql_test.error_of(format('SELECT ql.cancel_runs(%L, %L)', :'tb', 'running')), 'QL001 state',
          'a state other than queued -> QL001 state');
SELECT is(ql_test.error_of(format('SELECT ql.cancel_runs(%L, %L)', gen_random_uuid(), 'queued')), 'QL004 taskId',
          'unknown task -> QL004 taskId');
SELECT is(ql_test.error_of(format('SELECT ql.cancel_runs(%L, %L, -1)', :'tb', 'queued')), 'QL006 waitMs',
          'waitMs < 0 -> QL006 waitMs');
SELECT is(ql_test.error_of(format('SELECT ql.cancel_runs(%L, %L, 60001)', :'tb', 'queued')), 'QL006 waitMs',
          'waitMs > 60000 -> QL006 waitMs');
SELECT is(ql_test.error_of(format('SELECT ql.cancel_runs(%L, %L, NULL)', :'tb', 'queued')), 'QL006 waitMs',
          'waitMs NULL -> QL006 waitMs');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'repeat and refusals changed nothing');
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.cancel_runs(%L, %L)', :'tb', 'queued'), '42501', NULL, 'ql_readonly cannot cancel');
RESET ROLE;
SELECT is((SELECT current_setting('lock_timeout')), '0',
          'its lock_timeout is its own: the caller''s setting is back');

SELECT * FROM finish();
ROLLBACK;
