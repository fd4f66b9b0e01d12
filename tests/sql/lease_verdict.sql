-- ql_private.lease_verdict: the one fence expression of offer replays (replay
-- rules) and lease ACKs/heartbeats/completions (lifecycle rules), on rows read
-- here the way its callers read them. Each category in its order; the two rules
-- that differ (a started lease past expires_at, a lease released as `lost`)
-- side by side; and ql_private.recover_fence answering exactly the replay rules
-- on every lease of this file.
BEGIN;
SELECT plan(22);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6
  FROM ql_test.enqueue(:'task', 6, 0) r \gset
-- fake_lease: token digest = SHA-256 of the offer id's text; 60 s to expiry.
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s1', true) AS o3 \gset
SELECT ql_test.fake_lease(:'r4', :'s1', false) AS o4 \gset
SELECT ql_test.fake_lease(:'r5', :'s1', false) AS o5 \gset
SELECT ql_test.fake_lease(:'r6', :'s1', false) AS o6 \gset

-- verdict(offer, lifecycle [, worker, generation, token]): the caller's proof
-- defaults to the lease's own (worker, session, generation, token = offer id).
CREATE FUNCTION pg_temp.verdict(offer text, lifecycle boolean, worker uuid DEFAULT NULL,
                                gen bigint DEFAULT NULL, token text DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
    SELECT ql_private.lease_verdict(rl, ws, aa, rr, er.content_digest,
                                    coalesce(worker, rl.worker_id), rl.session_id,
                                    coalesce(gen, rl.session_generation),
                                    ql_test.token_digest(coalesce(token, offer)),
                                    clock_timestamp(), lifecycle)
      FROM ql_private.run_leases rl
      JOIN ql_private.attempts aa ON aa.id = rl.attempt_id
      JOIN ql_private.runs rr ON rr.id = rl.run_id
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = rl.session_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id
     WHERE rl.offer_id = offer::uuid
$$;

-- 1. every fence holds
SELECT is(pg_temp.verdict(:'o1', false), NULL, 'live, unexpired, all fences hold: NULL (replay)');
SELECT is(pg_temp.verdict(:'o1', true), NULL, '... and NULL (lifecycle)');

-- 2. the order: the first failing fence answers
SELECT is(pg_temp.verdict(:'o1', false, gen_random_uuid(), 2, 'wrong'), 'offer_foreign',
          'another worker (token and generation wrong too) -> offer_foreign first');
SELECT is(pg_temp.verdict(:'o1', false, NULL, 2, 'wrong'), 'token_mismatch',
          'wrong token (generation wrong too) -> token_mismatch before session_replaced');
SELECT is(pg_temp.verdict(:'o1', true, NULL, 2), 'session_replaced',
          'another generation -> session_replaced');

-- 3. the two rules that differ: a started lease past expires_at ...
SELECT ql_test.expire_lease(:'o2');
SELECT is(pg_temp.verdict(:'o2', false), NULL,
          'started, past expires_at: a replay still rebuilds the offer');
SELECT is(pg_temp.verdict(:'o2', true), 'lease_expired',
          '... a lifecycle call gets lease_expired (the sweeper owns it)');
-- ... and a lease the sweeper released as lost
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'lost'
 WHERE offer_id = :'o3'::uuid;
SELECT is(pg_temp.verdict(:'o3', false), 'lease_terminal', 'released lost: replay -> lease_terminal');
SELECT is(pg_temp.verdict(:'o3', true), 'lease_expired', '... lifecycle -> lease_expired');

-- 4. the same under both rules
SELECT ql_test.expire_lease(:'o4');
SELECT is(pg_temp.verdict(:'o4', false) || '/' || pg_temp.verdict(:'o4', true),
          'lease_expired/lease_expired', 'unstarted past expires_at -> lease_expired under both');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o5'::uuid;
SELECT is(pg_temp.verdict(:'o5', false) || '/' || pg_temp.verdict(:'o5', true),
          'lease_terminal/lease_terminal', 'released completed -> lease_terminal under both');
UPDATE ql_private.attempts SET state = 'running'
 WHERE id = (ql_test.lease(:'o6')).attempt_id;
SELECT is(pg_temp.verdict(:'o6', true), 'attempt_changed',
          'unstarted lease whose attempt is running -> attempt_changed');
UPDATE ql_private.attempts SET state = 'claimed'
 WHERE id = (ql_test.lease(:'o6')).attempt_id;
UPDATE ql_private.run_leases SET content_digest = 'sha256:' || repeat('0', 64)
 WHERE offer_id = :'o6'::uuid;
SELECT is(pg_temp.verdict(:'o6', true), 'revision_drift',
          'the lease pinned another digest than the revision''s -> revision_drift');

-- 5. recover_fence answers the replay rules on every lease here
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases rl
            WHERE ql_private.recover_fence(rl, rl.worker_id, rl.session_id,
                                           rl.session_generation,
                                           ql_test.token_digest(rl.offer_id::text))
                  IS DISTINCT FROM pg_temp.verdict(rl.offer_id::text, false)),
          0, 'recover_fence = lease_verdict with replay rules, lease by lease');
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases), 6, '... over the six leases');
SELECT is((SELECT string_agg(DISTINCT coalesce(pg_temp.verdict(rl.offer_id::text, false), 'ok'),
                             ',' ORDER BY coalesce(pg_temp.verdict(rl.offer_id::text, false), 'ok'))
             FROM ql_private.run_leases rl),
          'lease_expired,lease_terminal,ok,revision_drift', '... which answer four different ways');

-- 6. a draining session (operator drain): its started leases pass, its
-- unstarted ones (live, or released by the drain) answer session_draining
UPDATE ql_private.worker_sessions SET state = 'draining' WHERE session_id = :'s1'::uuid;
SELECT is(pg_temp.verdict(:'o2', false), NULL,
          'draining session, started lease: a replay still rebuilds the offer');
SELECT is(pg_temp.verdict(:'o6', true), 'session_draining',
          'draining session, unstarted live lease -> session_draining');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'session_closed'
 WHERE offer_id = :'o6'::uuid;
SELECT is(pg_temp.verdict(:'o6', false) || '/' || pg_temp.verdict(:'o6', true),
          'session_draining/session_draining',
          'draining session, unstarted lease released by the drain -> session_draining under both');
SELECT ql_test.fake_lease(:'r6', :'s1', true) AS o7 \gset
UPDATE ql_private.attempts SET state = 'running' WHERE id = (ql_test.lease(:'o7')).attempt_id;
SELECT is(pg_temp.verdict(:'o7', true), NULL,
          'draining session, started lease: ACK, heartbeat and completion pass');
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp()
 WHERE session_id = :'s1'::uuid;
SELECT is(pg_temp.verdict(:'o6', true), 'session_replaced',
          'released session_closed and the session closed -> session_replaced as before');

-- 7. a session that went away fails every lease of it
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp()
 WHERE session_id = :'s1'::uuid;
SELECT is(pg_temp.verdict(:'o1', true), 'session_replaced',
          'its session closed -> session_replaced');

SELECT * FROM finish();
ROLLBACK;
