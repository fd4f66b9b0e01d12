-- ql.ack_lease (SPEC §7): starting / running / start_failed transitions on real
-- claims, at the lease version the worker last saw; exact replays after a lost
-- answer (version - 1, the same ACK: no writes), an old version
-- (stale_lease_version, no writes), every conflict category, illegal
-- transitions (QL020, nothing changed), bad input; called as ql_worker_ingress.
BEGIN;
SELECT plan(75);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET lease_ttl_seconds = 120 WHERE id = :'task'::uuid;
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6, r[7] AS r7,
       r[8] AS r8, r[9] AS r9
  FROM ql_test.enqueue(:'task', 9, 0) r \gset

-- ack(worker args, session, generation, offer, token, phase [, reason [, version]]);
-- worker arguments are resolved up front: the lookups read ql_private. The
-- version defaults to the lease's current one (what a worker that got every
-- answer holds; pg_temp.version reads it as the test's owner).
CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT l.lease_version FROM ql_private.run_leases l
                      WHERE l.offer_id::text = offer), 1)
$$;
CREATE FUNCTION pg_temp.ack(cred text, dig bytea, worker text, session text, gen bigint,
                            offer text, token text, phase text, reason text DEFAULT NULL,
                            version bigint DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(cred, dig, worker, session, gen, offer, ql_test.token_digest(token),
                        coalesce(version, pg_temp.version(offer)), phase, reason)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.ack(text, bytea, text, text, bigint, text, text, text, text, bigint),
                          pg_temp.version(text)
    TO ql_worker_ingress;
SELECT format('%L, %L::bytea, %L', :'c1', :'d1', :'w1') AS w1args \gset
SELECT format('%L, %L::bytea, %L', :'c2', :'d2', :'w2') AS w2args \gset
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer) TO ql_worker_ingress;
CREATE FUNCTION pg_temp.states(run text) RETURNS text LANGUAGE sql AS $$
    SELECT r.state || '/' || a.state || '/' || coalesce(l.release_reason, 'live')
      FROM ql_private.runs r JOIN ql_private.attempts a ON a.run_id = r.id AND a.attempt_no = 1
      JOIN ql_private.run_leases l ON l.attempt_id = a.id
     WHERE r.id = run::uuid
     ORDER BY l.lease_generation DESC LIMIT 1
