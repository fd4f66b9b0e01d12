-- ql.complete_lease (SPEC §7): succeeded / failed (retry policy) / cancelled on
-- real claims at the lease version the worker last saw (a completion bumps it
-- too), exact replays after a lost answer (version - 1, the same completion and
-- result: no writes), an old version (stale_lease_version), conflicts, illegal
-- transitions (QL020, nothing changed), bad input; the retried run is claimed
-- again as attempt 2.
-- Called as ql_worker_ingress.
BEGIN;
SELECT plan(67);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(32)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(32)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT ql_test.publish('proj', 'once', ql_test.command('["once"]')) ->> 'taskId' AS once \gset
UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = :'task'::uuid;
UPDATE ql_private.tasks SET max_attempts = 1 WHERE id = :'once'::uuid;
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6, r[7] AS r7
  FROM ql_test.enqueue(:'task', 7, 0) r \gset
SELECT r[1] AS r8 FROM ql_test.enqueue(:'once', 1, -1) r \gset

-- done/ack at the lease's current version unless one is given (pg_temp.version
-- reads it as the test's owner: what a worker that got every answer holds).
CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT l.lease_version FROM ql_private.run_leases l
                      WHERE l.offer_id::text = offer), 1)
$$;
CREATE FUNCTION pg_temp.done(cred text, dig bytea, worker text, session text, gen bigint,
                             offer text, token text, outcome text, exit_code integer DEFAULT NULL,
                             reason text DEFAULT NULL, version bigint DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.complete_lease(cred, dig, worker, session, gen, offer, ql_test.token_digest(token),
                             coalesce(version, pg_temp.version(offer)), outcome, exit_code, reason)
$$;
CREATE FUNCTION pg_temp.ack(cred text, dig bytea, worker text, session text, gen bigint,
                            offer text, token text, phase text)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(cred, dig, worker, session, gen, offer, ql_test.token_digest(token),
                        pg_temp.version(offer), phase)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.done(text, bytea, text, text, bigint, text, text, text, integer, text, bigint),
                          pg_temp.ack(text, bytea, text, text, bigint, text, text, text),
                          pg_temp.version(text)
    TO ql_worker_ingress;
SELECT format('%L, %L::bytea, %L', :'c1', :'d1', :'w1') AS w1args \gset
SELECT format('%L, %L::bytea, %L', :'c2', :'d2', :'w2') AS w2args \gset
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer) TO ql_worker_ingress;
CREATE FUNCTION pg_temp.events(run text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(type ORDER BY id) FROM ql_private.events
     WHERE run_id = run::uuid AND type NOT IN ('run.queued', 'run.dispatched', 'run.starting', 'run.running')
$$;
CREATE FUNCTION pg_temp.first_attempt(run text) RETURNS ql_private.attempts LANGUAGE sql AS $$
    SELECT * FROM ql_private.attempts WHERE run_id = run::uuid AND attempt_no = 1
$$;

-- Offers 1..8 are runs r1..r8, all w1's; all but offer 7 started, 1 also running.
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 8) n;
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(n), 't' || n, 'starting')
  FROM generate_series(1, 8) n WHERE n <> 7;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running');
RESET ROLE;

-- 1. not started: QL020, nothing written
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(7), %L, %L, 0)', :'w1args', :'s1', 't7', 'succeeded'),
                 'QL020', NULL, 'completion before the starting ACK -> QL020');
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(4), %L, %L)', :'w1args', :'s1', 't4', 'cancelled'),
                 'QL020', NULL, 'outcome cancelled without a cancel request -> QL020');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'illegal completions wrote nothing');
SELECT is((pg_temp.first_attempt(:'r4')).state, 'starting', 'attempt 4 unchanged');

