-- ql_private.claim_candidate: the atomic claim of SPEC §3.3 step 3 — the first
-- candidate of the list that still passes every fence on its locked rows
-- (state, runtime-owned, cancel, due, attempt state/executor/not_before, pool
-- grant, a dispatching run only with an expired unstarted lease), what it
-- writes (lease with generation, score, TTL and log cap pinned; run ->
-- dispatching, due_at cleared; one run.dispatched event), its (offer,
-- consumed, locked) answer, and the offer equal to the replay's projection.
-- The SKIP LOCKED race itself needs two connections: tests/py/test_pull_offer.py.
BEGIN;
SELECT plan(37);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT ql.configure_task(:'task', p_lease_ttl_s => 45, p_log_limit_bytes => 65536);
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6, r[7] AS r7, r[8] AS r8
  FROM ql_test.enqueue(:'task', 8, 0) r \gset

-- cc(session, runs, scores [, offer]) -> (offer, consumed, locked) of one claim.
CREATE FUNCTION pg_temp.cc(session text, runs text[], scores integer[],
                           offer uuid DEFAULT gen_random_uuid())
RETURNS TABLE (offer jsonb, consumed integer, locked boolean) LANGUAGE sql AS $$
    SELECT c.offer, c.consumed, c.locked
      FROM ql_private.worker_sessions ws
     CROSS JOIN LATERAL ql_private.claim_candidate(ws, runs::uuid[], scores, offer,
                                                   sha256('tok'::bytea)) c
     WHERE ws.session_id = session::uuid
$$;
CREATE FUNCTION pg_temp.leases() RETURNS integer LANGUAGE sql AS $$
    SELECT count(*)::integer FROM ql_private.run_leases $$;

SELECT has_function('ql_private', 'claim_candidate',
                    ARRAY['ql_private.worker_sessions', 'uuid[]', 'integer[]', 'uuid', 'bytea'],
                    'ql_private.claim_candidate(worker_sessions, uuid[], integer[], uuid, bytea) exists');

-- 1. Nothing to claim: an empty list, and a list of non-candidates.
SELECT is((SELECT row(c.offer, c.consumed, c.locked)::text FROM pg_temp.cc(:'s1', '{}', '{}') c),
          row(NULL::jsonb, 0, false)::text, 'empty list -> (NULL, 0, false)');
UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'r1'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() + interval '1 hour'
 WHERE run_id = :'r2'::uuid;
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour' WHERE id = :'r3'::uuid;
UPDATE ql_private.runs SET runtime_owned = false WHERE id = :'r4'::uuid;
SELECT ql_test.mark();
SELECT is((SELECT row(c.offer, c.consumed, c.locked)::text
             FROM pg_temp.cc(:'s1', ARRAY[:'r1', :'r2', :'r3', :'r4'], '{1,2,3,4}') c),
          row(NULL::jsonb, 4, false)::text,
          'cancel-requested, not_before ahead, not yet due, not runtime-owned: none locked, all consumed');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing written');

-- 2. The first passing candidate is claimed; the ones before it are consumed.
SELECT * FROM pg_temp.cc(:'s1', ARRAY[:'r1', :'r2', :'r5', :'r6'], '{1,2,7,9}',
                         '00000000-0000-4000-8000-000000000001') \gset c_
SELECT is(:'c_offer'::jsonb #>> '{candidate,runId}', :'r5', 'the first passer in list order is claimed');
SELECT is(:'c_consumed'::integer, 3, 'consumed = its position (two passed over before it)');
SELECT is(:'c_locked'::boolean, true, 'locked: one claim attempt');
SELECT is(:'c_offer'::jsonb ->> 'placementScore', '7', 'its score is the one at its position');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).lease_generation, 1,
          'lease generation 1 for a first claim');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).token_digest, sha256('tok'::bytea),
          'the lease stores the token digest');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).lease_ttl_seconds, 45,
          'the task''s lease TTL is pinned on the lease');
SELECT is((SELECT expires_at - claimed_at FROM ql_private.run_leases
            WHERE offer_id = '00000000-0000-4000-8000-000000000001'), interval '45 seconds',
          '... and expires_at = claimed_at + TTL');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).log_limit_bytes::bigint, 65536::bigint,
          'the task''s log limit is pinned on the lease');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).placement_score, 7,
          'the score is stored on the lease');
SELECT is((SELECT session_generation || '/' || worker_id FROM ql_private.run_leases
            WHERE offer_id = '00000000-0000-4000-8000-000000000001'), '1/' || :'w1',
          'the lease names the session''s worker and generation');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r5'::uuid), 'dispatching', 'run -> dispatching');
