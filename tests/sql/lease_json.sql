-- ql_private.lease_json: one definition of the wire lease object, shared by the
-- offer (offer@v1 `lease`) and lease@v1 (lease_projection adds three fields).
BEGIN;
SELECT plan(4);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT ql_test.enqueue(:'task', 1) IS NOT NULL AS queued \gset
SELECT gen_random_uuid()::text AS offer \gset
SELECT ql_test.claim('w1', :'s1', :'offer', 'tok') AS claimed \gset
SELECT id AS lease_id FROM ql_private.run_leases WHERE offer_id = :'offer'::uuid \gset

SELECT is(:'claimed'::jsonb -> 'lease', ql_private.lease_json(ql_test.lease(:'offer')),
          'the offer''s lease object is lease_json of the lease row');
SELECT is(ql_private.lease_projection(:lease_id) - 'state' - 'startedAtMs' - 'cancelRequested',
          :'claimed'::jsonb -> 'lease',
          'lease@v1 = the same lease object plus state, startedAtMs, cancelRequested');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(
               ql_private.lease_json(ql_test.lease(:'offer'))) k),
          ARRAY['attemptId', 'claimedAtMs', 'expiresAtMs', 'leaseGeneration', 'leaseVersion',
                'offerId', 'runId', 'sessionGeneration', 'sessionId', 'updatedAtMs',
                'workerId'],
          'exactly the contract''s lease fields: no token, no digest');
SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.lease_json(ql_private.run_leases)'::regprocedure),
          'lease_json is an inlinable SQL function');

SELECT * FROM finish();
ROLLBACK;