-- 2. succeeded
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'succeeded', 0) AS ok1 \gset
RESET ROLE;
SELECT is(:'ok1'::jsonb ->> 'status', 'ok', 'succeeded -> ok');
SELECT is(:'ok1'::jsonb #>> '{lease,state}', 'succeeded', 'lease@v1 state succeeded');
SELECT is(:'ok1'::jsonb #>> '{lease,leaseVersion}', '4', 'the completion bumps the version (3 -> 4)');
SELECT results_eq(
    format($$SELECT r.state, r.finished_at IS NOT NULL, a.state, a.exit_code, a.reason, a.finished_at IS NOT NULL,
                    l.release_reason
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
               JOIN ql_private.run_leases l ON l.attempt_id = a.id WHERE r.id = %L$$, :'r1'),
    $$VALUES ('succeeded'::text, true, 'succeeded'::text, 0, NULL::text, true, 'completed'::text)$$,
    'run + attempt succeeded (exit code 0), lease released completed');
SELECT is(pg_temp.events(:'r1'), ARRAY['run.succeeded'], 'exactly one run.succeeded event');
SELECT is(ql_test.writes_since_mark(), 4::bigint, 'lease, attempt, run, one event');

-- exact replay and different completions of a completed lease
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'succeeded', 0, NULL, 3) AS ok1r \gset
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'failed', 1, NULL, 3) ->> 'category', 'lease_terminal',
          'another outcome for a completed lease -> lease_terminal');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'succeeded', NULL, NULL, 3) ->> 'category', 'lease_terminal',
          'another exit code -> lease_terminal');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'succeeded', 0, NULL, 4) ->> 'category', 'lease_terminal',
          'the same completion at the released version (not the one it consumed) -> lease_terminal');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'succeeded', 0, NULL, 2) ->> 'category', 'lease_terminal',
          '... or at an older one -> lease_terminal');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running') ->> 'category', 'lease_terminal',
          'an ACK after completion -> lease_terminal');
RESET ROLE;
SELECT is(:'ok1r'::jsonb ->> 'status', 'idempotent', 'exact replay (version 3, consumed by it) -> idempotent');
SELECT is(:'ok1r'::jsonb -> 'lease', :'ok1'::jsonb -> 'lease', 'same projection');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'replay and conflicts wrote nothing');

-- 3. failed from starting: retry (retry_base_ms 0 -> claimable at once)
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'failed', 3) AS f2 \gset
RESET ROLE;
SELECT is(:'f2'::jsonb #>> '{lease,state}', 'failed', 'failed -> lease@v1 state failed');
SELECT results_eq(
    format($$SELECT state, exit_code, reason FROM ql_private.attempts WHERE run_id = %L ORDER BY attempt_no$$, :'r2'),
    $$VALUES ('failed'::text, 3, 'failed'::text), ('claimed'::text, NULL::integer, NULL::text)$$,
    'attempt 1 failed (exit 3, default reason failed); attempt 2 claimed');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r2'::uuid), 'queued', 'the run is queued again');
SELECT is(pg_temp.events(:'r2'), ARRAY['attempt.failed', 'run.retry_scheduled'], 'attempt.failed + run.retry_scheduled');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'failed', 3, NULL, 2) ->> 'status', 'idempotent',
          'failed replay -> idempotent (even though the run moved on)');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'failed', 3, 'oom', 2) ->> 'category', 'lease_terminal',
          'another reason -> lease_terminal');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'nothing written');
SELECT is((SELECT count(*) FROM ql_private.attempts WHERE run_id = :'r2'::uuid), 2::bigint,
          'still exactly one new attempt');
-- the retried run is a candidate again: a new claim leases attempt 2
SELECT ql_test.claim('w2', :'s2', pg_temp.offer(20), 't20') AS again \gset
SELECT is(:'again'::jsonb #>> '{candidate,runId}', :'r2', 'the retried run is claimed again');
SELECT is(:'again'::jsonb #>> '{candidate,attemptId}',
          (SELECT current_attempt_id::text FROM ql_private.runs WHERE id = :'r2'::uuid), 'as attempt 2');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'starting') ->> 'category', 'lease_terminal',
          'the old offer stays terminal');
RESET ROLE;

-- 4. failed with attempts exhausted
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(8), 't8', 'failed', 1, 'exit_nonzero');
RESET ROLE;
SELECT results_eq(
    format($$SELECT r.state, r.finished_at IS NOT NULL, (SELECT count(*) FROM ql_private.attempts a WHERE a.run_id = r.id)
               FROM ql_private.runs r WHERE r.id = %L$$, :'r8'),
    $$VALUES ('failed'::text, true, 1::bigint)$$, 'max_attempts 1: run failed, no new attempt');
SELECT is(pg_temp.events(:'r8'), ARRAY['attempt.failed', 'run.failed'], 'attempt.failed + run.failed');

