-- ql_private.refuse_referenced_delete: the delete half of the foreign keys the
-- claim path writes without (0014). A parent row still referenced by a lease or
-- an event cannot be deleted or truncated away; a statement that deletes the
-- children together with their parents (ql.prune_runs) passes.
BEGIN;
SELECT plan(16);
\ir fixtures.psql

-- The four keys are gone from the claim's inserts…
SELECT is((SELECT count(*)::integer FROM pg_constraint
            WHERE contype = 'f' AND conrelid = 'ql_private.run_leases'::regclass), 0,
          'run_leases has no foreign key (attempt, session, worker checked per insert before)');
SELECT is((SELECT array_agg(conname::text ORDER BY conname) FROM pg_constraint
            WHERE contype = 'f' AND conrelid = 'ql_private.events'::regclass),
          ARRAY['events_worker_id_fkey'], 'events keeps only its worker key (run_id dropped)');
-- …and their delete halves are triggers.
SELECT is((SELECT array_agg(tgrelid::regclass::text || ':' || tgname::text ORDER BY tgname)
             FROM pg_trigger WHERE tgfoid = 'ql_private.refuse_referenced_delete()'::regprocedure),
          ARRAY['ql_private.attempts:attempts_no_truncate_under_leases',
                'ql_private.attempts:attempts_referenced_by_leases',
                'ql_private.runs:runs_referenced_by_events',
                'ql_private.worker_sessions:worker_sessions_no_truncate_under_leases',
                'ql_private.worker_sessions:worker_sessions_referenced_by_live_leases',
                'ql_private.workers:workers_referenced_by_leases'],
          'one guard per dropped key, plus TRUNCATE guards where no other key refuses it');

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset
SELECT (ql_test.new_worker('w1')).worker_id AS w1 \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.fake_lease(:'r1', :'s1') AS o1 \gset
SELECT current_attempt_id AS a1 FROM ql_private.runs WHERE id = :'r1' \gset
SELECT current_attempt_id AS a2 FROM ql_private.runs WHERE id = :'r2' \gset
INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
VALUES ('run.dispatched', :'r1', :'a1', '{}');

SELECT is(ql_test.error_of(format('DELETE FROM ql_private.run_leases WHERE offer_id = %L; '
                                  'DELETE FROM ql_private.attempts WHERE id = %L',
                                  'ffffffff-ffff-ffff-ffff-ffffffffffff', :'a1')),
          '23503 ', 'an attempt a lease references cannot be deleted');
SELECT is(ql_test.error_of(format('DELETE FROM ql_private.worker_sessions WHERE session_id = %L',
                                  :'s1')),
          '23503 ', 'a session a live lease references cannot be deleted');
-- Since 0017 only live leases count: a released one is history and keeps the
-- session id (ql.prune_fleet prunes ended sessions).
SELECT is(ql_test.error_of(format(
    'UPDATE ql_private.run_leases SET released_at = clock_timestamp(), release_reason = %L'
    ' WHERE offer_id = %L; DELETE FROM ql_private.worker_sessions WHERE session_id = %L',
    'completed', :'o1', :'s1')),
          NULL, '... and can once its leases are all released');
SELECT is(ql_test.error_of('TRUNCATE ql_private.attempts CASCADE'), '23503 ',
          'attempts cannot be truncated while leases exist');
SELECT is(ql_test.error_of('TRUNCATE ql_private.worker_sessions'), '23503 ',
          'sessions cannot be truncated while leases exist');
SELECT is(ql_test.error_of(format('DELETE FROM ql_private.runs WHERE id = %L', :'r1')), '23503 ',
          'a run an event references cannot be deleted (its attempts'' key aside)');

-- The worker guard on its own: a lease row naming a worker with no session,
-- credential or event (only the dropped key pointed from leases to workers).
SELECT ql.register_worker('lonely') ->> 'workerId' AS lonely \gset
UPDATE ql_private.run_leases SET worker_id = :'lonely' WHERE offer_id = :'o1';
SELECT is(ql_test.error_of(format('DELETE FROM ql_private.workers WHERE id = %L', :'lonely')),
          '23503 ', 'a worker a lease references cannot be deleted');
UPDATE ql_private.run_leases SET worker_id = :'w1' WHERE offer_id = :'o1';
SELECT is(ql_test.error_of(format('DELETE FROM ql_private.workers WHERE id = %L', :'lonely')),
          NULL, '... and can once no lease does');

-- Unreferenced parents go as before (error_of keeps what a statement that
-- does not raise did).
SELECT is(ql_test.error_of(format(
    'DELETE FROM ql_private.events WHERE run_id = %1$L;'
    ' DELETE FROM ql_private.attempts WHERE id = %2$L; DELETE FROM ql_private.runs WHERE id = %1$L',
    :'r2', :'a2')), NULL, 'an unreferenced attempt and run are deleted');
SELECT is((SELECT count(*)::integer FROM ql_private.runs WHERE id = :'r2'), 0, '... and gone');

-- Children and parents deleted by one statement (the shape of ql.prune_runs):
-- the check runs after the whole statement, so it passes; without the children
-- in the statement it does not.
SELECT is(ql_test.error_of(format(
    'WITH a AS (DELETE FROM ql_private.attempts WHERE id = %1$L RETURNING 1)'
    ' DELETE FROM ql_private.runs WHERE id = %2$L', :'a1', :'r1')),
    '23503 ', 'the attempt and run cannot go while the lease and event stay');
SELECT is(ql_test.error_of(format(
    'WITH l AS (DELETE FROM ql_private.run_leases WHERE attempt_id = %1$L RETURNING 1),'
    '     e AS (DELETE FROM ql_private.events WHERE run_id = %2$L RETURNING 1),'
    '     a AS (DELETE FROM ql_private.attempts WHERE id = %1$L RETURNING 1)'
    ' DELETE FROM ql_private.runs WHERE id = %2$L', :'a1', :'r1')),
    NULL, 'leases, events, attempt and run deleted in one statement');
SELECT is((SELECT count(*)::integer FROM ql_private.runs WHERE id = :'r1'), 0, '... and gone');

SELECT * FROM finish();
ROLLBACK;