$$;
CREATE FUNCTION pg_temp.events(run text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(type ORDER BY id) FROM ql_private.events WHERE run_id = run::uuid
$$;

-- Real claims: offer n is run rn for w1 (offer 9 is w2's).
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 8) n;
SELECT ql_test.claim('w2', :'s2', pg_temp.offer(9), 't9');

-- 1. starting
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'starting') AS st \gset
RESET ROLE;
SELECT is(:'st'::jsonb ->> 'status', 'ok', 'starting ACK -> ok');
SELECT is(:'st'::jsonb #>> '{lease,state}', 'starting', 'lease@v1 state = attempt starting');
SELECT is(:'st'::jsonb #>> '{lease,leaseVersion}', '2', 'starting bumps lease_version');
SELECT ok((:'st'::jsonb #>> '{lease,startedAtMs}') IS NOT NULL, 'startedAtMs is set');
SELECT is(:'st'::jsonb #>> '{lease,offerId}', pg_temp.offer(1), 'projection names the offer');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'st'::jsonb -> 'lease') k),
          ARRAY['attemptId', 'cancelRequested', 'claimedAtMs', 'expiresAtMs', 'leaseGeneration',
                'leaseVersion', 'offerId', 'runId', 'sessionGeneration', 'sessionId',
                'startedAtMs', 'state', 'updatedAtMs', 'workerId'],
          'lease@v1 fields exactly (no token, no digest)');
SELECT is((SELECT expires_at - started_at FROM ql_test.lease(pg_temp.offer(1))), interval '120 seconds',
          'a started lease expires after the task lease TTL');
SELECT is(pg_temp.states(:'r1'), 'starting/starting/live', 'run and attempt -> starting, lease live');
SELECT is(pg_temp.events(:'r1'), ARRAY['run.queued', 'run.dispatched', 'run.starting'],
          'one run.starting event');
SELECT is(ql_test.writes_since_mark(), 4::bigint, 'lease + attempt + run + one event written');

-- 2. replay of starting: the same request (version 1) after a lost answer
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'starting', NULL, 1) AS st2 \gset
RESET ROLE;
SELECT is(:'st2'::jsonb ->> 'status', 'idempotent', 'starting again at version 1 -> idempotent');
SELECT is(:'st2'::jsonb -> 'lease', :'st'::jsonb -> 'lease', 'the same lease projection');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a starting replay writes nothing');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L)', :'w1args', :'s1', 't1', 'starting'),
                 'QL020', NULL, 'starting at the current version (2) is no replay: QL020');
RESET ROLE;

-- 3. running, and its replay
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running') AS rn \gset
RESET ROLE;
SELECT is(:'rn'::jsonb ->> 'status', 'ok', 'running ACK -> ok');
SELECT is(:'rn'::jsonb #>> '{lease,leaseVersion}', '3', 'running bumps lease_version');
SELECT is(:'rn'::jsonb #>> '{lease,state}', 'running', 'lease@v1 state running');
SELECT is(:'rn'::jsonb #>> '{lease,startedAtMs}', :'st'::jsonb #>> '{lease,startedAtMs}',
          'startedAtMs unchanged by running');
SELECT is(pg_temp.states(:'r1'), 'running/running/live', 'run and attempt -> running');
SELECT is(pg_temp.events(:'r1'), ARRAY['run.queued', 'run.dispatched', 'run.starting', 'run.running'],
          'one run.running event');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running', NULL, 2) AS rn2 \gset
RESET ROLE;
SELECT is(:'rn2'::jsonb ->> 'status', 'idempotent', 'running again at version 2 -> idempotent');
SELECT is(:'rn2'::jsonb -> 'lease', :'rn'::jsonb -> 'lease', 'the same projection');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a running replay writes nothing');

-- 3b. an old version: stale_lease_version, nothing written
SELECT ql_test.mark();
SELECT xmin::text AS lease_xmin FROM ql_private.run_leases WHERE offer_id = pg_temp.offer(1)::uuid \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running', NULL, 1) ->> 'category',
          'stale_lease_version', 'running at version 1 (two behind) -> stale_lease_version');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'starting', NULL, 2) ->> 'category',
          'stale_lease_version', 'starting at version 2 (a running ACK made 3) -> stale_lease_version');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(1), 't1', 'running', NULL, 7) ->> 'category',
          'stale_lease_version', 'a version the lease never had -> stale_lease_version');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'stale versions write nothing');
SELECT is((SELECT xmin::text FROM ql_private.run_leases WHERE offer_id = pg_temp.offer(1)::uuid),
          :'lease_xmin', 'the lease row is untouched (same xmin)');

-- 4. illegal transitions: QL020 and nothing changes
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L)', :'w1args', :'s1', 't1', 'starting'),
                 'QL020', NULL, 'starting after running -> QL020');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L, %L)', :'w1args', :'s1', 't1', 'start_failed', 'boom'),
                 'QL020', NULL, 'start_failed after running -> QL020');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(2), %L, %L)', :'w1args', :'s1', 't2', 'running'),
                 'QL020', NULL, 'running before starting -> QL020');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'illegal transitions wrote nothing');
SELECT is(pg_temp.states(:'r1'), 'running/running/live', 'the running lease is unchanged');
SELECT is(pg_temp.states(:'r2'), 'dispatching/claimed/live', 'the unstarted lease is unchanged');
SELECT is((ql_test.lease(pg_temp.offer(2))).lease_version, 1, 'its version is unchanged');

-- 5. conflicts (all read-only)
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 'wrong', 'starting') ->> 'category',
          'token_mismatch', 'another token -> token_mismatch');
SELECT is(pg_temp.ack(:w2args, :'s2', 1, pg_temp.offer(2), 't2', 'starting') ->> 'category',
          'offer_foreign', 'another worker -> offer_foreign');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(99), 't99', 'starting') ->> 'category',
          'offer_foreign', 'an unknown offer id -> offer_foreign (indistinguishable from foreign)');
SELECT is(pg_temp.ack(:w1args, :'s1', 2, pg_temp.offer(2), 't2', 'starting') ->> 'category',
          'session_replaced', 'stale/other generation -> session_replaced');
