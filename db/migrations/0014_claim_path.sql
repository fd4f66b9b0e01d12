-- 0014 claim path: a pull's page is read by a statement that carries only the
-- source it reads.
--
-- Why (measured with perf on a pull's backend, `bench sql` queue): executor
-- start-up, paid on every execution of a statement however few rows it reads,
-- was the largest single cost of a pull — the page statement went through
-- ql_private.scan_page, whose plan held all four candidate sources (ready runs,
-- due scheduled runs, expired offers, placement-class pages) under one-time
-- filters, and every branch was initialised on every pull although one ran.
-- ql_private.scan_and_claim now opens one of three statements: the class page
-- (ql_private.class_candidate_page) once a pull switched to its placement
-- classes; the whole-queue page (ql_private.candidate_page) while a scheduled
-- run is due or an offer expired unstarted; else, the steady state, the ready
-- runs alone (ql_private.ready_candidate_page, one range scan of
-- runs_candidate_keyset). ql_private.scan_page has no caller left: dropped here
-- (db/functions no longer creates it).
--
-- Runs as ql_owner. Immutable once landed: fix forward.

DROP FUNCTION IF EXISTS ql_private.scan_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8);

-- Foreign keys off the claim's inserts. A lease insert checked three keys
-- (attempt, session, worker) and the run.dispatched event one (run): four
-- queries, each taking FOR KEY SHARE on its parent row — for the worker a real
-- tuple lock (WAL, a dirtied page) on every claim — measured at 8-17 % of a
-- pull's backend CPU. The claim copies every one of these ids from a row it
-- holds: the run and its current attempt locked FOR NO KEY UPDATE, the session
-- row locked FOR NO KEY UPDATE (and the session's own key to workers pins the
-- worker); the other event writers lock the run they write about. What the keys
-- still did was refuse deleting (or truncating) a parent that is referenced:
-- ql_private.refuse_referenced_delete keeps exactly that, once per statement
-- after it ran (so ql.prune_runs, which deletes leases, events, attempts and
-- runs in one statement, passes as before). Workers and sessions are never
-- deleted by any path (they are disabled / closed); their guards read run_leases
-- without an index, which only a hand-made delete would ever pay.
ALTER TABLE ql_private.run_leases
    DROP CONSTRAINT run_leases_attempt_id_fkey,
    DROP CONSTRAINT run_leases_session_id_fkey,
    DROP CONSTRAINT run_leases_worker_id_fkey;
ALTER TABLE ql_private.events
    DROP CONSTRAINT events_run_id_fkey;

-- The trigger function is created by db/functions (re-applied after the
-- migrations); it must exist before a trigger can name it.
CREATE FUNCTION ql_private.refuse_referenced_delete() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

CREATE TRIGGER attempts_referenced_by_leases
    AFTER DELETE ON ql_private.attempts REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'attempt_id', 'id');
CREATE TRIGGER attempts_no_truncate_under_leases
    BEFORE TRUNCATE ON ql_private.attempts
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'attempt_id', 'id');
CREATE TRIGGER worker_sessions_referenced_by_leases
    AFTER DELETE ON ql_private.worker_sessions REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'session_id', 'session_id');
CREATE TRIGGER worker_sessions_no_truncate_under_leases
    BEFORE TRUNCATE ON ql_private.worker_sessions
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'session_id', 'session_id');
CREATE TRIGGER workers_referenced_by_leases
    AFTER DELETE ON ql_private.workers REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'worker_id', 'id');
CREATE TRIGGER runs_referenced_by_events
    AFTER DELETE ON ql_private.runs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.events', 'run_id', 'id');
