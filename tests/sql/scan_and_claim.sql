-- ql_private.scan_and_claim: the page loop of a pull (SPEC §3.3 steps 3-4),
-- called directly with a session row as ql.pull_offer does after its fences.
-- Each page source (ready runs, the whole queue while an offer expired unstarted
-- or a scheduled run is due, the class pages after a blocked first page, the
-- pool pages of a worker without the all-pools grant), the idle reasons and
-- stats, truncation, capacity, no writes when idle, the session re-check errors
-- raised only when a claim is attempted, and privileges.
BEGIN;
SELECT plan(45);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT worker_id AS w3 FROM ql_test.new_worker('w3') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(1)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.open_session('w3', ql_test.capabilities(16)) ->> 'sessionId' AS s3 \gset
SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset

-- scan(session, pages, page size, claim attempts [, offer]): one page loop with
-- the session row as stored now (fresh offer id unless given; token 'tok').
CREATE FUNCTION pg_temp.scan(session text, pages integer DEFAULT 2, size integer DEFAULT 8,
                             attempts integer DEFAULT 8, offer uuid DEFAULT gen_random_uuid())
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql_private.scan_and_claim(ws, offer, sha256('tok'::bytea), pages, size, attempts)
      FROM ql_private.worker_sessions ws WHERE ws.session_id = session::uuid
$$;
-- scan_stale(session, digest): the pull's session row as read before a change:
-- another capabilities digest (digest) or another generation (NOT digest).
CREATE FUNCTION pg_temp.scan_stale(session text, digest boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    s ql_private.worker_sessions;
BEGIN
    SELECT * INTO STRICT s FROM ql_private.worker_sessions ws
     WHERE ws.session_id = session::uuid;
    IF digest THEN
        s.capabilities_digest := 'sha256:' || repeat('0', 64);
    ELSE
        s.generation := s.generation + 6;
    END IF;
    RETURN ql_private.scan_and_claim(s, gen_random_uuid(), sha256('x'::bytea), 2, 8, 8);
END
$$;
-- Every queued or offered run leaves the queue (so each section starts empty).
CREATE FUNCTION pg_temp.clear_queue() RETURNS void LANGUAGE sql AS $$
    UPDATE ql_private.runs SET state = 'cancelled' WHERE state IN ('queued', 'dispatching')
$$;

SELECT has_function('ql_private', 'scan_and_claim',
                    ARRAY['ql_private.worker_sessions', 'uuid', 'bytea', 'integer', 'integer',
                          'integer'],
                    'ql_private.scan_and_claim(worker_sessions, uuid, bytea, int, int, int) exists');

-- 1. An empty queue: idle no_candidates after one page, nothing written.
SELECT ql_test.mark();
SELECT pg_temp.scan(:'s1') AS empty \gset
SELECT is(:'empty'::jsonb - 'stats',
          '{"status":"idle","reason":"no_candidates","truncated":false}'::jsonb,
          'empty queue -> idle no_candidates, not truncated');
SELECT is(:'empty'::jsonb -> 'stats',
          '{"pages":1,"candidates":0,"claimAttempts":0,"races":0,'
          '"mismatches":{"executor":0,"label":0,"runtime":0,"capacity":0}}'::jsonb,
          '... one page read, nothing examined, no attempt');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'an idle pull writes nothing');

-- 2. Priority, then queue order; the claim's writes.
SELECT r[1] AS q1, r[2] AS q2 FROM ql_test.enqueue(:'plain', 2, 0) r \gset
SELECT (ql_test.enqueue(:'plain', 1, 3))[1] AS q3 \gset
SELECT pg_temp.scan(:'s1', offer => '00000000-0000-4000-8000-000000000001') AS o1 \gset
SELECT is(:'o1'::jsonb ->> 'status', 'offered', 'a passing candidate is offered');
SELECT is(:'o1'::jsonb #>> '{offer,candidate,runId}', :'q3', 'the higher priority first');
SELECT is(:'o1'::jsonb #>> '{offer,lease,offerId}', '00000000-0000-4000-8000-000000000001',
          'the lease carries the given offer id');
SELECT is((SELECT token_digest FROM ql_private.run_leases WHERE run_id = :'q3'::uuid),
          sha256('tok'::bytea), 'the lease stores the given token digest');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'q3'::uuid), 'dispatching',
          'the offered run is dispatching');
SELECT is((SELECT count(*)::integer FROM ql_private.events
            WHERE type = 'run.dispatched' AND run_id = :'q3'::uuid), 1, 'one run.dispatched event');
