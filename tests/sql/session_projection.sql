-- ql_private.session_projection: exactly the session@v1 fields from the row.
BEGIN;
SELECT plan(2);
\ir fixtures.psql

SELECT ql_test.new_worker('w1') IS NOT NULL AS made \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset

SELECT is(ql_private.session_projection(ws),
          jsonb_build_object('workerId', ws.worker_id, 'sessionId', ws.session_id, 'generation', ws.generation,
                             'expiresAtMs', floor(extract(epoch FROM ws.expires_at) * 1000)::bigint,
                             'capabilitiesDigest', ws.capabilities_digest, 'heartbeatIntervalMs', 20000),
          'projection of the stored row')
  FROM ql_private.worker_sessions ws WHERE ws.session_id = :'s1'::uuid;
SELECT ok(NOT (ql_private.session_projection(ws) ?| ARRAY['capabilities', 'capabilitiesCanonical', 'slots', 'state']),
          'no stored internals leak into the projection')
  FROM ql_private.worker_sessions ws WHERE ws.session_id = :'s1'::uuid;

SELECT * FROM finish();
ROLLBACK;
