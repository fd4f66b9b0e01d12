-- ql.sweep_leases (SPEC §7) as ql_runtime: unstarted expired leases released
-- (run queued again, attempt stays claimed, next claim = lease generation + 1);
-- started expired leases -> attempt lost + retry policy (retried / failed /
-- cancelled when cancel-requested); live leases untouched; a second sweep finds
-- nothing and writes nothing; bounded batches report `more`; bad input.
BEGIN;
SELECT plan(36);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(32)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT ql_test.publish('proj', 'once', ql_test.command('["once"]')) ->> 'taskId' AS once \gset
UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = :'task'::uuid;
UPDATE ql_private.tasks SET max_attempts = 1 WHERE id = :'once'::uuid;
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5
  FROM ql_test.enqueue(:'task', 5, 0) r \gset
SELECT r[1] AS r6 FROM ql_test.enqueue(:'once', 1, -1) r \gset

CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
CREATE FUNCTION pg_temp.start(n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                        (SELECT session_id::text FROM ql_private.worker_sessions WHERE state = 'active'), 1,
                        pg_temp.offer(n), ql_test.token_digest('t' || n), 1, 'starting')
$$;
CREATE FUNCTION pg_temp.sweep(batch integer DEFAULT 500) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.sweep_leases(batch) $$;
GRANT EXECUTE ON FUNCTION pg_temp.sweep(integer) TO ql_runtime;
CREATE FUNCTION pg_temp.run_row(run text) RETURNS text LANGUAGE sql AS $$
    SELECT r.state || '/' || a.attempt_no || ':' || a.state
      FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
     WHERE r.id = run::uuid
$$;
CREATE FUNCTION pg_temp.events(run text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(type ORDER BY id) FROM ql_private.events
     WHERE run_id = run::uuid AND type NOT IN ('run.queued', 'run.dispatched', 'run.starting')
$$;

-- offer n <-> run rn. 1 unstarted+expired, 2 unstarted+live, 3 started+expired,
-- 4 started+live, 5 started+expired+cancel requested, 6 started+expired, no attempts left.
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 6) n;
SELECT pg_temp.start(n) FROM generate_series(3, 6) n;
SELECT ql.cancel_run(:'r5');
SELECT ql_test.expire_lease(pg_temp.offer(n)) FROM unnest(ARRAY[1, 3, 5, 6]) n;

SET LOCAL ROLE ql_runtime;
SELECT pg_temp.sweep() AS sw \gset
RESET ROLE;
SELECT is(:'sw'::jsonb,
          '{"expired":1,"lost":3,"retried":1,"failed":1,"cancelled":1,"skipped":0,"promoted":0,"more":false}'::jsonb,
          'counts of the pass');

-- unstarted + expired
SELECT is((ql_test.lease(pg_temp.offer(1))).release_reason, 'expired', 'unstarted expired lease released as expired');
SELECT is(pg_temp.run_row(:'r1'), 'queued/1:claimed', 'its run is queued again, the attempt stays claimed');
SELECT is(pg_temp.events(:'r1'), NULL, 'no event for an expired offer');
-- live leases untouched
SELECT is((ql_test.lease(pg_temp.offer(2))).released_at, NULL, 'an unexpired unstarted lease is untouched');
SELECT is(pg_temp.run_row(:'r2'), 'dispatching/1:claimed', 'and its run');
SELECT is((ql_test.lease(pg_temp.offer(4))).released_at, NULL, 'an unexpired started lease is untouched');
SELECT is(pg_temp.run_row(:'r4'), 'starting/1:starting', 'and its run');
-- started + expired: lost, retried
SELECT is((ql_test.lease(pg_temp.offer(3))).release_reason, 'lost', 'started expired lease released as lost');
SELECT results_eq(
    format($$SELECT attempt_no, state, reason, finished_at IS NOT NULL FROM ql_private.attempts
              WHERE run_id = %L ORDER BY attempt_no$$, :'r3'),
    $$VALUES (1, 'lost'::text, 'lease_expired'::text, true), (2, 'claimed'::text, NULL::text, false)$$,
    'attempt 1 lost (lease_expired), attempt 2 claimed');
SELECT is(pg_temp.run_row(:'r3'), 'queued/2:claimed', 'the run is queued with attempt 2');
SELECT is(pg_temp.events(:'r3'), ARRAY['attempt.lost', 'run.retry_scheduled'], 'attempt.lost + run.retry_scheduled');
SELECT is((SELECT payload ->> 'previousAttemptId' FROM ql_private.events WHERE run_id = :'r3'::uuid AND type = 'run.retry_scheduled'),
          (SELECT id::text FROM ql_private.attempts WHERE run_id = :'r3'::uuid AND attempt_no = 1),
          'the retry names the lost attempt');
