-- ql_private.candidate_page: keyset order (priority DESC, FIFO), limit + 1,
-- visibility of released / expired-unstarted leases, hiding of live, started,
-- not-yet-due, cancel-requested and not-runtime-owned runs (R-CAND).
BEGIN;
SELECT plan(21);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS a0, r[2] AS a1, r[3] AS a2 FROM ql_test.enqueue(:'task', 3, 0) r \gset
SELECT r[1] AS b0, r[2] AS b1 FROM ql_test.enqueue(:'task', 2, 5) r \gset
SELECT r[1] AS c0 FROM ql_test.enqueue(:'task', 1, -1) r \gset

CREATE FUNCTION pg_temp.page_ids(after_p integer, after_run text, lim integer)
RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(c.run_id::text ORDER BY c.priority DESC, c.queue_seq), '{}')
      FROM ql_private.candidate_page(
               after_p::smallint,
               (SELECT queue_seq FROM ql_private.runs WHERE id = after_run::uuid),
               after_run::uuid, lim) c
$$;

SELECT is(pg_temp.page_ids(NULL, NULL, 10), ARRAY[:'b0', :'b1', :'a0', :'a1', :'a2', :'c0'],
          'priority DESC, then FIFO within a priority');
SELECT is(pg_temp.page_ids(NULL, NULL, 2), ARRAY[:'b0', :'b1', :'a0'],
          'a page reads limit + 1 rows (the extra row proves truncation)');
SELECT is(pg_temp.page_ids(5, :'b1', 2), ARRAY[:'a0', :'a1', :'a2'],
          'keyset continues into the next priority after the last row');
SELECT is(pg_temp.page_ids(0, :'a2', 2), ARRAY[:'c0'],
          'last page returns fewer than limit + 1 rows: not truncated');
SELECT is(pg_temp.page_ids(-1, :'c0', 2), '{}'::text[], 'past the end: empty page');

-- Leases: live unstarted hides, started hides, expired-unstarted and released show.
SELECT ql_test.fake_lease(:'a0', :'s1', false) AS offer_live \gset
SELECT ql_test.fake_lease(:'a1', :'s1', true) AS offer_started \gset
SELECT ql_test.fake_lease(:'a2', :'s1', false) AS offer_released \gset
SELECT is(pg_temp.page_ids(NULL, NULL, 10), ARRAY[:'b0', :'b1', :'c0'],
          'runs with a live or started lease are hidden');

UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'
 WHERE offer_id = :'offer_live'::uuid;
SELECT ok(:'a0' = ANY (pg_temp.page_ids(NULL, NULL, 10)),
          'a live lease that expired without starting makes the run a candidate again');

UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'
 WHERE offer_id = :'offer_started'::uuid;
SELECT ok(NOT :'a1' = ANY (pg_temp.page_ids(NULL, NULL, 10)),
          'a started lease past expiry stays hidden (the sweeper decides, not the scan)');

-- A lease released by its session closing (the real path) re-queues the run;
-- the other fake leases above are on the same session, so pin them first.
UPDATE ql_private.run_leases SET started_at = clock_timestamp()
 WHERE offer_id = :'offer_live'::uuid;
SELECT ql.close_session(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1);
SELECT ok(:'a2' = ANY (pg_temp.page_ids(NULL, NULL, 10)),
          'a released lease makes the run a candidate again');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'a2'::uuid), 'queued',
          'releasing an unstarted lease re-queues its run');
UPDATE ql_private.run_leases SET started_at = NULL
 WHERE offer_id = :'offer_live'::uuid;

UPDATE ql_private.attempts SET not_before = clock_timestamp() + interval '1 hour'
 WHERE run_id = :'c0'::uuid;
SELECT ok(NOT :'c0' = ANY (pg_temp.page_ids(NULL, NULL, 10)),
          'an attempt whose not_before is in the future is hidden');

UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'b0'::uuid;
SELECT ok(NOT :'b0' = ANY (pg_temp.page_ids(NULL, NULL, 10)), 'cancel-requested runs are hidden');

UPDATE ql_private.runs SET runtime_owned = false WHERE id = :'b1'::uuid;
SELECT ok(NOT :'b1' = ANY (pg_temp.page_ids(NULL, NULL, 10)), 'runs not runtime-owned are hidden');

SELECT is(pg_temp.page_ids(NULL, NULL, 10), ARRAY[:'a0', :'a2'], 'exactly the remaining candidates');

SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql_private.candidate_page(smallint,bigint,uuid,integer,timestamptz,pg_snapshot,xid8)'::regprocedure),
          's', 'candidate_page is STABLE (read-only)');
-- Inlinable into the pull's page query: LANGUAGE sql, no SET clause, not
-- SECURITY DEFINER (a SET clause would make every call a separate function
-- execution with its own planning).
SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.candidate_page(smallint,bigint,uuid,integer,timestamptz,pg_snapshot,xid8)'::regprocedure),
          'candidate_page is an inlinable SQL function');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'candidate_page' AND pronargs = 4),
          'the old four-argument overload is gone (0004)');

-- SPEC §9.2 scheduled runs (runs.due_at): not yet due -> never read; due ->
-- merged in key order from runs_due (before the sweeper promotes it), and the
-- keyset position applies to it like to any other row.
UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = 'expired'
 WHERE released_at IS NULL;
UPDATE ql_private.runs SET state = 'succeeded' WHERE state <> 'queued';
UPDATE ql_private.runs SET state = 'succeeded' WHERE id <> ALL (ARRAY[:'b0', :'b1', :'c0']::uuid[]);
UPDATE ql_private.runs SET state = 'queued', cancel_requested = false, runtime_owned = true
 WHERE id IN (:'b0'::uuid, :'b1'::uuid, :'c0'::uuid);
UPDATE ql_private.attempts a SET not_before = clock_timestamp() - interval '1 minute'
  FROM ql_private.runs r WHERE a.id = r.current_attempt_id AND r.id IN (:'b0'::uuid, :'b1'::uuid, :'c0'::uuid);
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour' WHERE id = :'b0'::uuid;
SELECT is(pg_temp.page_ids(NULL, NULL, 10), ARRAY[:'b1', :'c0'], 'a run due in an hour is not a candidate');
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'b0'::uuid;
SELECT is(pg_temp.page_ids(NULL, NULL, 10), ARRAY[:'b0', :'b1', :'c0'],
          'once due it is a candidate again, in key order (merged from runs_due)');
SELECT is(pg_temp.page_ids(5, :'b0', 10), ARRAY[:'b1', :'c0'], 'the keyset position applies to due runs too');
SELECT is(pg_temp.page_ids(NULL, NULL, 0), ARRAY[:'b0'], 'limit + 1 over the merged sources');

SELECT * FROM finish();
ROLLBACK;
