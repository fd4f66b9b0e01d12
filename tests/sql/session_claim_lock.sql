-- ql_private.session_claim_lock: lock the session row right before a pull's
-- first claim, re-verify it on the locked row (QL010-QL013, QL015 from
-- session_fence; QL014 when the capabilities digest drifted since the pull read
-- it) and answer whether a slot is free (started leases and unexpired unstarted
-- ones count; expired unstarted and released ones do not).
BEGIN;
SELECT plan(16);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(2)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(2)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3 FROM ql_test.enqueue(:'task', 3, 0) r \gset

-- lock(session [, change]): the call with the session row as read now, changed
-- the way a stale or forged row would be ('digest', 'generation', 'worker').
CREATE FUNCTION pg_temp.lock(session text, change text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    s ql_private.worker_sessions;
BEGIN
    SELECT * INTO STRICT s FROM ql_private.worker_sessions ws WHERE ws.session_id = session::uuid;
    CASE change
        WHEN 'digest' THEN s.capabilities_digest := 'sha256:' || repeat('0', 64);
        WHEN 'generation' THEN s.generation := s.generation + 1;
        WHEN 'worker' THEN s.worker_id := gen_random_uuid();
        ELSE NULL;
    END CASE;
    RETURN ql_private.session_claim_lock(s);
END
$$;
CREATE FUNCTION pg_temp.row_locked(session text) RETURNS boolean LANGUAGE sql AS $$
    SELECT ws.xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
      FROM ql_private.worker_sessions ws WHERE ws.session_id = session::uuid
$$;

-- 1. Slots.
SELECT ok(NOT pg_temp.row_locked(:'s1'), 'before: the session row carries no lock of ours');
SELECT is(pg_temp.lock(:'s1'), true, 'no lease, two slots: a slot is free');
SELECT ok(pg_temp.row_locked(:'s1'), '... and the session row is now locked by this transaction');
SELECT ql_test.fake_lease(:'r1', :'s1', true) AS o1 \gset
SELECT is(pg_temp.lock(:'s1'), true, 'one started lease of two slots: free');
SELECT ql_test.fake_lease(:'r2', :'s1', false) AS o2 \gset
SELECT is(pg_temp.lock(:'s1'), false, 'a started and an unexpired unstarted lease fill two slots');
SELECT ql_test.expire_lease(:'o2');
SELECT is(pg_temp.lock(:'s1'), true, 'the unstarted lease expired: it no longer counts');
SELECT ql_test.expire_lease(:'o1');
SELECT ql_test.fake_lease(:'r3', :'s1', false);
SELECT is(pg_temp.lock(:'s1'), false, 'a started lease past its expiry still counts (the sweeper owns it)');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o1'::uuid;
SELECT is(pg_temp.lock(:'s1'), true, 'a released lease does not count');

-- 2. The re-verified fences, on the locked row.
SELECT throws_ok(format('SELECT pg_temp.lock(%L, %L)', :'s1', 'digest'), 'QL014',
                 'session capabilities changed during the pull',
                 'capabilities digest drifted since the pull read the row -> QL014');
SELECT throws_ok(format('SELECT pg_temp.lock(%L, %L)', :'s1', 'generation'), 'QL011', 'session_replaced',
                 'another generation -> QL011');
SELECT throws_ok(format('SELECT pg_temp.lock(%L, %L)', :'s1', 'worker'), 'QL010', 'session_not_found',
                 'another worker''s session -> QL010');
UPDATE ql_private.worker_sessions SET state = 'draining' WHERE session_id = :'s2'::uuid;
SELECT throws_ok(format('SELECT pg_temp.lock(%L)', :'s2'), 'QL015', 'session_draining',
                 'draining -> QL015');
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp()
 WHERE session_id = :'s2'::uuid;
SELECT throws_ok(format('SELECT pg_temp.lock(%L)', :'s2'), 'QL013', 'session_closed',
                 'closed -> QL013');
SELECT ql_test.expire_session(:'s1');
SELECT throws_ok(format('SELECT pg_temp.lock(%L)', :'s1'), 'QL012', 'session_expired',
                 'expired -> QL012');

SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.session_claim_lock(ql_private.worker_sessions)', 'EXECUTE'),
          'ql_worker_ingress may not execute it');
SELECT ok(NOT has_function_privilege('ql_runtime',
              'ql_private.session_claim_lock(ql_private.worker_sessions)', 'EXECUTE'),
          'nor may ql_runtime');

SELECT * FROM finish();
ROLLBACK;
