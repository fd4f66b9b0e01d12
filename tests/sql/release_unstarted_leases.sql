-- ql_private.release_unstarted_leases: releases only live unstarted leases of the
-- given sessions and re-queues their runs (the invariant candidate discovery
-- relies on: a dispatching run always has a live unstarted lease).
BEGIN;
SELECT plan(8);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(8)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS unstarted, r[2] AS started, r[3] AS other FROM ql_test.enqueue(:'task', 3) r \gset
SELECT ql_test.fake_lease(:'unstarted', :'s1', false) AS o1 \gset
SELECT ql_test.fake_lease(:'started', :'s1', true) AS o2 \gset

SELECT is(ql_private.release_unstarted_leases(ARRAY[:'s1'::uuid], 'session_closed'), 1,
          'one unstarted lease released');
SELECT is((SELECT release_reason FROM ql_private.run_leases WHERE offer_id = :'o1'::uuid),
          'session_closed', 'released with the given reason');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'unstarted'::uuid), 'queued',
          'its run is queued again');
SELECT ok((SELECT released_at IS NULL FROM ql_private.run_leases WHERE offer_id = :'o2'::uuid),
          'a started lease is left alone');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'started'::uuid), 'starting',
          'the started run keeps its state');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'other'::uuid), 'queued',
          'runs without a lease are untouched');
SELECT is(ql_private.release_unstarted_leases(ARRAY[:'s1'::uuid], 'session_closed'), 0,
          'idempotent: nothing left to release');
SELECT is((SELECT count(*) FROM ql_private.runs r
            WHERE r.state = 'dispatching'
              AND NOT EXISTS (SELECT 1 FROM ql_private.run_leases l
                               WHERE l.attempt_id = r.current_attempt_id
                                 AND l.released_at IS NULL AND l.started_at IS NULL)),
          0::bigint, 'no dispatching run is left without a live unstarted lease');

SELECT * FROM finish();
ROLLBACK;
