-- ql_private.recover_fence: the fences of an offer replay — the first failing
-- category of lease_verdict (replay rules; the full matrix is in
-- lease_verdict.sql), then the pool grant (SPEC §13.1): a worker that no longer
-- holds a grant for the run's pool gets lease_terminal, started lease or not;
-- NULL when every fence holds. Read-only.
BEGIN;
SELECT plan(12);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'ta', 2, 0) r \gset
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset

-- fence(offer [, worker, generation, token]): the caller's proof defaults to the lease's own.
CREATE FUNCTION pg_temp.fence(offer text, worker uuid DEFAULT NULL, gen bigint DEFAULT NULL,
                              token text DEFAULT NULL) RETURNS text LANGUAGE sql AS $$
    SELECT ql_private.recover_fence(l, coalesce(worker, l.worker_id), l.session_id,
                                    coalesce(gen, l.session_generation),
                                    ql_test.token_digest(coalesce(token, offer)))
      FROM ql_private.run_leases l WHERE l.offer_id = offer::uuid
$$;

SELECT is(pg_temp.fence(:'o1'), NULL, 'all-pools worker, every fence holds: NULL');
SELECT is(pg_temp.fence(:'o2'), NULL, '... for a started lease too');
SELECT is(pg_temp.fence(:'o1', gen_random_uuid(), 9, 'wrong'), 'offer_foreign',
          'another worker -> offer_foreign (checked first)');
SELECT is(pg_temp.fence(:'o1', NULL, 9, 'wrong'), 'token_mismatch', 'wrong token -> token_mismatch next');
SELECT is(pg_temp.fence(:'o1', NULL, 9), 'session_replaced', 'another generation -> session_replaced');

-- The pool grant: the worker gives up the all-pools grant and holds none for pool A.
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w1'::uuid;
SELECT is(pg_temp.fence(:'o1'), 'lease_terminal', 'no grant of the run''s pool: unstarted -> lease_terminal');
SELECT is(pg_temp.fence(:'o2'), 'lease_terminal', '... started -> lease_terminal too');
SELECT is(pg_temp.fence(:'o1', NULL, NULL, 'wrong'), 'token_mismatch',
          'a lease fence that fails answers before the grant');
SELECT ql.grant_pool(:'w1', 'acme/a');
SELECT is(pg_temp.fence(:'o1'), NULL, 'a grant of pool A: NULL again');
SELECT ql.create_pool('acme', 'b');
DELETE FROM ql_private.worker_pool_grants WHERE worker_id = :'w1'::uuid;
SELECT ql.grant_pool(:'w1', 'acme/b');
SELECT is(pg_temp.fence(:'o2'), 'lease_terminal', 'a grant of another pool only: lease_terminal');
SELECT ql_test.mark();
SELECT pg_temp.fence(l.offer_id::text) FROM ql_private.run_leases l;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'recover_fence writes nothing');

SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              'ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea)', 'EXECUTE'),
          'ql_worker_ingress may not execute it');

SELECT * FROM finish();
ROLLBACK;
