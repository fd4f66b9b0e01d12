-- ql_private.recover_offer: step 1 of a pull — NULL for a new offer id; the
-- very offer of the first answer ({status: idempotent}) for a replay that
-- passes every fence, without any write; {status: conflict, category} for the
-- first failing fence.
BEGIN;
SELECT plan(12);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset
SELECT ql_test.claim('w1', :'s1', '00000000-0000-4000-8000-000000000001', 't1') AS first \gset

-- rec(offer, worker, generation, token) with the session s1.
CREATE FUNCTION pg_temp.rec(offer text, worker text, gen bigint, token text) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT ql_private.recover_offer(worker::uuid, (SELECT ws.session_id FROM ql_private.worker_sessions ws
                                                    WHERE ws.worker_id = worker::uuid
                                                    ORDER BY ws.generation DESC LIMIT 1),
                                    gen, offer::uuid, ql_test.token_digest(token))
$$;

SELECT ql_test.mark();
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000009', :'w1', 1, 't1'), NULL,
          'an offer id without a lease -> NULL (the caller claims)');
SELECT pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w1', 1, 't1') AS replay \gset
SELECT is(:'replay'::jsonb ->> 'status', 'idempotent', 'same offer id, worker, session, token -> idempotent');
SELECT is(:'replay'::jsonb -> 'offer', :'first'::jsonb, '... the very offer of the first answer');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing written');
SELECT ok(NOT (:'replay'::text ~ encode(ql_test.token_digest('t1'), 'hex')),
          'the replayed offer never carries the token digest');

SELECT is(ql_private.recover_offer(:'w2'::uuid, :'s1'::uuid, 1, '00000000-0000-4000-8000-000000000001',
                                   ql_test.token_digest('t1')),
          '{"status":"conflict","category":"offer_foreign"}'::jsonb, 'another worker -> offer_foreign');
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w1', 1, 'nope'),
          '{"status":"conflict","category":"token_mismatch"}'::jsonb, 'wrong token -> token_mismatch');
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w1', 2, 't1'),
          '{"status":"conflict","category":"session_replaced"}'::jsonb, 'another generation -> session_replaced');
SELECT ql_test.expire_lease('00000000-0000-4000-8000-000000000001');
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w1', 1, 't1'),
          '{"status":"conflict","category":"lease_expired"}'::jsonb, 'unstarted past expiry -> lease_expired');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed',
       expires_at = clock_timestamp() + interval '1 minute'
 WHERE offer_id = '00000000-0000-4000-8000-000000000001';
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w1', 1, 't1'),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb, 'released -> lease_terminal');
SELECT is(pg_temp.rec('00000000-0000-4000-8000-000000000001', :'w2', 1, 't1'),
          '{"status":"conflict","category":"offer_foreign"}'::jsonb,
          'the owner check comes first: another worker learns nothing else');

SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.recover_offer(uuid, uuid, bigint, uuid, bytea)', 'EXECUTE'),
          'ql_worker_ingress may not execute it (only through ql.pull_offer)');

SELECT * FROM finish();
ROLLBACK;
