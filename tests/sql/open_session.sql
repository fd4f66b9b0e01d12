-- ql.open_session: admission, the session@v1 projection, replacement
-- (generation + 1, old closed, its unstarted leases released), denial, and
-- refusal of bad capability bytes before anything is written.
BEGIN;
SELECT plan(47);
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

-- Granted labels (SPEC §13.2). w1 has self-labels (the fixture): o1 declared
-- region=eu-1, granted to nobody, and was accepted. w3 has only granted labels.
SELECT is((SELECT count(*) FROM ql_private.worker_labels WHERE worker_id = :'w1'::uuid), 0::bigint,
          'self-labels: w1 opened with region=eu-1 declared and nothing granted');
SELECT worker_id AS w3, credential_id AS c3, secret_digest AS d3 FROM ql_test.new_worker('w3') \gset
SELECT ql.label_worker(:'w3', '{"tenant":"bank","zone":"z1"}', p_self_labels => false) IS NOT NULL AS labelled \gset
SELECT set_config('ql_test.w3', :'w3', true) IS NOT NULL AS w3_noted \gset
-- The SQLSTATE and DETAIL (the label key) of w3's open declaring p_labels.
CREATE FUNCTION pg_temp.refusal(p_labels text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
    v_detail text;
BEGIN
    PERFORM ql.open_session(ql_test.credential_id('w3'), ql_test.secret_digest('w3'),
                            current_setting('ql_test.w3'), ql_test.capabilities(2, p_labels));
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_detail = PG_EXCEPTION_DETAIL;
    RETURN v_state || ' ' || v_detail;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.refusal(text) TO ql_worker_ingress;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.open_session(:'c3', :'d3', :'w3', ql_test.capabilities(2, '{"tenant":"bank"}')) ->> 'status', 'ok',
          'granted subset: tenant=bank opens');
SELECT is(ql.open_session(:'c3', :'d3', :'w3', ql_test.capabilities(2, '{"tenant":"bank","zone":"z1"}')) #>> '{session,generation}', '2',
          'all granted labels declared: opens (generation 2)');
SELECT is(ql.open_session(:'c3', :'d3', :'w3', ql_test.capabilities(2, '{}')) #>> '{session,generation}', '3',
          'no label declared: opens (generation 3)');
RESET ROLE;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.open_session(%L, %L::bytea, %L, %L::bytea)', :'c3', :'d3', :'w3',
                        ql_test.capabilities(2, '{"tenant":"corp"}')),
                 'QL016', 'a declared label is not granted to this worker', 'tenant=corp (another value) -> QL016');
SELECT is(pg_temp.refusal('{"tenant":"Bank"}'), 'QL016 tenant', 'tenant=Bank (case variant of the value) -> QL016 naming tenant');
SELECT is(pg_temp.refusal('{"tenant":"bank "}'), 'QL016 tenant', 'tenant="bank " (whitespace variant) -> QL016 naming tenant');
SELECT is(pg_temp.refusal('{"tenant.":"bank"}'), 'QL016 tenant.', 'a variant of the key -> QL016 naming it');
SELECT is(pg_temp.refusal('{"gpu":"yes","tenant":"bank"}'), 'QL016 gpu', 'one ungranted label among granted ones -> QL016 naming it');
SELECT is(pg_temp.refusal('{"tenant":"corp","zone":"z9"}'), 'QL016 tenant', 'two ungranted: the first key in C order');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused label claims wrote nothing');
SELECT is((SELECT array_agg(state || ':' || generation ORDER BY generation)
             FROM ql_private.worker_sessions WHERE worker_id = :'w3'::uuid),
          ARRAY['closed:1', 'closed:2', 'active:3'], '... and replaced no session');

SELECT * FROM finish();
ROLLBACK;
