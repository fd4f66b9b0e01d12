-- ql.heartbeat_session: extends an active session; every fence SQLSTATE; a
-- denial or a fenced heartbeat changes nothing.
BEGIN;
SELECT plan(18);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.secret_digest('nope') AS bad \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS other \gset
SELECT format('SELECT ql.heartbeat_session(%L, %L::bytea, %L, %%L, %%s)', :'c1', :'d1', :'w1') AS hb \gset

-- Age the lease so the extension is visible.
UPDATE ql_private.worker_sessions SET expires_at = clock_timestamp() + interval '5 seconds',
       heartbeat_at = clock_timestamp() - interval '15 seconds'
 WHERE session_id = :'s1'::uuid;
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.heartbeat_session(:'c1', :'d1', :'w1', :'s1', 1) AS h \gset
RESET ROLE;
SELECT is(:'h'::jsonb ->> 'status', 'ok', 'ingress role heartbeats its session');
SELECT is(:'h'::jsonb -> 'session', ql_private.session_projection(
              (SELECT ws FROM ql_private.worker_sessions ws WHERE session_id = :'s1'::uuid)),
          'returns the session projection of the stored row');
SELECT ok((SELECT expires_at > clock_timestamp() + interval '55 seconds'
             FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid),
          'expires_at extended to now + TTL');
SELECT ok((SELECT heartbeat_at > clock_timestamp() - interval '5 seconds'
             FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid),
          'heartbeat_at moved to now');

-- Denied: envelope, audit row, session untouched.
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.heartbeat_session(:'c1', :'bad', :'w1', :'s1', 1),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb, 'bad secret -> denied');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'a denied heartbeat writes only its audit row');
SELECT is((SELECT action FROM ql_private.security_audit ORDER BY id DESC LIMIT 1), 'session.heartbeat',
          'audited as session.heartbeat');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'hb', gen_random_uuid(), 1), 'QL010', NULL, 'unknown session -> QL010');
SELECT throws_ok(format(:'hb', :'other', 1), 'QL010', NULL, 'another worker''s session -> QL010');
SELECT throws_ok(format(:'hb', :'s1', 2), 'QL011', NULL, 'wrong generation -> QL011');
SELECT throws_ok(format(:'hb', :'s1', 0), 'QL001', NULL, 'generation 0 -> QL001');
SELECT throws_ok(format(:'hb', :'s1', 'NULL'), 'QL001', NULL, 'generation NULL -> QL001');
SELECT throws_ok(format(:'hb', upper(:'s1'), 1), 'QL001', NULL, 'malformed session id -> QL001');
RESET ROLE;

SELECT ql_test.expire_session(:'s1');
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'hb', :'s1', 1), 'QL012', NULL, 'expired -> QL012 (not revived)');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'fenced heartbeats wrote nothing');

-- Closed (not replaced) -> QL013; then replaced -> QL011.
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s2 \gset
SELECT ql.close_session(:'c1', :'d1', :'w1', :'s2', 2) ->> 'status' AS closed \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'hb', :'s2', 2), 'QL013', NULL, 'closed session -> QL013');
SELECT throws_ok(format(:'hb', :'s1', 1), 'QL011', NULL,
                 'session closed by a replacement -> QL011 session_replaced');
RESET ROLE;
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s3 \gset
SELECT throws_ok(format(:'hb', :'s2', 2), 'QL011', NULL,
                 'a closed session is replaced once a newer one exists -> QL011');

SELECT * FROM finish();
ROLLBACK;
