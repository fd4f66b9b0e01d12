-- ql.heartbeat_sessions: a batch answers per item exactly what
-- ql.heartbeat_session answers (or the SQLSTATE it raised); one bad item never
-- affects the others; bounds and grants.
BEGIN;
SELECT plan(13);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT worker_id AS w3, credential_id AS c3, secret_digest AS d3 FROM ql_test.new_worker('w3') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS s2 \gset
SELECT ql_test.open_session('w3') ->> 'sessionId' AS s3 \gset
UPDATE ql_private.worker_sessions SET expires_at = clock_timestamp() + interval '5 seconds';

CREATE TEMP TABLE items ON COMMIT DROP AS
SELECT jsonb_build_array(
    jsonb_build_object('credentialId', :'c1', 'secretDigest', encode(:'d1'::bytea, 'hex'),
                       'workerId', :'w1', 'sessionId', :'s1', 'generation', 1),
    -- bad secret -> denied envelope (and its audit row)
    jsonb_build_object('credentialId', :'c2', 'secretDigest', encode(ql_test.secret_digest('nope'), 'hex'),
                       'workerId', :'w2', 'sessionId', :'s2', 'generation', 1),
    -- wrong generation -> QL011
    jsonb_build_object('credentialId', :'c3', 'secretDigest', encode(:'d3'::bytea, 'hex'),
                       'workerId', :'w3', 'sessionId', :'s3', 'generation', 7),
    -- malformed session id -> QL001
    jsonb_build_object('credentialId', :'c3', 'secretDigest', encode(:'d3'::bytea, 'hex'),
                       'workerId', :'w3', 'sessionId', 'not-a-uuid', 'generation', 1),
    jsonb_build_object('credentialId', :'c3', 'secretDigest', encode(:'d3'::bytea, 'hex'),
                       'workerId', :'w3', 'sessionId', :'s3', 'generation', 1)) AS v;

SELECT v AS items FROM items \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.heartbeat_sessions(:'items'::jsonb) AS out \gset
RESET ROLE;
SELECT is(jsonb_array_length(:'out'::jsonb), 5, 'one answer per item');
SELECT is(:'out'::jsonb -> 0, jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(
              (SELECT ws FROM ql_private.worker_sessions ws WHERE session_id = :'s1'::uuid))),
          'item 1: exactly heartbeat_session''s answer');
SELECT is(:'out'::jsonb -> 1, '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb,
          'item 2: the denial envelope');
SELECT is(:'out'::jsonb -> 2, '{"status":"error","sqlstate":"QL011"}'::jsonb, 'item 3: QL011 as an item error');
SELECT is(:'out'::jsonb -> 3, '{"status":"error","sqlstate":"QL001"}'::jsonb, 'item 4: QL001 as an item error');
SELECT is(:'out'::jsonb -> 4 ->> 'status', 'ok', 'item 5 (after failing items of the same worker): ok');
SELECT ok((SELECT bool_and(expires_at > clock_timestamp() + interval '55 seconds')
             FROM ql_private.worker_sessions WHERE session_id IN (:'s1'::uuid, :'s3'::uuid)),
          'the good items were extended');
SELECT ok((SELECT expires_at < clock_timestamp() + interval '6 seconds'
             FROM ql_private.worker_sessions WHERE session_id = :'s2'::uuid),
          'the denied item was not');
SELECT is((SELECT reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1), 'bad_secret',
          'the denial is audited as by the single call');

SELECT throws_ok($$SELECT ql.heartbeat_sessions('{}'::jsonb)$$, 'QL001', NULL, 'not an array: QL001');
SELECT throws_ok($$SELECT ql.heartbeat_sessions('[]'::jsonb)$$, 'QL001', NULL, 'empty: QL001');
SELECT throws_ok($$SELECT ql.heartbeat_sessions((SELECT jsonb_agg('{}'::jsonb) FROM generate_series(1, 65)))$$,
                 'QL002', NULL, 'more than 64 items: QL002');
SELECT function_privs_are('ql', 'heartbeat_sessions', ARRAY['jsonb'], 'ql_worker_ingress',
                          ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.heartbeat_sessions');

SELECT * FROM finish();
ROLLBACK;