-- cancel requested
SELECT is(pg_temp.run_row(:'r5'), 'cancelled/1:lost', 'cancel-requested run whose lease expired -> cancelled, not retried');
SELECT is(pg_temp.events(:'r5'), ARRAY['run.cancel_requested', 'attempt.lost', 'run.cancelled'], 'attempt.lost + run.cancelled');
-- attempts exhausted
SELECT is(pg_temp.run_row(:'r6'), 'failed/1:lost', 'no attempts left -> run failed');
SELECT is(pg_temp.events(:'r6'), ARRAY['attempt.lost', 'run.failed'], 'attempt.lost + run.failed');
SELECT ok((SELECT finished_at IS NOT NULL FROM ql_private.runs WHERE id = :'r6'::uuid), 'finished_at set');

-- candidates now: r1 (expired offer) and r3 (retried); never the cancelled or failed runs
SELECT is((SELECT array_agg(c.run_id::text ORDER BY c.queue_seq) FROM ql_private.candidate_page(NULL, NULL, NULL, 64) c),
          ARRAY[:'r1', :'r3'], 'the expired-offer run and the retried run are candidates, nothing else');

-- 2. a second pass finds nothing and writes nothing
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(pg_temp.sweep(),
          '{"expired":0,"lost":0,"retried":0,"failed":0,"cancelled":0,"skipped":0,"promoted":0,"more":false}'::jsonb,
          'second pass: nothing to do');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'and nothing written');
SELECT is((SELECT count(*) FROM ql_private.attempts WHERE run_id = :'r3'::uuid), 2::bigint, 'still one retry');

-- 3. the next claim takes the expired-offer run with lease generation 2
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(11), 't11') AS re1 \gset
SELECT is(:'re1'::jsonb #>> '{candidate,runId}', :'r1', 'the expired-offer run is claimed again');
SELECT is(:'re1'::jsonb #>> '{lease,leaseGeneration}', '2', 'with lease generation + 1');
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(13), 't13') AS re3 \gset
SELECT is(:'re3'::jsonb #>> '{candidate,runId}', :'r3', 'the retried run is claimed');
SELECT is(:'re3'::jsonb #>> '{lease,leaseGeneration}', '1', 'attempt 2 starts at lease generation 1');
SELECT is(ql.pull_offer(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                        pg_temp.offer(3), ql_test.token_digest('t3')) ->> 'category',
          'lease_terminal', 'replaying the lost offer is refused');

-- 4. bounded batches
SELECT ql_test.enqueue(:'task', 3, 5);
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(21, 23) n;
SELECT ql_test.expire_lease(pg_temp.offer(n)) FROM generate_series(21, 23) n;
SET LOCAL ROLE ql_runtime;
SELECT is(pg_temp.sweep(2) -> 'more', 'true'::jsonb, 'a full batch reports more');
SELECT is(pg_temp.sweep(2), '{"expired":1,"lost":0,"retried":0,"failed":0,"cancelled":0,"skipped":0,"promoted":0,"more":false}'::jsonb,
          'the next batch takes the rest');
SELECT throws_ok('SELECT pg_temp.sweep(0)', 'QL001', NULL, 'batch 0 -> QL001');
SELECT throws_ok('SELECT pg_temp.sweep(NULL)', 'QL001', NULL, 'batch NULL -> QL001');
SELECT throws_ok('SELECT pg_temp.sweep(5001)', 'QL002', NULL, 'batch above 5000 -> QL002');
RESET ROLE;

-- SPEC §9.2: the sweeper promotes scheduled runs that came due into the
-- candidate keyset (due_at := NULL), in batches; runs not yet due stay.
SELECT ql_test.publish('proj', 'sched') ->> 'taskId' AS sched \gset
SELECT ql.enqueue_runs(:'sched', 0, 3, p_delay_ms => 3600000) IS NOT NULL AS queued3 \gset
SELECT ql.enqueue_runs(:'sched', 0, 2, p_delay_ms => 7200000) IS NOT NULL AS queued2 \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second'
 WHERE task_id = :'sched'::uuid AND due_at < clock_timestamp() + interval '90 minutes';
SELECT is(pg_temp.sweep(2) - 'more', '{"expired":0,"lost":0,"retried":0,"failed":0,"cancelled":0,"skipped":0,"promoted":2}'::jsonb,
          'a batch of 2 promotes two due runs');
SELECT is(pg_temp.sweep(2) ->> 'promoted', '1', 'the next batch the third');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'sched'::uuid AND due_at IS NULL), 3::bigint,
          'the three due runs are in the candidate keyset now');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'sched'::uuid AND due_at > clock_timestamp()), 2::bigint,
          'the two runs not yet due stay scheduled');

SELECT * FROM finish();
ROLLBACK;
