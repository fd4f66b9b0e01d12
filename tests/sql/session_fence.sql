-- ql_private.session_fence: the row when every fence holds, each SQLSTATE in
-- its documented order, and the lock modes (none vs FOR NO KEY UPDATE).
BEGIN;
SELECT plan(20);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS other \gset
SELECT format('SELECT ql_private.session_fence(%L::uuid, %%L::uuid, %%s, %%L::boolean)', :'w1') AS fence \gset

SELECT is((ql_private.session_fence(:'w1'::uuid, :'s1'::uuid, 1, false)).session_id, :'s1'::uuid,
          'active, owned, exact generation, unexpired: returns the row');
SELECT is((SELECT xmax::text FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid), '0',
          'lock = false leaves no row lock');
SELECT is((ql_private.session_fence(:'w1'::uuid, :'s1'::uuid, 1, true)).generation, 1::bigint,
          'lock = true returns the row too');
SELECT is((SELECT xmax::text FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid),
          (txid_current() % 4294967296)::text,
          'lock = true leaves this transaction''s row lock on the session');

SELECT throws_ok(format(:'fence', gen_random_uuid(), 1, false), 'QL010', NULL, 'unknown session -> QL010');
SELECT throws_ok(format(:'fence', :'other', 1, false), 'QL010', NULL,
                 'another worker''s session looks missing -> QL010');
SELECT throws_ok(format(:'fence', :'s1', 2, false), 'QL011', NULL, 'generation differs -> QL011');
SELECT throws_ok(format(:'fence', :'s1', 0, false), 'QL001', NULL, 'generation 0 -> QL001');
SELECT throws_ok(format(:'fence', :'s1', 'NULL', false), 'QL001', NULL, 'generation NULL -> QL001');
SELECT throws_ok(format('SELECT ql_private.session_fence(NULL, %L::uuid, 1, false)', :'s1'), 'QL001', NULL,
                 'NULL worker -> QL001');

SELECT ql_test.expire_session(:'s1');
SELECT throws_ok(format(:'fence', :'s1', 1, false), 'QL012', NULL, 'expired -> QL012');
SELECT throws_ok(format(:'fence', :'s1', 1, true), 'QL012', NULL, 'expired -> QL012 (lock = true)');
SELECT throws_ok(format(:'fence', :'s1', 2, false), 'QL011', NULL,
                 'generation is checked before expiry -> QL011');

UPDATE ql_private.worker_sessions SET state = 'draining' WHERE session_id = :'s1'::uuid;
SELECT throws_ok(format(:'fence', :'s1', 1, false), 'QL012', NULL,
                 'draining and expired -> QL012 (a lapsed drain is over: the worker re-opens)');
UPDATE ql_private.worker_sessions SET expires_at = clock_timestamp() + interval '1 minute'
 WHERE session_id = :'s1'::uuid;
SELECT throws_ok(format(:'fence', :'s1', 1, true), 'QL015', NULL,
                 'draining, unexpired -> QL015 session_draining (no claim, no new offer)');
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp()
 WHERE session_id = :'s1'::uuid;
SELECT throws_ok(format(:'fence', :'s1', 1, false), 'QL013', NULL, 'closed, not replaced -> QL013');

SELECT ql_test.open_session('w1') ->> 'sessionId' AS s2 \gset
SELECT throws_ok(format(:'fence', :'s1', 1, false), 'QL011', NULL,
                 'closed with a newer generation -> QL011 session_replaced');
SELECT throws_ok(format(:'fence', :'s1', 1, true), 'QL011', NULL, 'same with lock = true');
SELECT is((ql_private.session_fence(:'w1'::uuid, :'s2'::uuid, 2, true)).state, 'active',
          'the replacement passes the fence');
SELECT throws_ok(format(:'fence', :'s2', 1, false), 'QL011', NULL,
                 'replacement with a stale generation -> QL011');

SELECT * FROM finish();
ROLLBACK;
