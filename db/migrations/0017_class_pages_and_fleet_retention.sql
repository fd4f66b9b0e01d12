-- 0017 class pages reach due runs; only waiting classes are evaluated; fleet
-- retention (sessions, placement classes, worker/session events).
--
-- 1. runs_class_due (placement_class, due_at) over the scheduled queued runs:
--    the class pages (ql_private.class_candidate_page) read each matching
--    class's runs that came due from it, as candidate_page reads runs_due. A
--    pull whose first page was a head of due runs it cannot take used to find
--    only ready runs behind it (runs_class_keyset is due_at IS NULL), so due
--    runs it could take waited for the sweeper's promotion. It also lets
--    ql_private.matching_classes find the classes with a scheduled run by a
--    skip scan (one descent per class that has one).
-- 2. worker_sessions_closed (closed_at) over closed sessions: ql.prune_fleet
--    takes the closed sessions past retention oldest first.
-- 3. events_fleet (created_at) over the events without a run (worker.* and
--    session.* facts, migration 0010): ql.prune_fleet takes the old ones oldest
--    first; run events never enter it (no cost on the claim's event insert).
-- 4. The session delete guard (migration 0014) refuses a delete only while a
--    LIVE lease references the session: released leases are history and keep
--    the session id as a plain identifier (an offer replay of such a lease
--    answers session_replaced: ql_private.recover_fence reads the session with a
--    LEFT JOIN). The check reads run_leases_session_live_counted (one probe per
--    deleted session) instead of all of run_leases, which no index serves by
--    session. ql_private.refuse_referenced_delete takes the child-side
--    condition as its fourth trigger argument.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE INDEX runs_class_due ON ql_private.runs (placement_class, due_at)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NOT NULL;

CREATE INDEX worker_sessions_closed ON ql_private.worker_sessions (closed_at)
    WHERE state = 'closed';

CREATE INDEX events_fleet ON ql_private.events (created_at)
    WHERE run_id IS NULL;

DROP TRIGGER worker_sessions_referenced_by_leases ON ql_private.worker_sessions;
CREATE TRIGGER worker_sessions_referenced_by_live_leases
    AFTER DELETE ON ql_private.worker_sessions REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql_private.refuse_referenced_delete(
        'ql_private.run_leases', 'session_id', 'session_id', 'released_at IS NULL');
