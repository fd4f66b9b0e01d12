-- ql.retry_run (SPEC §9.5): failed and cancelled runs get a new claimed
-- attempt and are queued at once (candidate again), one run.retried event with
-- the actor; anything else is QL020 with nothing changed; roles.
BEGIN;
SELECT plan(19);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS failed, r[2] AS cancelled, r[3] AS queued, r[4] AS succeeded
  FROM ql_test.enqueue(:'task', 4) r \gset
UPDATE ql_private.attempts a SET state = 'failed', finished_at = clock_timestamp()
  FROM ql_private.runs r WHERE r.id = :'failed'::uuid AND a.id = r.current_attempt_id;
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp() WHERE id = :'failed'::uuid;
SELECT ql.cancel_run(:'cancelled') IS NOT NULL AS c \gset
UPDATE ql_private.runs SET state = 'succeeded', finished_at = clock_timestamp() WHERE id = :'succeeded'::uuid;

SET LOCAL ROLE ql_runtime;
SELECT ql.retry_run(:'failed') AS rf \gset
SELECT ql.retry_run(:'cancelled') AS rc \gset
RESET ROLE;
SELECT is(:'rf'::jsonb - 'attemptId', jsonb_build_object('runId', :'failed', 'attemptNo', 2, 'state', 'queued'),
          'failed run -> queued with attempt 2');
SELECT results_eq(
    format($$SELECT r.state, r.current_attempt_id::text, r.finished_at IS NULL, r.due_at IS NULL, a.attempt_no, a.state,
                    a.not_before <= clock_timestamp()
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id WHERE r.id = %L$$, :'failed'),
    format($$VALUES ('queued'::text, %L::text, true, true, 2, 'claimed'::text, true)$$, :'rf'::jsonb ->> 'attemptId'),
    'run queued, current attempt = the new claimed one, ready now');
SELECT is(:'rc'::jsonb ->> 'state', 'queued', 'cancelled run -> queued');
SELECT is((SELECT cancel_requested FROM ql_private.runs WHERE id = :'cancelled'::uuid), false,
          'its cancel request is reset');
SELECT is((SELECT count(*) FROM ql_private.candidate_page(NULL, NULL, NULL, 10) c
            WHERE c.run_id IN (:'failed'::uuid, :'cancelled'::uuid)), 2::bigint,
          'both are candidates again');
SELECT is((SELECT payload - 'attemptId' - 'previousAttemptId' FROM ql_private.events
            WHERE run_id = :'failed'::uuid AND type = 'run.retried'),
          jsonb_build_object('attemptNo', 2, 'previousState', 'failed', 'actor', session_user),
          'one run.retried event naming the acting role');

-- Refusals: nothing changed.
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of(format('SELECT ql.retry_run(%L)', :'queued')), 'QL020 runId', 'a queued run -> QL020');
SELECT is(ql_test.error_of(format('SELECT ql.retry_run(%L)', :'succeeded')), 'QL020 runId', 'a succeeded run -> QL020');
SELECT is(ql_test.error_of(format('SELECT ql.retry_run(%L)', :'failed')), 'QL020 runId',
          'a run just retried (queued again) -> QL020');
SELECT throws_ok(format('SELECT ql.retry_run(%L)', :'queued'), 'QL020', NULL, 'illegal_transition');
SELECT is(ql_test.error_of(format('SELECT ql.retry_run(%L)', gen_random_uuid())), 'QL004 runId', 'unknown run -> QL004');
SELECT is(ql_test.error_of($$SELECT ql.retry_run('x')$$), 'QL001 runId', 'malformed -> QL001 runId');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals changed nothing');

-- A disabled task refuses new work (SPEC 9.1): its failed run is not retried
-- (QL022 task_disabled, COLUMN taskId), nothing written; enabled again, it is.
SELECT ql_test.publish('proj', 'off') ->> 'taskId' AS off_task \gset
SELECT r[1] AS off_run FROM ql_test.enqueue(:'off_task', 1) r \gset
UPDATE ql_private.attempts a SET state = 'failed', finished_at = clock_timestamp()
  FROM ql_private.runs r WHERE r.id = :'off_run'::uuid AND a.id = r.current_attempt_id;
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp() WHERE id = :'off_run'::uuid;
SELECT ql.configure_task(:'off_task', p_enabled => false) IS NOT NULL AS off \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.retry_run(%L)', :'off_run'), 'QL022',
                 'task_disabled: the run''s task is disabled (enable it to retry)',
                 'a run of a disabled task -> QL022 task_disabled');
SELECT is(ql_test.error_of(format('SELECT ql.retry_run(%L)', :'off_run')), 'QL022 taskId',
          'the error names taskId');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'the refusal changed nothing');
SELECT ql.configure_task(:'off_task', p_enabled => true) IS NOT NULL AS on_again \gset

-- Roles
SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.retry_run(%L)', :'succeeded'), '42501', NULL, 'ql_readonly cannot retry');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.retry_run(%L)', :'succeeded'), '42501', NULL, 'the ingress cannot retry');
RESET ROLE;
SELECT function_privs_are('ql', 'retry_run', ARRAY['text'], 'ql_runtime', ARRAY['EXECUTE'], 'runtime: EXECUTE');

SELECT * FROM finish();
ROLLBACK;
