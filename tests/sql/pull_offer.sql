-- ql.pull_offer (SPEC §3.3): claim, replay, every conflict category, session
-- fences, capacity, bounds caps, placement order/score, truncation, R-REV-2,
-- bad input; called as ql_worker_ingress like the ingress does.
BEGIN;
SELECT plan(63);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16, '{"zone":"a"}', '{"python":"3.12.1"}')) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') AS pub \gset
SELECT :'pub'::jsonb ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6
  FROM ql_test.enqueue(:'task', 6, 0) r \gset

-- pull(worker creds, session, generation, offer, token label [, bounds])
-- Worker arguments are resolved up front (:w1args, :w2args): the lookups read
-- ql_private, which the ingress role must not be able to.
CREATE FUNCTION pg_temp.pull(cred text, dig bytea, worker text, session text, gen bigint,
                             offer text, token text, bounds jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.pull_offer(cred, dig, worker, session, gen, offer,
                         sha256(convert_to(token, 'UTF8')), bounds)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.pull(text, bytea, text, text, bigint, text, text, jsonb)
    TO ql_worker_ingress;
SELECT format('%L, %L::bytea, %L', :'c1', :'d1', :'w1') AS w1args \gset
SELECT format('%L, %L::bytea, %L', :'c2', :'d2', :'w2') AS w2args \gset
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer) TO ql_worker_ingress;
-- Fixture lookups below read ql_private, which only the session user may.
CREATE FUNCTION pg_temp.lease_count() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.run_leases $$;
CREATE FUNCTION pg_temp.dispatched() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched' $$;

-- 1. A claim.
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(1), 't1') AS first \gset
RESET ROLE;
SELECT is(:'first'::jsonb ->> 'status', 'offered', 'first pull is offered');
SELECT is(:'first'::jsonb #>> '{offer,candidate,runId}', :'r1', 'FIFO: the oldest run is offered');
SELECT is(:'first'::jsonb #>> '{offer,lease,offerId}', pg_temp.offer(1), 'lease carries the offer id');
SELECT is(:'first'::jsonb #>> '{offer,lease,leaseGeneration}', '1', 'first lease generation is 1');
SELECT is(:'first'::jsonb #>> '{offer,contentDigest}', :'pub'::jsonb ->> 'contentDigest',
          'offer carries the pinned revision digest');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r1'::uuid), 'dispatching',
          'claim moves the run to dispatching (never starting/running)');
SELECT is((SELECT state FROM ql_private.attempts WHERE run_id = :'r1'::uuid), 'claimed',
          'the attempt stays claimed until a starting ACK');
SELECT is(pg_temp.lease_count(), 1::bigint, 'one lease');
SELECT is(pg_temp.dispatched(), 1::bigint, 'one run.dispatched event');
SELECT ok(NOT (:'first'::text ~ encode(sha256(convert_to('t1', 'UTF8')), 'hex')),
          'the offer never carries the token digest');

-- 2. Replay: same offer, nothing written.
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(1), 't1') AS replay \gset
RESET ROLE;
SELECT is(:'replay'::jsonb ->> 'status', 'idempotent', 'replay is idempotent');
SELECT is(:'replay'::jsonb -> 'offer', :'first'::jsonb -> 'offer', 'replay returns the very same offer');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a replay writes nothing');

-- 3. Conflict categories.
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(1), 'other') ->> 'category', 'token_mismatch',
          'another token for the offer id -> token_mismatch');
SELECT is(pg_temp.pull(:w2args, :'s2', 1, pg_temp.offer(1), 't1') ->> 'category', 'offer_foreign',
          'another worker replaying the offer id -> offer_foreign');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(1), 't1') ->> 'status', 'idempotent',
          'failed replays changed nothing');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(2), 't2') #>> '{offer,candidate,runId}', :'r2',
          'a second claim takes the next run');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(3), 't3') #>> '{offer,candidate,runId}', :'r3',
          'a third claim');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(4), 't4') #>> '{offer,candidate,runId}', :'r4',
          'a fourth claim');
