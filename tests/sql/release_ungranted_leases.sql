-- ql_private.release_ungranted_leases: only the session's live UNSTARTED leases
-- of runs whose pool the worker no longer holds are released (grant_revoked,
-- runs re-queued); granted pools' leases, started leases and other sessions'
-- leases stay; the all-pools grant keeps everything.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(8)) ->> 'sessionId' AS s2 \gset
SELECT ql.create_pool('acme', 'a') IS NOT NULL, ql.create_pool('acme', 'b') IS NOT NULL;
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
SELECT r[1] AS a1, r[2] AS a2, r[3] AS a3 FROM ql_test.enqueue(:'ta', 3) r \gset
SELECT (ql_test.enqueue(:'tb', 1))[1] AS b1 \gset
SELECT ql_test.fake_lease(:'a1', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'a2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'b1', :'s1', false) AS ob \gset
SELECT ql_test.fake_lease(:'a3', :'s2', false) AS o3 \gset

SELECT is(ql_private.release_ungranted_leases(:'s1'::uuid), 0, 'all-pools grant: nothing released');
UPDATE ql_private.workers SET all_pools = false WHERE id IN (:'w1'::uuid, :'w2'::uuid);
SELECT ql.grant_pool(:'w1', 'acme/b') IS NOT NULL;
SELECT is(ql_private.release_ungranted_leases(:'s1'::uuid), 1, 'one lease released');
SELECT results_eq(format($$SELECT l.release_reason, r.state FROM ql_private.run_leases l
                            JOIN ql_private.runs r ON r.id = l.run_id WHERE l.offer_id = %L$$, :'o1'),
                  $$VALUES ('grant_revoked'::text, 'queued'::text)$$, 'the ungranted unstarted one, re-queued');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'o2'::uuid), NULL::timestamptz,
          'the started one stays');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'ob'::uuid), NULL::timestamptz,
          'the granted pool''s stays');
SELECT is((SELECT released_at FROM ql_private.run_leases WHERE offer_id = :'o3'::uuid), NULL::timestamptz,
          'another session''s stays');

SELECT * FROM finish();
ROLLBACK;
