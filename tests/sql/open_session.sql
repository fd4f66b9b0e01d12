-- ql.open_session: admission, the session@v1 projection, replacement
-- (generation + 1, old closed, its unstarted leases released), denial, and
-- refusal of bad capability bytes before anything is written.
BEGIN;
SELECT plan(35);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.capabilities(3, '{"region":"eu-1"}', '{"python":"3.11.4"}') AS caps \gset
SELECT ql_test.secret_digest('nope') AS bad \gset

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.open_session(:'c1', :'d1', :'w1', :'caps') AS o1 \gset
RESET ROLE;

SELECT is(:'o1'::jsonb ->> 'status', 'ok', 'ingress role opens a session');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'o1'::jsonb -> 'session') k),
          ARRAY['capabilitiesDigest', 'expiresAtMs', 'generation', 'heartbeatIntervalMs',
                'sessionId', 'workerId'],
          'projection has exactly the session@v1 fields');
SELECT is(:'o1'::jsonb #>> '{session,workerId}', :'w1', 'workerId');
SELECT is((:'o1'::jsonb #>> '{session,generation}')::bigint, 1::bigint, 'first session is generation 1');
SELECT is(:'o1'::jsonb #>> '{session,capabilitiesDigest}',
          'sha256:' || encode(sha256(:'caps'::bytea), 'hex'),
          'capabilitiesDigest is sha256 of the exact bytes');
SELECT is((:'o1'::jsonb #>> '{session,heartbeatIntervalMs}')::integer,
          (SELECT heartbeat_interval_ms FROM ql_private.settings()), 'heartbeatIntervalMs from settings');
SELECT ok((:'o1'::jsonb #>> '{session,expiresAtMs}')::bigint
              BETWEEN ql_private.epoch_ms(clock_timestamp()) + 55000
                  AND ql_private.epoch_ms(clock_timestamp()) + 60000,
          'expiresAtMs is about now + session TTL');
SELECT results_eq(
    format($$SELECT state, slots, capabilities_canonical, capabilities ->> 'schema', closed_at IS NULL
               FROM ql_private.worker_sessions WHERE session_id = %L$$, :'o1'::jsonb #>> '{session,sessionId}'),
    format($$VALUES ('active'::text, 3, %L::bytea, 'qinglong/worker-capabilities@v1'::text, true)$$, :'caps'),
    'stored row: active, slots from capabilities, the exact canonical bytes');

-- Replacement: leases of session 1, one unstarted and one started.
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS run_a, r[2] AS run_b FROM ql_test.enqueue(:'task', 2) r \gset
SELECT ql_test.fake_lease(:'run_a', :'o1'::jsonb #>> '{session,sessionId}', false) AS offer_a \gset
SELECT ql_test.fake_lease(:'run_b', :'o1'::jsonb #>> '{session,sessionId}', true) AS offer_b \gset

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.open_session(:'c1', :'d1', :'w1', :'caps') AS o2 \gset
RESET ROLE;
SELECT is((:'o2'::jsonb #>> '{session,generation}')::bigint, 2::bigint, 're-open: generation + 1');
SELECT isnt(:'o2'::jsonb #>> '{session,sessionId}', :'o1'::jsonb #>> '{session,sessionId}',
            're-open: a new session id');
SELECT results_eq(
    format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$,
           :'o1'::jsonb #>> '{session,sessionId}'),
    $$VALUES ('closed'::text, true)$$, 'the old session is closed');
SELECT is((SELECT count(*) FROM ql_private.worker_sessions WHERE worker_id = :'w1'::uuid AND state = 'active'),
          1::bigint, 'exactly one active session');
SELECT results_eq(
    format($$SELECT release_reason, released_at IS NOT NULL FROM ql_private.run_leases WHERE offer_id = %L$$, :'offer_a'),
    $$VALUES ('session_replaced'::text, true)$$, 'its unstarted lease is released session_replaced');
SELECT results_eq(
    format($$SELECT release_reason, released_at IS NULL FROM ql_private.run_leases WHERE offer_id = %L$$, :'offer_b'),
    $$VALUES (NULL::text, true)$$, 'its started lease stays live');
SELECT ql_test.open_session('w1') ->> 'generation' AS g3 \gset
SELECT is(:'g3'::bigint, 3::bigint, 'a third open: generation 3');
SELECT is(ql_test.open_session('w2') ->> 'generation', '1', 'generations are per worker');

-- Denial: envelope, one audit row, no session.
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.open_session(:'c1', :'bad', :'w1', :'caps'),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb, 'bad secret -> denied');
SELECT is(ql.open_session(:'c1', :'d1', :'w2', :'caps') ->> 'httpStatus', '403',
          'credential of another worker -> 403');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 2::bigint, 'denials wrote only their two audit rows');
SELECT is((SELECT array_agg(action || ':' || reason ORDER BY id) FROM ql_private.security_audit),
          ARRAY['session.open:bad_secret', 'session.open:worker_mismatch'], 'audited as session.open');
SELECT is((SELECT count(*) FROM ql_private.worker_sessions WHERE worker_id = :'w1'::uuid), 3::bigint,
          'no session created by a denied open');

-- Bad bytes: refused with the documented SQLSTATE, before any write.
SELECT ql_test.mark();
SELECT format('SELECT ql.open_session(%L, %L::bytea, %L, %%L::bytea)', :'c1', :'d1', :'w1') AS call \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'call', '\xff'::bytea), 'QL001', NULL, 'invalid UTF-8 -> QL001');
SELECT throws_ok(format(:'call', convert_to('{"schema":', 'UTF8')), 'QL001', NULL, 'not JSON -> QL001');
SELECT throws_ok(format(:'call', convert_to('[1,2]', 'UTF8')), 'QL001', NULL, 'not an object -> QL001');
SELECT throws_ok(format(:'call', convert_to(
    '{"executors":["remote-worker"],"labels":{"a":"1","a":"2"},"runtimes":{},"schema":"qinglong/worker-capabilities@v1","slots":1}', 'UTF8')),
    'QL001', NULL, 'duplicate key (nested) -> QL001');
SELECT throws_ok(format(:'call', convert_to(
    '{"executors":["remote-worker"],"labels":{},"runtimes":{},"schema":"qinglong/worker-capabilities@v1","slots":1,"slots":2}', 'UTF8')),
    'QL001', NULL, 'duplicate top-level key -> QL001');
SELECT throws_ok(format(:'call', convert_to('{"pad":"' || repeat('x', 16400) || '"}', 'UTF8')),
    'QL002', NULL, 'over 16 KiB -> QL002');
SELECT throws_ok(format(:'call', NULL), 'QL001', NULL, 'NULL bytes -> QL001');
SELECT throws_ok(format(:'call', convert_to(
    '{"executors":["remote-worker"],"labels":{},"runtimes":{},"schema":"qinglong/worker-capabilities@v1","slots":1,"x":1}', 'UTF8')),
    'QL001', NULL, 'unknown capabilities field -> QL001');
SELECT throws_ok(format(:'call', convert_to(
    '{"executors":["remote-worker"],"labels":{},"runtimes":{},"schema":"qinglong/worker-capabilities@v1","slots":300}', 'UTF8')),
    'QL002', NULL, 'slots above 256 -> QL002');
SELECT throws_ok(format(:'call', convert_to(
    '{"executors":["remote-worker"],"labels":{},"runtimes":{"python":"3.11"},"schema":"qinglong/worker-capabilities@v1","slots":1}', 'UTF8')),
    'QL003', NULL, 'runtime version not SemVer -> QL003');
SELECT throws_ok(format('SELECT ql.open_session(%L, %L::bytea, %L, %L::bytea)', :'c1', :'d1', 'W1', :'caps'),
    'QL001', NULL, 'malformed worker id -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused opens wrote nothing');
SELECT is((SELECT count(*) FROM ql_private.worker_sessions WHERE worker_id = :'w1'::uuid AND state = 'active'),
          1::bigint, 'the active session survived every refused open');
SELECT is((SELECT generation FROM ql_private.worker_sessions WHERE worker_id = :'w1'::uuid AND state = 'active'),
          3::bigint, 'and it is still generation 3');

SELECT * FROM finish();
ROLLBACK;