-- 5. cancellation: requested, then the worker completes as cancelled
SELECT ql.cancel_run(:'r4');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(4), 't4', 'cancelled', 143) AS c4 \gset
RESET ROLE;
SELECT is(:'c4'::jsonb #>> '{lease,state}', 'cancelled', 'cancelled -> lease@v1 state cancelled');
SELECT is(:'c4'::jsonb #>> '{lease,cancelRequested}', 'true', 'cancelRequested true');
SELECT results_eq(
    format($$SELECT r.state, r.finished_at IS NOT NULL, a.state, a.exit_code, a.reason, l.release_reason
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
               JOIN ql_private.run_leases l ON l.attempt_id = a.id WHERE r.id = %L$$, :'r4'),
    $$VALUES ('cancelled'::text, true, 'cancelled'::text, 143, 'cancelled'::text, 'cancelled'::text)$$,
    'run + attempt cancelled, lease released cancelled');
SELECT is(pg_temp.events(:'r4'), ARRAY['run.cancel_requested', 'run.cancelled'], 'one run.cancelled event');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(4), 't4', 'cancelled', 143, NULL, 2) ->> 'status', 'idempotent',
          'cancelled replay -> idempotent');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'nothing written');

-- cancel requested, but the worker reports failed: no retry, the run is cancelled
SELECT ql.cancel_run(:'r5');
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(5), 't5', 'failed', 1);
RESET ROLE;
SELECT results_eq(
    format($$SELECT r.state, (SELECT count(*) FROM ql_private.attempts a WHERE a.run_id = r.id)
               FROM ql_private.runs r WHERE r.id = %L$$, :'r5'),
    $$VALUES ('cancelled'::text, 1::bigint)$$, 'failed while cancel requested: cancelled, not retried');
SELECT is(pg_temp.events(:'r5'), ARRAY['run.cancel_requested', 'attempt.failed', 'run.cancelled'],
          'attempt.failed + run.cancelled');

-- cancel requested, but the work finished: succeeded stands
SELECT ql.cancel_run(:'r6');
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(6), 't6', 'succeeded');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r6'::uuid), 'succeeded', 'succeeded despite the request');

-- 6. expired started lease: the sweeper owns it
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(7), 't7', 'starting');
RESET ROLE;
SELECT ql_test.expire_lease(pg_temp.offer(7));
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(7), 't7', 'succeeded', 0) ->> 'category', 'lease_expired',
          'completion of an expired lease -> lease_expired');
-- 7. fences
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(3), 'wrong', 'succeeded') ->> 'category', 'token_mismatch',
          'another token -> token_mismatch');
SELECT is(pg_temp.done(:w2args, :'s2', 1, pg_temp.offer(3), 't3', 'succeeded') ->> 'category', 'offer_foreign',
          'another worker -> offer_foreign');
SELECT is(pg_temp.done(:w1args, :'s1', 2, pg_temp.offer(3), 't3', 'succeeded') ->> 'category', 'session_replaced',
          'wrong generation -> session_replaced');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 'succeeded', 0, NULL, 1) ->> 'category',
          'stale_lease_version', 'a live lease at an old version -> stale_lease_version');
SELECT is(pg_temp.done(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 'succeeded', 0, NULL, 3) ->> 'category',
          'stale_lease_version', '... or at a version it never had');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused completions wrote nothing');
SELECT is((pg_temp.first_attempt(:'r7')).state, 'starting', 'the expired attempt is left to the sweeper');

-- a replaced session cannot complete its started lease (the sweeper will decide)
SELECT ql_test.enqueue(:'task', 1, 9);
SELECT ql_test.claim('w2', :'s2', pg_temp.offer(30), 't30');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w2args, :'s2', 1, pg_temp.offer(30), 't30', 'starting') ->> 'status', 'ok', 'w2 starts lease 30');
RESET ROLE;
SELECT ql_test.open_session('w2', ql_test.capabilities(32)) ->> 'sessionId' AS s2b \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.done(:w2args, :'s2', 1, pg_temp.offer(30), 't30', 'succeeded', 0) ->> 'category', 'session_replaced',
          'completion from the replaced session -> session_replaced');
SELECT is(pg_temp.done(:w2args, :'s2b', 2, pg_temp.offer(30), 't30', 'succeeded', 0) ->> 'category', 'session_replaced',
          'the new session cannot complete the old session''s lease');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'nothing written');