RESET ROLE;

UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'
 WHERE offer_id = pg_temp.offer(2)::uuid;
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = pg_temp.offer(3)::uuid;
UPDATE ql_private.attempts SET state = 'failed' WHERE run_id = :'r4'::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(2), 't2') ->> 'category', 'lease_expired',
          'unstarted lease past expiry -> lease_expired');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(3), 't3') ->> 'category', 'lease_terminal',
          'released lease -> lease_terminal');
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(4), 't4') ->> 'category', 'attempt_changed',
          'attempt left claimed -> attempt_changed');
-- The expired lease's run is a candidate again: a new claim supersedes it.
SELECT pg_temp.pull(:w2args, :'s2', 1, pg_temp.offer(5), 't5') AS reclaim \gset
RESET ROLE;
SELECT is(:'reclaim'::jsonb #>> '{offer,candidate,runId}', :'r2', 'an expired unstarted lease makes its run claimable');
SELECT is(:'reclaim'::jsonb #>> '{offer,lease,leaseGeneration}', '2', 'the new lease has generation + 1');
SELECT is((SELECT release_reason FROM ql_private.run_leases WHERE offer_id = pg_temp.offer(2)::uuid),
          'expired', 'the superseded lease is released as expired');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(2), 't2') ->> 'category', 'lease_expired',
          'the superseded offer id keeps answering lease_expired');
RESET ROLE;

-- revision drift: the run's pinned revision is changed behind the lease's back.
SELECT ql_test.publish('proj', 'task', ql_test.command('["false"]')) ->> 'revisionId' AS rev2 \gset
UPDATE ql_private.runs SET execution_revision_id = :'rev2'::uuid WHERE id = :'r1'::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(1), 't1') ->> 'category', 'revision_drift',
          'pinned revision changed -> revision_drift');
RESET ROLE;

-- 4. Session fences.
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 2, pg_temp.offer(9), %L)', :'w1args', :'s1', 't9'),
                 'QL011', NULL, 'wrong generation -> QL011');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L)', :'w1args', :'s2', 't9'),
                 'QL010', NULL, 'another worker''s session -> QL010');
RESET ROLE;
SELECT ql_test.open_session('w2') ->> 'sessionId' AS s2b \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w2args, :'s2', 1, pg_temp.offer(5), 't5') ->> 'category', 'session_replaced',
          'offer of a replaced session -> session_replaced');
SELECT is(pg_temp.pull(:w2args, :'s2b', 2, pg_temp.offer(5), 't5') ->> 'category', 'session_replaced',
          'replaying an old session''s offer from the new session -> session_replaced');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L)', :'w2args', :'s2', 't9'),
                 'QL011', NULL, 'pulling on a replaced session -> QL011');
RESET ROLE;
SELECT ql_test.expire_session(:'s2b');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 2, pg_temp.offer(9), %L)', :'w2args', :'s2b', 't9'),
                 'QL012', NULL, 'expired session -> QL012');

-- 5. Denial, bad input and bounds.
SELECT is(ql.pull_offer(:'c1', sha256('nope'), :'w1', :'s1', 1, pg_temp.offer(9),
                        sha256('t9')) ->> 'reason', 'bad_secret', 'wrong secret -> denied');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, %L, %L)', :'w1args', :'s1', 'NOT-A-UUID', 't9'),
                 'QL001', NULL, 'malformed offer id -> QL001');
SELECT throws_ok(format('SELECT ql.pull_offer(%L, %L::bytea, %L, %L, 1, pg_temp.offer(9), %L::bytea)',
                        :'c1', :'d1', :'w1', :'s1', '\x00'),
                 'QL001', NULL, 'token digest not 32 bytes -> QL001');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 0, pg_temp.offer(9), %L)', :'w1args', :'s1', 't9'),
                 'QL001', NULL, 'generation 0 -> QL001');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L, %L)', :'w1args', :'s1', 't9', '{"pages":17}'),
                 'QL002', NULL, 'pages above 16 -> QL002 (not clamped)');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L, %L)', :'w1args', :'s1', 't9', '{"pageSize":65}'),
                 'QL002', NULL, 'pageSize above 64 -> QL002');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L, %L)', :'w1args', :'s1', 't9', '{"claimAttempts":65}'),
                 'QL002', NULL, 'claimAttempts above 64 -> QL002');
