-- ql_private.lease_projection: the lease@v1 body of a lease as stored now —
-- lease_json plus the state of the lease's own attempt, startedAtMs and the
-- run's cancelRequested, read at call time; never the token digest; NULL for
-- an unknown lease id.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT (ql_test.enqueue(:'task'))[1] AS r1 \gset
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset
SELECT (ql_test.lease(:'o1')).id AS lid \gset

SELECT is(ql_private.lease_projection(:lid),
          ql_private.lease_json(ql_test.lease(:'o1'))
          || '{"state":"claimed","startedAtMs":null,"cancelRequested":false}'::jsonb,
          'unstarted: lease_json + state claimed, startedAtMs null, cancelRequested false');
UPDATE ql_private.run_leases SET started_at = '2026-12-03 12:00:00.123456+00' WHERE offer_id = :'o1'::uuid;
UPDATE ql_private.attempts SET state = 'running' WHERE run_id = :'r1'::uuid;
UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'r1'::uuid;
SELECT ql_private.lease_projection(:lid) AS p \gset
SELECT is(:'p'::jsonb ->> 'state', 'running', 'the attempt''s state as stored now');
SELECT is(:'p'::jsonb ->> 'startedAtMs', '1796299200123', 'startedAtMs in ms, truncated');
SELECT is(:'p'::jsonb ->> 'cancelRequested', 'true', 'the run''s cancelRequested as stored now');
SELECT is(:'p'::jsonb ->> 'offerId', :'o1', 'the lease fields of lease_json');
SELECT ok(NOT (:'p'::text ~ encode((ql_test.lease(:'o1')).token_digest, 'hex')), 'never the token digest');
SELECT is(ql_private.lease_projection(-1), NULL, 'an unknown lease id -> NULL');

SELECT * FROM finish();
ROLLBACK;