SELECT is((SELECT state FROM ql_private.attempts WHERE run_id = :'r5'::uuid), 'claimed',
          'the attempt stays claimed');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'run.dispatched' AND run_id = :'r5'::uuid),
          jsonb_build_object('offerId', '00000000-0000-4000-8000-000000000001', 'workerId', :'w1',
                             'sessionId', :'s1', 'sessionGeneration', 1, 'leaseGeneration', 1,
                             'placementScore', 7,
                             'contentDigest', (ql_test.lease('00000000-0000-4000-8000-000000000001')).content_digest),
          'exactly one run.dispatched event, with the lease''s facts');
SELECT is(:'c_offer'::jsonb,
          ql_private.offer_projection((ql_test.lease('00000000-0000-4000-8000-000000000001')).id),
          'the offer equals the replay''s projection of the durable lease');
SELECT ok(NOT (:'c_offer'::text ~ encode(sha256('tok'::bytea), 'hex')), 'the offer never carries the token digest');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r6'::uuid), 'queued', 'the candidate after it is untouched');

-- 3. A dispatching run: passed over while its offer is live ...
SELECT ql_test.mark();
SELECT is((SELECT row(c.offer IS NULL, c.consumed, c.locked)::text FROM pg_temp.cc(:'s1', ARRAY[:'r5'], '{0}') c),
          row(true, 1, false)::text, 'a dispatching run with a live offer: not locked, consumed');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... nothing written');
-- ... a started one never ...
SELECT ql_test.fake_lease(:'r7', :'s1', true) AS started \gset
SELECT ql_test.expire_lease(:'started');
-- (the run and attempt set back to dispatching/claimed: only the lease's start differs)
UPDATE ql_private.runs SET state = 'dispatching' WHERE id = :'r7'::uuid;
UPDATE ql_private.attempts SET state = 'claimed' WHERE run_id = :'r7'::uuid;
SELECT is((SELECT row(c.consumed, c.locked)::text FROM pg_temp.cc(:'s1', ARRAY[:'r7'], '{0}') c),
          row(1, false)::text,
          'a started lease past expiry (the sweeper''s) is never claimed over, not even locked');
-- ... and claimed again once its offer expired unstarted.
SELECT ql_test.expire_lease('00000000-0000-4000-8000-000000000001');
SELECT * FROM pg_temp.cc(:'s1', ARRAY[:'r5'], '{3}', '00000000-0000-4000-8000-000000000002') \gset e_
SELECT is(:'e_offer'::jsonb #>> '{candidate,runId}', :'r5', 'an offer expired unstarted: claimed again');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000002')).lease_generation, 2,
          '... as lease generation 2');
SELECT is((ql_test.lease('00000000-0000-4000-8000-000000000001')).release_reason, 'expired',
          '... the expired lease released as expired');
SELECT is((SELECT count(*)::integer FROM ql_private.run_leases
            WHERE run_id = :'r5'::uuid AND released_at IS NULL), 1, '... one live lease for the run');

-- 4. A scheduled run that came due: claimed, and due_at cleared.
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'r3'::uuid;
SELECT is((SELECT c.offer #>> '{candidate,runId}' FROM pg_temp.cc(:'s1', ARRAY[:'r3'], '{0}') c), :'r3',
          'a run whose due_at passed is claimed');
SELECT ok((SELECT due_at IS NULL FROM ql_private.runs WHERE id = :'r3'::uuid), '... and its due_at cleared');

-- 5. A run whose current attempt is not `claimed` is no candidate.
UPDATE ql_private.attempts SET state = 'running' WHERE run_id = :'r6'::uuid;
SELECT is((SELECT c.locked FROM pg_temp.cc(:'s1', ARRAY[:'r6'], '{0}') c), false,
          'a queued run whose attempt is not claimed is no candidate');
UPDATE ql_private.attempts SET state = 'claimed' WHERE run_id = :'r6'::uuid;

-- 6. The pool grant (SPEC §13.1), read in the claim statement.
SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT (ql_test.enqueue(:'ta', 1))[1] AS a1 \gset
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w1'::uuid;
SELECT is((SELECT c.locked FROM pg_temp.cc(:'s1', ARRAY[:'a1', :'r8'], '{0,0}') c), false,
          'no all-pools grant and no pool grant: nothing claimed');
SELECT ql.grant_pool(:'w1', 'acme/a');
SELECT * FROM pg_temp.cc(:'s1', ARRAY[:'r8', :'a1'], '{0,0}') \gset g_
SELECT is(:'g_offer'::jsonb #>> '{candidate,runId}', :'a1',
          'a grant of the run''s pool: claimed; the ungranted pool''s run before it passed over');
SELECT is(:'g_consumed'::integer, 2, '... consumed 2');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r8'::uuid), 'queued', '... r8 still queued');

SELECT is(pg_temp.leases(), 5, 'five leases in all (three claims here, the re-claim, the fake one)');

SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.claim_candidate(ql_private.worker_sessions, uuid[], integer[], uuid, bytea)',
              'EXECUTE'), 'ql_worker_ingress may not execute it (only through ql.pull_offer)');

SELECT * FROM finish();
ROLLBACK;