SELECT throws_ok(format('SELECT pg_temp.pull(%s, %L, 1, pg_temp.offer(9), %L, %L)', :'w1args', :'s1', 't9', '{"limit":3}'),
                 'QL001', NULL, 'unknown bound -> QL001');
RESET ROLE;

-- 6. Placement: mismatch categories, score order, truncation, capacity.
SELECT ql_test.publish('proj', 'gpu', ql_test.command('["x"]',
       '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}}}')) ->> 'taskId' AS gpu \gset
SELECT ql_test.publish('proj', 'old-python', ql_test.command('["x"]',
       '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{},"runtimes":{"python":["<3.0.0"]}}}')) ->> 'taskId' AS oldpy \gset
SELECT ql_test.publish('proj', 'zone-a', ql_test.command('["x"]',
       '{"preferred":[{"labels":{"zone":["a"]},"runtimes":{},"weight":7}],"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}}}')) ->> 'taskId' AS zonea \gset
UPDATE ql_private.runs SET state = 'cancelled' WHERE task_id = :'task'::uuid AND state = 'queued';
SELECT ql_test.enqueue(:'gpu', 10, 3);
SELECT ql_test.enqueue(:'oldpy', 2, 3);
SELECT r[1] AS plain FROM ql_test.enqueue(:'task', 1, 1) r \gset
SELECT r[1] AS preferred FROM ql_test.enqueue(:'zonea', 1, 1) r \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(20), 't20', '{"pages":1,"pageSize":8}') AS idle1 \gset
SELECT pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(21), 't21') AS won \gset
RESET ROLE;
SELECT is(:'idle1'::jsonb ->> 'reason', 'placement_mismatch', 'only blocked candidates in one page -> placement_mismatch');
SELECT is(:'idle1'::jsonb -> 'truncated', 'true'::jsonb, 'more candidates than one page -> truncated');
SELECT is(:'idle1'::jsonb #>> '{stats,mismatches,label}', '8', 'each mismatch counted by category');
SELECT is(:'won'::jsonb #>> '{offer,candidate,runId}', :'preferred',
          'equal priority: higher placement score is claimed before queue order');
SELECT is(:'won'::jsonb #>> '{offer,placementScore}', '7', 'score = sum of matching preferred weights');
SELECT results_eq(
    $$SELECT (ql_private.placement_evaluate(er.placement, '{}'::jsonb)).category
        FROM ql_private.execution_revisions er JOIN ql_private.tasks t ON t.id = er.task_id
       WHERE t.name = 'old-python'$$,
    ARRAY['executor'], 'a worker without executors fails on executor first');

-- 7. Capacity: a one-slot session holding a live lease idles with capacity_full.
SELECT worker_id AS w3, credential_id AS c3, secret_digest AS d3 FROM ql_test.new_worker('w3') \gset
SELECT ql_test.open_session('w3', ql_test.capabilities(1)) ->> 'sessionId' AS s3 \gset
SELECT format('%L, %L::bytea, %L', :'c3', :'d3', :'w3') AS w3args \gset
SELECT r[1] AS cap1, r[2] AS cap2 FROM ql_test.enqueue(:'task', 2, 9) r \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.pull(:w3args, :'s3', 1, pg_temp.offer(30), 't30') ->> 'status', 'offered',
          'a one-slot session gets one offer');
SELECT ql_test.mark();
SELECT pg_temp.pull(:w3args, :'s3', 1, pg_temp.offer(31), 't31') AS full \gset
RESET ROLE;
SELECT is(:'full'::jsonb ->> 'reason', 'capacity_full', 'no free slot -> idle capacity_full');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a capacity_full pull writes nothing');

-- 8. R-REV-2: an old revision row without placement keeps its digest and is
-- treated as requiring executor remote-worker.
SELECT convert_to('{"executor":"remote_worker","kind":"qinglong/command@v1","spec":{"argv":["old"],"env":{},"schema":"qinglong/command@v1","timeoutS":30}}', 'UTF8') AS oldbytes \gset
INSERT INTO ql_private.tasks (project_id, name)
SELECT project_id, 'legacy' FROM ql_private.tasks WHERE id = :'task'::uuid
RETURNING id AS legacy \gset
INSERT INTO ql_private.execution_revisions (task_id, revision, kind, executor, spec, placement, canonical, content_digest)
VALUES (:'legacy', 1, 'qinglong/command@v1', 'remote_worker',
        convert_from(:'oldbytes'::bytea, 'UTF8')::jsonb -> 'spec', NULL, :'oldbytes'::bytea,
        'sha256:' || encode(sha256(:'oldbytes'::bytea), 'hex'))
RETURNING id AS legacy_rev, content_digest AS legacy_digest \gset
UPDATE ql_private.tasks SET current_revision_id = :'legacy_rev' WHERE id = :'legacy';
SELECT r[1] AS legacy_run FROM ql_test.enqueue(:'legacy', 1, 20) r \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w1args, :'s1', 1, pg_temp.offer(40), 't40') AS legacy_offer \gset
RESET ROLE;
SELECT is(:'legacy_offer'::jsonb #>> '{offer,candidate,runId}', :'legacy_run',
          'a revision without placement is dispatched to a remote-worker executor');