-- 8. bad input and denial
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(3), %L, %L)', :'w1args', :'s1', 't3', 'done'),
                 'QL001', NULL, 'unknown outcome -> QL001');
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(3), %L, %L, 2)', :'w1args', :'s1', 't3', 'succeeded'),
                 'QL001', NULL, 'succeeded with a non-zero exit code -> QL001');
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(3), %L, %L, 0, %L)', :'w1args', :'s1', 't3', 'succeeded', 'fine'),
                 'QL001', NULL, 'a reason with succeeded -> QL001');
SELECT throws_ok(format('SELECT pg_temp.done(%s, %L, 1, pg_temp.offer(3), %L, %L, 1, %L)', :'w1args', :'s1', 't3', 'failed', 'Exit 1'),
                 'QL001', NULL, 'a free-text reason -> QL001');
SELECT is(ql.complete_lease(:'c1', sha256('nope'), :'w1', :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'), 2, 'succeeded') ->> 'reason',
          'bad_secret', 'wrong secret -> denied');
SELECT throws_ok(format('SELECT ql.complete_lease(%s, %L, 1, pg_temp.offer(3), %L, NULL, %L)', :'w1args', :'s1',
                        ql_test.token_digest('t3'), 'succeeded'),
                 'QL001', NULL, 'lease version NULL -> QL001');
RESET ROLE;

-- SPEC §9.3: the result is validated and stored on the attempt with the
-- completion; a bad one is refused (QL001 COLUMN result) before anything is
-- read or written; a replay must carry the same result (the worker journals it
-- before the first send), and keeps it.
SELECT r[1] AS rr FROM ql_test.enqueue(:'task', 1, 99) r \gset
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(70), 't70') IS NOT NULL AS claimed70 \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(70), 't70', 'starting') IS NOT NULL AS acked70 \gset
RESET ROLE;
CREATE FUNCTION pg_temp.done_with(result jsonb, exit_code integer DEFAULT 0, version bigint DEFAULT 2)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.complete_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                             (SELECT session_id::text FROM ql_private.run_leases
                               WHERE offer_id = '00000000-0000-4000-8000-000000000070'),
                             1, '00000000-0000-4000-8000-000000000070', ql_test.token_digest('t70'),
                             version, 'succeeded', exit_code, NULL, result)
$$;
SELECT ql_test.mark();
SELECT is(ql_test.error_of($$SELECT pg_temp.done_with('{"durationMs": 1, "outputTail": "x"}')$$),
          'QL001 result', 'a result without outputBytes -> QL001 result');
SELECT is(ql_test.error_of($$SELECT pg_temp.done_with('{"durationMs": 1, "outputTail": "x", "outputBytes": 1, "extra": 1}')$$),
          'QL001 result', 'an unknown field -> QL001 result');
SELECT is(ql_test.error_of(format('SELECT pg_temp.done_with(%L)',
                                  jsonb_build_object('durationMs', 1, 'outputBytes', 9000,
                                                     'outputTail', repeat('é', 4097)))),
          'QL001 result', 'an outputTail over 8192 UTF-8 bytes -> QL001 result');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused results changed nothing');
SELECT '{"exitCode": 0, "durationMs": 1234, "outputTail": "done\n", "outputBytes": 5}' AS res \gset
SELECT is(pg_temp.done_with(:'res') ->> 'status', 'ok', 'completion with a result');
SELECT is((SELECT a.result FROM ql_private.attempts a JOIN ql_private.runs r ON r.current_attempt_id = a.id
            WHERE r.id = :'rr'::uuid), :'res'::jsonb, 'the result is stored on the attempt');
SELECT is(pg_temp.done_with(:'res') ->> 'status', 'idempotent',
          'a replay with the same result answers idempotent');
SELECT is(pg_temp.done_with('{"durationMs": 9, "outputTail": "", "outputBytes": 0}') ->> 'category',
          'lease_terminal', 'another result is not the completion that was made -> lease_terminal');
SELECT is((SELECT a.result FROM ql_private.attempts a JOIN ql_private.runs r ON r.current_attempt_id = a.id
            WHERE r.id = :'rr'::uuid), :'res'::jsonb, '... and keeps the stored result');

SELECT * FROM finish();
ROLLBACK;