SELECT is(pg_temp.scan(:'s1') #>> '{offer,candidate,runId}', :'q1',
          'the next pull: equal priority -> queue order (the older run)');
SELECT pg_temp.clear_queue();

-- 3. Placement mismatch only: idle placement_mismatch with the categories counted.
SELECT ql_test.enqueue(:'gpu', 3, 0);
SELECT ql_test.mark();
SELECT pg_temp.scan(:'s1') AS mm \gset
SELECT is(:'mm'::jsonb ->> 'reason', 'placement_mismatch', 'only blocked candidates -> placement_mismatch');
SELECT is(:'mm'::jsonb #> '{stats,mismatches}',
          '{"executor":0,"label":3,"runtime":0,"capacity":0}'::jsonb,
          '... each blocked candidate counted under its category (label)');
SELECT is((:'mm'::jsonb #>> '{stats,candidates}') || '/' || (:'mm'::jsonb #>> '{stats,pages}'),
          '3/1', '... three candidates examined on one page (no second page: not truncated)');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing written');

-- 4. Truncation: a full page of blocked runs and no class the session matches:
-- the loop ends after the first page (matching_classes is empty), truncated.
SELECT ql_test.enqueue(:'gpu', 3, 0);
SELECT pg_temp.scan(:'s1', 4, 2) AS tr \gset
SELECT is(:'tr'::jsonb ->> 'truncated', 'true', 'a page of limit + 1 rows -> truncated');
SELECT is((:'tr'::jsonb #>> '{stats,pages}') || '/' || (:'tr'::jsonb #>> '{stats,candidates}'),
          '1/2', '... page size 2: two examined; no matching class, so no second page');

-- 5. The class pages: a head of blocked runs is jumped over.
SELECT (ql_test.enqueue(:'plain', 1, 0))[1] AS behind \gset
SELECT is(pg_temp.scan(:'s1', 1, 2) ->> 'reason', 'placement_mismatch',
          'one page of 2 behind a head of 6 blocked runs: idle');
SELECT is(pg_temp.scan(:'s1', 2, 2) #>> '{offer,candidate,runId}', :'behind',
          'two pages: the second reads the session''s classes and offers the run behind the head');
SELECT pg_temp.clear_queue();

-- 6. Capacity: a one-slot session holding a live lease.
SELECT (ql_test.enqueue(:'plain', 1, 0))[1] AS held \gset
SELECT ql_test.fake_lease(:'held', :'s2', true);
SELECT (ql_test.enqueue(:'plain', 1, 0))[1] AS waiting \gset
SELECT pg_temp.scan(:'s2') AS full \gset
SELECT is(:'full'::jsonb ->> 'reason', 'capacity_full', 'no free slot -> idle capacity_full');
SELECT is(:'full'::jsonb #>> '{stats,mismatches,capacity}', '1', '... counted as a capacity mismatch');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'waiting'::uuid), 'queued',
          '... and the candidate stays queued');
SELECT pg_temp.clear_queue();

-- 7. The whole-queue source: an offer that expired unstarted is a candidate again.
SELECT (ql_test.enqueue(:'plain', 1, 0))[1] AS exp \gset
SELECT pg_temp.scan(:'s1') #>> '{offer,lease,offerId}' AS exp_offer \gset
SELECT is(pg_temp.scan(:'s1') ->> 'reason', 'no_candidates',
          'its offer live: the dispatching run is no candidate');
SELECT ql_test.expire_lease(:'exp_offer');
SELECT pg_temp.scan(:'s1') AS again \gset
SELECT is(:'again'::jsonb #>> '{offer,candidate,runId}', :'exp',
          'the offer expired unstarted: the run is offered again');
SELECT is(:'again'::jsonb #>> '{offer,lease,leaseGeneration}', '2', '... under lease generation 2');
SELECT is((ql_test.lease(:'exp_offer')).release_reason, 'expired',
          '... the expired lease released as expired');

-- 8. A scheduled run: not before it is due; then offered with due_at cleared.
SELECT ql.enqueue_runs(:'plain', 0, 1, NULL, 3600000) #>> '{runIds,0}' AS sched \gset
SELECT is(pg_temp.scan(:'s1') ->> 'reason', 'no_candidates', 'a run due in an hour is no candidate');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'sched'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() - interval '1 second'
 WHERE run_id = :'sched'::uuid;
SELECT is(pg_temp.scan(:'s1') #>> '{offer,candidate,runId}', :'sched', 'once due it is offered');
SELECT ok((SELECT due_at IS NULL FROM ql_private.runs WHERE id = :'sched'::uuid),
          '... and its due_at is cleared (a claimed run is never scheduled)');

-- 9. Pools (SPEC §13.1): a worker without the all-pools grant.
SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.create_pool('acme', 'b') ->> 'poolId' AS pb \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
SELECT ql.publish_revision('acme', 'ga', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'),
    'acme/a') ->> 'taskId' AS ga \gset
SELECT (ql_test.enqueue(:'tb', 1, 9))[1] AS b1 \gset
SELECT r[1] AS a1, r[2] AS a2 FROM ql_test.enqueue(:'ta', 2, 0) r \gset
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w3'::uuid;
SELECT ql_test.mark();
SELECT pg_temp.scan(:'s3') AS nogrant \gset
SELECT is(:'nogrant'::jsonb ->> 'reason', 'no_candidates', 'no grant at all -> idle no_candidates');
SELECT is(:'nogrant'::jsonb #>> '{stats,pages}', '0', '... without reading a page');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... nor writing');
SELECT ql.grant_pool(:'w3', 'acme/a');
SELECT is(pg_temp.scan(:'s3') #>> '{offer,candidate,runId}', :'a1',
          'a grant of pool A: A''s oldest run, never B''s higher-priority one');
SELECT is(pg_temp.scan(:'s1') #>> '{offer,candidate,runId}', :'b1',
          '... while an all-pools worker takes B''s run first');
-- The pool x class pages: a blocked head in the worker's own pool is jumped over.
SELECT ql_test.enqueue(:'ga', 4, 5);
SELECT is(pg_temp.scan(:'s3', 1, 2) ->> 'reason', 'placement_mismatch',
          'pool A''s head blocked, one page: idle');
SELECT is(pg_temp.scan(:'s3', 2, 2) #>> '{offer,candidate,runId}', :'a2',
          'two pages: the pool class page offers the run behind the head');
-- The pool page of the whole queue (pool_candidate_page): a due scheduled run
-- of its pool; an offer of its pool that expired unstarted is not read there
-- (the sweeper re-queues it, pool_candidate_page).
SELECT offer_id::text AS a2_offer FROM ql_private.run_leases
 WHERE run_id = :'a2'::uuid AND released_at IS NULL \gset
SELECT ql_test.expire_lease(:'a2_offer');
SELECT is(pg_temp.scan(:'s3') ->> 'reason', 'placement_mismatch',
          'pool worker: its pool''s expired offer is left to the sweeper');
SELECT ql.enqueue_runs(:'ta', 0, 1, NULL, 3600000) #>> '{runIds,0}' AS adue \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'adue'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() - interval '1 second'
 WHERE run_id = :'adue'::uuid;
SELECT is(pg_temp.scan(:'s3') #>> '{offer,candidate,runId}', :'adue',
          '... a scheduled run of its pool that came due is offered');
SELECT pg_temp.clear_queue();

-- 10. The session re-check (claim step only): an idle pull of an expired session
-- answers idle; one that would claim raises.
SELECT ql_test.expire_session(:'s1');
SELECT is(pg_temp.scan(:'s1') ->> 'reason', 'no_candidates',
          'expired session, nothing to claim: idle (no session lock, no error)');
SELECT ql_test.enqueue(:'plain', 1, 0);
SELECT throws_ok(format('SELECT pg_temp.scan(%L)', :'s1'), 'QL012', 'session_expired',
                 'expired session with a candidate: QL012 from the claim''s re-check');
SELECT throws_ok(format('SELECT pg_temp.scan_stale(%L, true)', :'s2'),
                 'QL014', 'session capabilities changed during the pull',
                 'a session row whose capabilities digest changed since the fence: QL014');
SELECT throws_ok(format('SELECT pg_temp.scan_stale(%L, false)', :'s2'),
                 'QL011', 'session_replaced', 'another generation than the stored one: QL011');
SELECT is((SELECT count(*)::integer FROM ql_private.runs WHERE state = 'queued'), 1,
          '... and the candidate is still queued');

-- 11. Privileges: private to the owner; the ingress reaches it only through ql.pull_offer.
SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.scan_and_claim(ql_private.worker_sessions, uuid, bytea, integer, integer, integer)',
              'EXECUTE'), 'ql_worker_ingress may not execute it');
SELECT ok(NOT has_function_privilege('ql_runtime',
              'ql_private.scan_and_claim(ql_private.worker_sessions, uuid, bytea, integer, integer, integer)',
              'EXECUTE'), 'nor may ql_runtime');

SELECT * FROM finish();
ROLLBACK;