SELECT is(:'legacy_offer'::jsonb #>> '{offer,executionRevision,contentDigest}', :'legacy_digest',
          'it reads back with its original digest');
SELECT ok(NOT (:'legacy_offer'::jsonb #> '{offer,executionRevision}') ? 'placement',
          'no placement key is invented for it');
SELECT is((ql_private.placement_evaluate(NULL, '{"executors":["other"],"labels":{},"runtimes":{}}'::jsonb)).category,
          'executor', 'a worker without remote-worker is refused by the default placement');

-- SPEC §9.2: 100 runs scheduled an hour ahead, queued BEFORE the ready ones at
-- the same (top) priority, are not walked: a pull reads its bounded page of the
-- ready keyset and is offered the first ready run; with only future runs it is
-- idle having read nothing. A scheduled run whose time passed is offered, and the
-- claim clears its due_at.
SELECT worker_id AS w9, credential_id AS c9, secret_digest AS d9 FROM ql_test.new_worker('w9') \gset
SELECT ql_test.open_session('w9', ql_test.capabilities(16)) ->> 'sessionId' AS s9 \gset
SELECT format('%L, %L::bytea, %L', :'c9', :'d9', :'w9') AS w9args \gset
UPDATE ql_private.runs SET state = 'succeeded', finished_at = clock_timestamp()
 WHERE state IN ('queued', 'dispatching');
SELECT ql_test.publish('proj', 'sched') ->> 'taskId' AS sched \gset
SELECT jsonb_array_length(ql.enqueue_runs(:'sched', 32767, 100, p_delay_ms => 3600000) -> 'runIds') AS n_sched \gset
-- Rows of a ql_private table fetched so far in this transaction (index + sequential).
CREATE FUNCTION pg_temp.fetched(p_table text) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(sum(idx_tup_fetch + seq_tup_read), 0)::bigint FROM pg_catalog.pg_stat_xact_user_tables
     WHERE schemaname = 'ql_private' AND relname = p_table
$$;
SELECT pg_temp.fetched('runs') AS f0 \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w9args, :'s9', 1, pg_temp.offer(90), 't90') AS idle9 \gset
RESET ROLE;
SELECT is(:'idle9'::jsonb - 'stats',
          '{"status": "idle", "reason": "no_candidates", "truncated": false}'::jsonb,
          '100 runs due in an hour, nothing ready: idle no_candidates');