SELECT is(pg_temp.ack(:w1args, :'s2', 1, pg_temp.offer(2), 't2', 'starting') ->> 'category',
          'session_replaced', 'another session id -> session_replaced');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'conflicts write nothing');

-- expired unstarted lease
SELECT ql_test.expire_lease(pg_temp.offer(3));
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(3), 't3', 'starting') ->> 'category',
          'lease_expired', 'starting on an expired unstarted lease -> lease_expired');
RESET ROLE;
SELECT is(pg_temp.states(:'r3'), 'dispatching/claimed/live', 'the expired lease was not started');

-- expired started lease: the sweeper owns it, no more ACKs
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(4), 't4', 'starting') ->> 'status', 'ok',
          'starting lease 4');
RESET ROLE;
SELECT ql_test.expire_lease(pg_temp.offer(4));
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(4), 't4', 'running') ->> 'category',
          'lease_expired', 'running on an expired started lease -> lease_expired');
RESET ROLE;

-- released by cancellation -> lease_terminal
SELECT ql.cancel_run(:'r5');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(5), 't5', 'starting') ->> 'category',
          'lease_terminal', 'a lease released by cancel -> lease_terminal');
RESET ROLE;

-- attempt changed / revision drift behind the lease's back
UPDATE ql_private.attempts SET state = 'failed' WHERE run_id = :'r6'::uuid;
SELECT ql_test.publish('proj', 'task', ql_test.command('["false"]')) ->> 'revisionId' AS rev2 \gset
UPDATE ql_private.runs SET execution_revision_id = :'rev2'::uuid WHERE id = :'r7'::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(6), 't6', 'starting') ->> 'category',
          'attempt_changed', 'attempt no longer claimed -> attempt_changed');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(7), 't7', 'starting') ->> 'category',
          'revision_drift', 'pinned revision changed -> revision_drift');
RESET ROLE;

-- a replaced session: its offers answer session_replaced
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2b \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.ack(:w2args, :'s2', 1, pg_temp.offer(9), 't9', 'starting') ->> 'category',
          'session_replaced', 'the replaced session''s offer -> session_replaced');
SELECT is(pg_temp.ack(:w2args, :'s2b', 2, pg_temp.offer(9), 't9', 'starting') ->> 'category',
          'session_replaced', 'the new session cannot adopt the old offer');
RESET ROLE;

-- 6. start_failed from an unstarted lease: retry scheduled
UPDATE ql_private.tasks SET retry_base_ms = 1000, retry_cap_ms = 1000 WHERE id = :'task'::uuid;
-- The policy is pinned on each attempt when it is created (SPEC 9.1): the
-- attempts already queued get it too (fixture shortcut).
UPDATE ql_private.attempts a SET retry_base_ms = 1000, retry_cap_ms = 1000
  FROM ql_private.runs r WHERE r.id = a.run_id AND r.task_id = :'task'::uuid;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'start_failed', 'image_missing') AS sf \gset
RESET ROLE;
SELECT is(:'sf'::jsonb ->> 'status', 'ok', 'start_failed -> ok');
SELECT is(:'sf'::jsonb #>> '{lease,state}', 'failed', 'the lease''s attempt is failed');
SELECT is(:'sf'::jsonb #>> '{lease,leaseVersion}', '2', 'start_failed bumps the version too');
SELECT results_eq(
    format($$SELECT a.state, a.reason, a.finished_at IS NOT NULL, l.release_reason
               FROM ql_private.attempts a JOIN ql_private.run_leases l ON l.attempt_id = a.id
              WHERE l.offer_id = %L$$, pg_temp.offer(2)),
    $$VALUES ('failed'::text, 'image_missing'::text, true, 'start_failed'::text)$$,
    'attempt failed with the reason, lease released start_failed');
SELECT results_eq(
    format($$SELECT r.state, a.attempt_no, a.state, a.not_before > clock_timestamp(),
                    a.not_before <= clock_timestamp() + interval '1 second'
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'r2'),
    $$VALUES ('queued'::text, 2, 'claimed'::text, true, true)$$,
    'retry: attempt 2 claimed with a jittered not_before, run queued');
SELECT is(pg_temp.events(:'r2'), ARRAY['run.queued', 'run.dispatched', 'attempt.failed', 'run.retry_scheduled'],
          'attempt.failed then run.retry_scheduled');
SELECT ok(NOT EXISTS (SELECT 1 FROM ql_private.candidate_page(NULL, NULL, NULL, 64) c WHERE c.run_id = :'r2'::uuid),
          'the retried run is no candidate before not_before');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'start_failed', 'image_missing', 1) AS sf2 \gset
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'start_failed', 'other', 1) ->> 'category',
          'lease_terminal', 'start_failed with another reason -> lease_terminal');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'start_failed', 'image_missing', 2) ->> 'category',
          'lease_terminal', 'start_failed at the released version -> lease_terminal');
