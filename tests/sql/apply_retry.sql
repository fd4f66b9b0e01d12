-- ql_private.apply_retry: bounded attempts, full-jitter exponential backoff
-- (min(cap, base * 2^(n-1)) * random()), cancel wins over retry, preconditions
-- guarded with QL020. Called directly (it is a helper of the lease functions).
BEGIN;
SELECT plan(16);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET max_attempts = 6, retry_base_ms = 1000, retry_cap_ms = 5000
 WHERE id = :'task'::uuid;
SELECT ql_test.enqueue(:'task', 40) AS runs \gset

-- fail the current attempt of a run and apply the policy; returns the outcome
CREATE FUNCTION pg_temp.fail_and_retry(run uuid) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    att uuid;
BEGIN
    SELECT current_attempt_id INTO att FROM ql_private.runs WHERE id = run;
    UPDATE ql_private.attempts SET state = 'failed', finished_at = clock_timestamp() WHERE id = att;
    RETURN ql_private.apply_retry(run, att, 'test_failure');
END
$$;

-- 1. precondition guard
SELECT (:'runs'::text[])[1]::uuid AS first_run \gset
SELECT ql_test.mark();
SELECT throws_ok(format('SELECT ql_private.apply_retry(%L, (SELECT current_attempt_id FROM ql_private.runs WHERE id = %L), %L)',
                        :'first_run', :'first_run', 'x'),
                 'QL020', NULL, 'a live (claimed) attempt cannot be retried');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'nothing written');

-- 2. five failures per run: attempts 2..6 scheduled, the sixth failure fails the run
CREATE FUNCTION pg_temp.fail_all(runs uuid[], times integer) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    outcomes text[] := '{}';
BEGIN
    FOR n IN 1 .. times LOOP
        FOR i IN 1 .. cardinality(runs) LOOP
            outcomes := outcomes || pg_temp.fail_and_retry(runs[i]);
        END LOOP;
    END LOOP;
    RETURN outcomes;
END
$$;
SELECT is((SELECT array_agg(DISTINCT o) FROM unnest(pg_temp.fail_all(:'runs'::uuid[], 5)) o),
          ARRAY['retried'], 'failures 1..5 schedule retries');
SELECT is((SELECT count(*) FROM ql_private.attempts WHERE run_id = ANY (:'runs'::uuid[])), 240::bigint,
          'six attempts per run');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE id = ANY (:'runs'::uuid[]) AND state = 'queued'), 40::bigint,
          'every run is queued');
SELECT is((SELECT count(*) FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
            WHERE r.id = ANY (:'runs'::uuid[]) AND a.attempt_no = 6 AND a.state = 'claimed'), 40::bigint,
          'current attempt = attempt 6, claimed');
-- backoff bounds per failed attempt n: [0, min(5000, 1000 * 2^(n-1)))
SELECT is((SELECT count(*) FROM ql_private.events e
            WHERE e.type = 'run.retry_scheduled' AND e.run_id = ANY (:'runs'::uuid[])
              AND NOT ((e.payload ->> 'delayMs')::bigint >= 0
                       AND (e.payload ->> 'delayMs')::bigint
                           < least(5000, 1000 * power(2, (e.payload ->> 'attemptNo')::int - 2)))),
          0::bigint, 'every delay within [0, min(cap, base * 2^(n-1)))');
SELECT ok((SELECT max((e.payload ->> 'delayMs')::bigint) FROM ql_private.events e
            WHERE e.type = 'run.retry_scheduled' AND (e.payload ->> 'attemptNo')::int = 6) > 2000,
          'later attempts reach beyond the first backoff step (exponential)');
SELECT ok((SELECT count(DISTINCT e.payload ->> 'delayMs') FROM ql_private.events e
            WHERE e.type = 'run.retry_scheduled') > 100, 'delays are jittered');
SELECT is((SELECT count(*) FROM ql_private.attempts a JOIN ql_private.events e
              ON e.attempt_id = a.id AND e.type = 'run.retry_scheduled'
            WHERE a.run_id = ANY (:'runs'::uuid[])
              AND abs(extract(epoch FROM a.not_before - a.created_at) * 1000
                      - (e.payload ->> 'delayMs')::bigint) > 1), 0::bigint,
          'not_before = scheduling time + delayMs');

-- 3. attempts exhausted
SELECT is(pg_temp.fail_and_retry(:'first_run'), 'failed', 'the sixth failure fails the run');
SELECT is((SELECT array_agg(type ORDER BY id) FROM ql_private.events
            WHERE run_id = :'first_run'::uuid AND type IN ('run.failed', 'run.retry_scheduled')),
          ARRAY['run.retry_scheduled', 'run.retry_scheduled', 'run.retry_scheduled',
                'run.retry_scheduled', 'run.retry_scheduled', 'run.failed'],
          'five retries, then one run.failed');

-- 4. cancel requested wins over retry
SELECT (:'runs'::text[])[2]::uuid AS second_run \gset
UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'second_run';
SELECT is(pg_temp.fail_and_retry(:'second_run'), 'cancelled', 'cancel requested -> cancelled');
SELECT results_eq(format($$SELECT state, finished_at IS NOT NULL FROM ql_private.runs WHERE id = %L$$, :'second_run'),
                  $$VALUES ('cancelled'::text, true)$$, 'run cancelled and finished, no new attempt');

-- SPEC §9.2: a retry in backoff is a scheduled run (due_at = not_before, out
-- of the candidate keyset); with no delay it is ready at once.
SELECT ql_test.enqueue(:'task', 2) AS fresh \gset
UPDATE ql_private.tasks SET retry_base_ms = 1000 WHERE id = :'task'::uuid;
-- The policy is pinned on each attempt when it is created (SPEC 9.1): the
-- attempts already queued get it too (fixture shortcut).
UPDATE ql_private.attempts a SET retry_base_ms = 1000
  FROM ql_private.runs r WHERE r.id = a.run_id AND r.task_id = :'task'::uuid;
SELECT (:'fresh'::text[])[1]::uuid AS last_run \gset
SELECT pg_temp.fail_and_retry(:'last_run') AS outcome \gset
SELECT results_eq(
    format($$SELECT r.state, r.due_at = a.not_before, a.not_before > clock_timestamp() - interval '1 second'
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'last_run'),
    $$VALUES ('queued'::text, true, true)$$, 'retried in backoff: run queued, due_at = the new attempt''s not_before');
UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = :'task'::uuid;
-- The policy is pinned on each attempt when it is created (SPEC 9.1): the
-- attempts already queued get it too (fixture shortcut).
UPDATE ql_private.attempts a SET retry_base_ms = 0
  FROM ql_private.runs r WHERE r.id = a.run_id AND r.task_id = :'task'::uuid;
SELECT (:'fresh'::text[])[2]::uuid AS run39 \gset
SELECT pg_temp.fail_and_retry(:'run39') AS outcome39 \gset
SELECT is((SELECT due_at FROM ql_private.runs WHERE id = :'run39'::uuid), NULL::timestamptz,
          'no delay: ready at once (due_at NULL)');

SELECT * FROM finish();
ROLLBACK;
