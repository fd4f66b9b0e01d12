-- ql_private.lease_open: the shared opening of ql.ack_lease, ql.heartbeat_lease
-- and ql.complete_lease. One row per call: the lease, its attempt and run and the
-- lease_verdict category (an unknown offer id answers offer_foreign, like another
-- worker's); the lease version fence (current -> the fences' answer, current - 1
-- and the change that made the current version -> replay, otherwise
-- stale_lease_version; a released lease keeps lease_terminal); which rows each
-- lock mode locks (none / the lease only / attempt, run and lease); no writes;
-- QL001 for an unknown lock mode or change or a NULL version. The deadlock the lock
-- order prevents needs two sessions: tests/py/test_lifecycle_concurrency.py.
BEGIN;
SELECT plan(45);
\ir fixtures.psql

SELECT has_function('ql_private', 'lease_open',
                    ARRAY['uuid', 'uuid', 'uuid', 'bigint', 'bytea', 'bigint', 'text', 'text',
                          'ql_private.run_leases'],
                    'ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, bigint, text, text, ql_private.run_leases) exists');
SELECT is((SELECT provolatile::text || prosecdef::text FROM pg_proc
            WHERE oid = 'ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, bigint, text, text, ql_private.run_leases)'::regprocedure),
          'vfalse', 'VOLATILE (it locks rows), not SECURITY DEFINER (runs as its caller, ql_owner)');
SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, bigint, text, text, ql_private.run_leases)', 'EXECUTE'),
          'the ingress cannot call it directly');

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3 FROM ql_test.enqueue(:'task', 3, 0) r \gset
-- fake_lease: token digest = SHA-256 of the offer id's text.
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', false) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s1', true) AS o3 \gset

-- open(offer, worker, session, generation, token, lock) -> the row as text fields,
-- at the lease's current version (a heartbeat); vopen(offer, version, change):
-- the proof holds, the version and change vary.
CREATE FUNCTION pg_temp.open(offer text, worker text, session text, gen bigint, token text,
                             lock text DEFAULT NULL)
RETURNS TABLE (offer_id uuid, attempt_id uuid, run_id uuid, category text)
LANGUAGE sql AS $$
    SELECT (o.lease).offer_id, (o.attempt).id, (o.run).id, o.category
      FROM ql_private.lease_open(offer::uuid, worker::uuid, session::uuid, gen,
                                 ql_test.token_digest(token),
                                 coalesce((ql_test.lease(offer)).lease_version, 1), 'heartbeat',
                                 lock) o
$$;
CREATE FUNCTION pg_temp.vopen(offer text, version bigint, change text) RETURNS text
LANGUAGE sql AS $$
    SELECT o.category
      FROM ql_private.lease_open(offer::uuid, (ql_test.lease(offer)).worker_id,
                                 (ql_test.lease(offer)).session_id, 1, ql_test.token_digest(offer),
                                 version, change) o
$$;
-- Row locks of this transaction, by mode, read with pgrowlocks (contrib; the
-- extension lives only inside this rolled-back transaction).
CREATE EXTENSION pgrowlocks;
CREATE FUNCTION pg_temp.lock_mode(tbl regclass, id_value text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE format('SELECT coalesce((SELECT array_to_string(l.modes, '','') FROM pgrowlocks(%L) l
                                       WHERE l.locked_row = t.ctid), ''none'')
                      FROM %s t WHERE t.%s = %L',
                   tbl::text, tbl, CASE WHEN tbl = 'ql_private.run_leases'::regclass
                                        THEN 'offer_id' ELSE 'id' END, id_value)
       INTO result;
    RETURN result;
END
$$;
CREATE FUNCTION pg_temp.locks(offer text) RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.lock_mode('ql_private.attempts', l.attempt_id::text) || ' / '
           || pg_temp.lock_mode('ql_private.runs', l.run_id::text) || ' / '
           || pg_temp.lock_mode('ql_private.run_leases', offer)
      FROM ql_private.run_leases l WHERE l.offer_id = offer::uuid
$$;
SELECT id::text AS a1 FROM ql_private.attempts WHERE run_id = :'r1'::uuid \gset