SELECT is((:'idle9'::jsonb #>> '{stats,candidates}')::integer, 0, '... having examined no candidate');
SELECT cmp_ok(pg_temp.fetched('runs') - :f0, '<', 10::bigint,
              '... and fetched (almost) no runs row: the scheduled runs are not walked');

SELECT ql_test.enqueue(:'sched', 3, 32767) AS ready \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w9args, :'s9', 1, pg_temp.offer(91), 't91') AS got9 \gset
RESET ROLE;
SELECT is(:'got9'::jsonb #>> '{offer,candidate,runId}', (:'ready'::text[])[1],
          '100 scheduled runs ahead of 3 ready ones: the first ready run is offered');
-- How many runs rows this pull reads is not pinned: which index the planner
-- picks for the due-run source depends on statistics, and these tiny,
-- never-analyzed tables cost a scan through runs_state_seq like runs_due.
-- `python -m tools.bench depth` measures 100,000 scheduled runs ahead of
-- 10,000 ready ones instead (docs/BENCHMARKS.md).

UPDATE ql_private.runs r SET due_at = clock_timestamp() - interval '1 second'
  FROM (SELECT id FROM ql_private.runs WHERE task_id = :'sched'::uuid AND due_at IS NOT NULL
         ORDER BY queue_seq LIMIT 1) d
 WHERE r.id = d.id
RETURNING r.id AS due_run \gset
UPDATE ql_private.attempts a SET not_before = r.due_at
  FROM ql_private.runs r WHERE r.id = :'due_run'::uuid AND a.id = r.current_attempt_id;
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w9args, :'s9', 1, pg_temp.offer(92), 't92') AS due9 \gset
RESET ROLE;
SELECT is(:'due9'::jsonb #>> '{offer,candidate,runId}', :'due_run',
          'a scheduled run whose time passed is offered (first in key order), before the sweeper promoted it');
SELECT results_eq(format($$SELECT state, due_at IS NULL FROM ql_private.runs WHERE id = %L$$, :'due_run'),
                  $$VALUES ('dispatching'::text, true)$$, 'the claim cleared its due_at');
SELECT is((SELECT count(*) FROM ql_private.runs WHERE task_id = :'sched'::uuid AND due_at IS NOT NULL),
          99::bigint, 'the other 99 are still scheduled');

-- A plan cached while run_leases was small must not walk every live lease on
-- every pull (the pull's plans are generic and live as long as the connection:
-- this backend made them at the first pull above). 200 live unstarted leases
-- held by another session; a pull of w9 then fetches a handful of run_leases
-- rows, not 200 (the whole-queue probe once went through
-- run_leases_session_live_counted instead of run_leases_unstarted_expiry).
SELECT worker_id AS w10, credential_id AS c10, secret_digest AS d10 FROM ql_test.new_worker('w10') \gset
SELECT ql_test.open_session('w10', ql_test.capabilities(256)) ->> 'sessionId' AS s10 \gset
SELECT format('%L, %L::bytea, %L', :'c10', :'d10', :'w10') AS w10args \gset
SELECT ql_test.enqueue(:'sched', 201, 32767) AS many \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT count(*) AS n10 FROM generate_series(1, 200) g
 WHERE pg_temp.pull(:w10args, :'s10', 1, pg_temp.offer(1000 + g), 'm' || g) ->> 'status' = 'offered' \gset
RESET ROLE;
SELECT is(:n10::integer, 200, '200 live unstarted leases held by another session');
SELECT pg_temp.fetched('run_leases') AS l0 \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.pull(:w9args, :'s9', 1, pg_temp.offer(93), 't93') ->> 'status' AS got10 \gset
RESET ROLE;
SELECT cmp_ok(pg_temp.fetched('run_leases') - :l0, '<', 20::bigint,
              format('a pull (%s) fetches a handful of run_leases rows, not every live lease', :'got10'));

SELECT * FROM finish();
ROLLBACK;