SELECT is(pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(2), 't2', 'starting') ->> 'category',
          'lease_terminal', 'starting after start_failed -> lease_terminal');
RESET ROLE;
SELECT is(:'sf2'::jsonb ->> 'status', 'idempotent', 'exact start_failed replay -> idempotent');
SELECT is(:'sf2'::jsonb -> 'lease', :'sf'::jsonb -> 'lease', 'the same projection');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'replays and conflicts after start_failed wrote nothing');

-- 7. start_failed from starting, attempts exhausted: run failed; default reason
UPDATE ql_private.tasks SET max_attempts = 1 WHERE id = :'task'::uuid;
-- The policy is pinned on each attempt when it is created (SPEC 9.1): the
-- attempts already queued get it too (fixture shortcut).
UPDATE ql_private.attempts a SET max_attempts = 1
  FROM ql_private.runs r WHERE r.id = a.run_id AND r.task_id = :'task'::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(8), 't8', 'starting');
SELECT pg_temp.ack(:w1args, :'s1', 1, pg_temp.offer(8), 't8', 'start_failed') AS sf8 \gset
RESET ROLE;
SELECT is(:'sf8'::jsonb #>> '{lease,state}', 'failed', 'start_failed from starting -> failed');
SELECT results_eq(
    format($$SELECT r.state, r.finished_at IS NOT NULL, a.reason,
                    (SELECT count(*) FROM ql_private.attempts x WHERE x.run_id = r.id)
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'r8'),
    $$VALUES ('failed'::text, true, 'start_failed'::text, 1::bigint)$$,
    'no attempts left: run failed, default reason start_failed, no new attempt');
SELECT is(pg_temp.events(:'r8'), ARRAY['run.queued', 'run.dispatched', 'run.starting', 'attempt.failed', 'run.failed'],
          'attempt.failed then run.failed');

-- 8. denial and bad input
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.ack_lease(:'c1', sha256('nope'), :'w1', :'s1', 1, pg_temp.offer(1), ql_test.token_digest('t1'), 3, 'running'),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb, 'wrong secret -> denied envelope');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L)', :'w1args', :'s1', 't1', 'stopped'),
                 'QL001', NULL, 'unknown phase -> QL001');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L, %L)', :'w1args', :'s1', 't1', 'running', 'why'),
                 'QL001', NULL, 'a reason with running -> QL001');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L, %L)', :'w1args', :'s1', 't1', 'start_failed', 'No Space!'),
                 'QL001', NULL, 'a free-text reason -> QL001');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 0, pg_temp.offer(1), %L, %L)', :'w1args', :'s1', 't1', 'running'),
                 'QL001', NULL, 'generation 0 -> QL001');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, %L, %L, %L)', :'w1args', :'s1', 'NOT-A-UUID', 't1', 'running'),
                 'QL001', NULL, 'malformed offer id -> QL001');
SELECT throws_ok(format('SELECT ql.ack_lease(%s, %L, 1, pg_temp.offer(1), %L, NULL, %L)', :'w1args', :'s1',
                        ql_test.token_digest('t1'), 'running'),
                 'QL001', NULL, 'lease version NULL -> QL001');
SELECT throws_ok(format('SELECT pg_temp.ack(%s, %L, 1, pg_temp.offer(1), %L, %L, NULL, 0)', :'w1args', :'s1', 't1', 'running'),
                 'QL001', NULL, 'lease version 0 -> QL001');
RESET ROLE;

SELECT ok(NOT EXISTS (SELECT 1 FROM ql_private.events
                       WHERE payload::text ~ encode(ql_test.token_digest('t1'), 'hex')),
          'no event carries a token digest');

SELECT * FROM finish();
ROLLBACK;