-- 1. the proof holds: the rows, no category
SELECT is((SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1')), NULL,
          'live, unexpired, every fence holds: category NULL');
SELECT is((SELECT run_id::text || '/' || attempt_id::text FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1')),
          :'r1' || '/' || :'a1', 'the lease''s own run and attempt');
SELECT is((SELECT count(*)::integer FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1')), 1,
          'exactly one row');

-- 2. fences (ql_private.lease_verdict): the category, with the rows
SELECT is((SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 1, 'other-token')), 'token_mismatch',
          'wrong token digest -> token_mismatch');
SELECT is((SELECT category FROM pg_temp.open(:'o1', :'w2', :'s1', 1, :'o1')), 'offer_foreign',
          'another worker''s offer -> offer_foreign');
SELECT is((SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 2, :'o1')), 'session_replaced',
          'wrong generation -> session_replaced');
SELECT is((SELECT offer_id::text FROM pg_temp.open(:'o1', :'w1', :'s1', 2, :'o1')), :'o1',
          '... and the lease row is still answered (the caller may need it)');

-- 3. an unknown offer id answers exactly like another worker's
SELECT is((SELECT category FROM pg_temp.open(gen_random_uuid()::text, :'w1', :'s1', 1, 'x')),
          'offer_foreign', 'unknown offer id -> offer_foreign');
SELECT is((SELECT count(*)::integer FROM pg_temp.open(gen_random_uuid()::text, :'w1', :'s1', 1, 'x')),
          1, '... in one row');
SELECT is((SELECT coalesce(offer_id::text, 'null') || coalesce(attempt_id::text, 'null')
                  || coalesce(run_id::text, 'null')
             FROM pg_temp.open(gen_random_uuid()::text, :'w1', :'s1', 1, 'x')),
          'nullnullnull', '... with no lease, attempt or run');
SELECT is((SELECT category FROM pg_temp.open(gen_random_uuid()::text, :'w1', :'s1', 1, 'x',
                                              'attempt_run_lease')),
          'offer_foreign', '... also when asked to lock (nothing to lock)');

-- 4. lock modes: NULL locks nothing, 'lease' the lease only (FOR NO KEY UPDATE),
--    'attempt_run_lease' attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE.
--    (Before: the key-share locks of this transaction's own lease inserts.)
SELECT pg_temp.locks(:'o1') AS before1 \gset
SELECT ql_test.mark();
SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1') \gset
SELECT is(pg_temp.locks(:'o1'), :'before1', 'lock NULL: no row lock taken');
SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1', 'lease') \gset
SELECT is(pg_temp.lock_mode('ql_private.run_leases', :'o1'), 'For No Key Update',
          'lock lease: the lease row FOR NO KEY UPDATE');
SELECT is(split_part(pg_temp.locks(:'o1'), ' / ', 1) || ' / ' || split_part(pg_temp.locks(:'o1'), ' / ', 2),
          split_part(:'before1', ' / ', 1) || ' / ' || split_part(:'before1', ' / ', 2),
          '... and neither its attempt nor its run');
SELECT category FROM pg_temp.open(:'o2', :'w1', :'s1', 1, :'o2', 'attempt_run_lease') \gset
SELECT is(pg_temp.locks(:'o2'), 'For Update / For No Key Update / For Update',
          'lock attempt_run_lease: attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'no lock mode writes a row');
SELECT is((SELECT category FROM pg_temp.open(:'o2', :'w1', :'s1', 1, :'o2', 'attempt_run_lease')), NULL,
          'the locked read answers like the unlocked one');

-- 5. expiry and release (the lease-lifecycle rule of lease_verdict)
SELECT ql_test.expire_lease(:'o1');
SELECT is((SELECT category FROM pg_temp.open(:'o1', :'w1', :'s1', 1, :'o1')), 'lease_expired',
          'an unstarted lease past expires_at -> lease_expired');
SELECT ql_test.expire_lease(:'o3');
SELECT is((SELECT category FROM pg_temp.open(:'o3', :'w1', :'s1', 1, :'o3')), 'lease_expired',
          'a started lease past expires_at -> lease_expired too (the sweeper owns it)');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o2'::uuid;
SELECT is((SELECT category FROM pg_temp.open(:'o2', :'w1', :'s1', 1, :'o2')), 'lease_terminal',
          'released by a completion -> lease_terminal (the caller checks for a replay)');
UPDATE ql_private.run_leases SET release_reason = 'lost' WHERE offer_id = :'o2'::uuid;
SELECT is((SELECT category FROM pg_temp.open(:'o2', :'w1', :'s1', 1, :'o2')), 'lease_expired',
          'released as lost by the sweeper -> lease_expired, never lease_terminal');

-- 6. caller bugs
SELECT throws_ok(format('SELECT * FROM ql_private.lease_open(%L, %L, %L, 1, %L, 1, %L, %L)',
                        :'o1', :'w1', :'s1', ql_test.token_digest(:'o1'), 'heartbeat', 'run'),
                 'QL001', NULL, 'unknown lock mode -> QL001');
SELECT throws_ok(format('SELECT * FROM ql_private.lease_open(%L, %L, %L, 1, %L, 1, %L, %L)',
                        gen_random_uuid(), :'w1', :'s1', ql_test.token_digest('x'), 'heartbeat', ''),
                 'QL001', NULL, 'empty lock mode -> QL001 (even for an unknown offer)');
SELECT throws_ok(format('SELECT * FROM ql_private.lease_open(%L, %L, %L, 1, %L, 1, %L)',
                        :'o1', :'w1', :'s1', ql_test.token_digest(:'o1'), 'extend'),
                 'QL001', NULL, 'unknown change -> QL001');
SELECT throws_ok(format('SELECT * FROM ql_private.lease_open(%L, %L, %L, 1, %L, NULL, %L)',
                        :'o1', :'w1', :'s1', ql_test.token_digest(:'o1'), 'heartbeat'),
                 'QL001', NULL, 'NULL lease version -> QL001');

-- 6b. p_seen: the lease row of the caller's first read names the rows to lock
SELECT throws_ok(format('SELECT * FROM ql_private.lease_open(%L, %L, %L, 1, %L, 1, %L, %L, %L::ql_private.run_leases)',
                        :'o1', :'w1', :'s1', ql_test.token_digest(:'o1'), 'heartbeat', 'lease',
                        ql_test.lease(:'o3')),
                 'QL001', NULL, 'p_seen of another offer -> QL001 (nothing locked by mistake)');
SELECT pg_temp.locks(:'o3') AS before3 \gset
SELECT category FROM ql_private.lease_open(:'o3'::uuid, :'w1'::uuid, :'s1'::uuid, 1,
                                          ql_test.token_digest(:'o3'), 1, 'heartbeat',
                                          'attempt_run_lease', ql_test.lease(:'o3')) \gset
SELECT is(pg_temp.locks(:'o3'), 'For Update / For No Key Update / For Update',
          'with p_seen: attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE');
SELECT isnt(:'before3'::text, 'For Update / For No Key Update / For Update'::text,
            '... none of them held before');

-- 7. the version fence: which change made the current version is read off the
--    rows (fresh leases; fake_lease's token = the offer id's text).
SELECT r[1] AS r4, r[2] AS r5, r[3] AS r6 FROM ql_test.enqueue(:'task', 3, 0) r \gset
SELECT ql_test.fake_lease(:'r4', :'s1', false) AS o4 \gset
SELECT ql_test.fake_lease(:'r5', :'s1', true) AS o5 \gset
SELECT ql_test.fake_lease(:'r6', :'s1', true) AS o6 \gset
SELECT is(pg_temp.vopen(:'o4', 1, 'starting'), NULL, 'claimed, version 1 = current: no category');
SELECT is(pg_temp.vopen(:'o4', 2, 'starting'), 'stale_lease_version',
          'a version the lease never had -> stale_lease_version');
-- o5: started (attempt starting) at version 2 by its starting ACK
UPDATE ql_private.run_leases SET lease_version = 2 WHERE offer_id = :'o5'::uuid;
SELECT is(pg_temp.vopen(:'o5', 1, 'starting'), 'replay',
          'version - 1, made by the starting ACK, asked again -> replay');
SELECT is(pg_temp.vopen(:'o5', 1, 'heartbeat'), 'stale_lease_version',
          'version - 1 but another change asked (a heartbeat) -> stale_lease_version');
SELECT is(pg_temp.vopen(:'o5', 2, 'running'), NULL, 'the current version: no category');
-- a heartbeat made version 3
UPDATE ql_private.run_leases SET lease_version = 3, heartbeat_version = 3,
       heartbeat_at = clock_timestamp() WHERE offer_id = :'o5'::uuid;
SELECT is(pg_temp.vopen(:'o5', 2, 'heartbeat'), 'replay', 'heartbeat made it: a heartbeat replays');
SELECT is(pg_temp.vopen(:'o5', 2, 'starting'), 'stale_lease_version',
          '... the starting ACK two versions back does not');
SELECT is(pg_temp.vopen(:'o5', 1, 'starting'), 'stale_lease_version', '... nor at its own version');
-- the running ACK made version 4
UPDATE ql_private.run_leases SET lease_version = 4 WHERE offer_id = :'o5'::uuid;
UPDATE ql_private.attempts SET state = 'running'
 WHERE id = (ql_test.lease(:'o5')).attempt_id;
SELECT is(pg_temp.vopen(:'o5', 3, 'running'), 'replay', 'running ACK made it: it replays');
SELECT is(pg_temp.vopen(:'o5', 3, 'heartbeat'), 'stale_lease_version',
          '... a heartbeat at that version does not (it would extend the lease again)');
-- a completion released it at version 5
UPDATE ql_private.run_leases SET lease_version = 5, released_at = clock_timestamp(),
       release_reason = 'completed' WHERE offer_id = :'o5'::uuid;
SELECT is(pg_temp.vopen(:'o5', 4, 'complete'), 'replay', 'completion made it: it replays');
SELECT is(pg_temp.vopen(:'o5', 3, 'complete'), 'lease_terminal',
          'a released lease at another version keeps lease_terminal');
-- o6: released by a start failure at version 3
UPDATE ql_private.run_leases SET lease_version = 3, released_at = clock_timestamp(),
       release_reason = 'start_failed' WHERE offer_id = :'o6'::uuid;
SELECT is(pg_temp.vopen(:'o6', 2, 'start_failed'), 'replay', 'start failure made it: it replays');
SELECT is(pg_temp.vopen(:'o6', 2, 'complete'), 'lease_terminal',
          '... a completion at that version is lease_terminal');

SELECT * FROM finish();
ROLLBACK;
