-- ql_private.session_live_leases: a session's slot count — unreleased leases,
-- started ones always (even past expires_at: the sweeper owns them), unstarted
-- ones only while unexpired; other sessions' leases never.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(8)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4, 0) r \gset

SELECT is(ql_private.session_live_leases(:'s1'), 0, 'no lease: 0');
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'s2', true);
SELECT is(ql_private.session_live_leases(:'s1'), 2, 'an unstarted and a started lease: 2 (not the other session''s)');
SELECT ql_test.expire_lease(:'o1');
SELECT is(ql_private.session_live_leases(:'s1'), 1, 'the unstarted lease expired: it stops counting');
SELECT ql_test.expire_lease(:'o2');
SELECT is(ql_private.session_live_leases(:'s1'), 1, 'a started lease past expiry still counts');
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'completed'
 WHERE offer_id = :'o2'::uuid;
SELECT is(ql_private.session_live_leases(:'s1'), 0, 'released: it stops counting');
SELECT is(ql_private.session_live_leases(:'s2'), 1, 'the other session counts its own');
SELECT is(ql_private.session_live_leases(gen_random_uuid()), 0, 'an unknown session: 0');

SELECT * FROM finish();
ROLLBACK;
