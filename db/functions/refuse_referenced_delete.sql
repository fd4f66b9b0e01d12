-- ql_private.refuse_referenced_delete() -> trigger
--
-- Purpose: the delete half of a foreign key, for the references the claim path
--   writes without one (migration 0014): run_leases.attempt_id -> attempts,
--   run_leases.session_id -> worker_sessions, run_leases.worker_id -> workers,
--   events.run_id -> runs. A foreign key checks every inserted child row with a
--   query and a FOR KEY SHARE lock on its parent — four such checks per claim,
--   measured at 8-17 % of a pull's CPU — while the claim already holds (or, for
--   the worker, holds the session that pins) every parent row it copies the ids
--   from. What the keys still guarded was the other direction: no parent row may
--   go while a child references it. This trigger keeps that.
-- How: AFTER DELETE ... FOR EACH STATEMENT with the deleted rows as transition
--   table `gone`: one check per statement, run after the whole statement (as a
--   foreign key's NO ACTION check is), so a statement that deletes the children
--   and their parents together (ql.prune_runs, data-modifying CTEs) passes.
--   BEFORE TRUNCATE ... FOR EACH STATEMENT refuses emptying the parent while the
--   child table has any row.
-- Arguments (TG_ARGV): [0] child table (schema-qualified), [1] child column,
--   [2] the parent's key column, [3] optional: a condition on the child row
--   (only the rows it holds for count as references; the session guard of
--   migration 0017 passes 'released_at IS NULL': only live leases).
-- Errors: 23503 foreign_key_violation naming the tables, never a row's values.
-- Writes: none. Locks: none (reads the child table: one index probe per deleted
--   row, through the child column's index — run_leases (attempt_id,
--   lease_generation), events_run, run_leases_session_live_counted for the
--   session guard's live leases; workers are never deleted).
-- Caller: trigger on ql_private.attempts, trigger on ql_private.worker_sessions,
--   trigger on ql_private.workers, trigger on ql_private.runs (the triggers of
--   migrations 0014 and 0017).
CREATE OR REPLACE FUNCTION ql_private.refuse_referenced_delete()
RETURNS trigger
LANGUAGE plpgsql
-- Never parallel: a check inside a prune batch must not take workers from
-- the claims running beside it.
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_referenced boolean;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', TG_ARGV[0]) INTO v_referenced;
    ELSE
        -- One index probe of the child per deleted row, whatever the estimates:
        -- the LATERAL ... LIMIT 1 can only be a parameterized nested loop. (A
        -- plain join is planned the same way today, but a prune batch deletes
        -- the children first, so the check never stops early and a hash join
        -- over a million-row child would be a full scan per batch.)
        -- TG_ARGV[3], when given, narrows the referencing rows (the session
        -- guard counts only live leases, migration 0017).
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM gone g CROSS JOIN LATERAL '
                       '(SELECT 1 FROM %s c WHERE c.%I = g.%I AND (%s) LIMIT 1) hit)',
                       TG_ARGV[0], TG_ARGV[1], TG_ARGV[2],
                       CASE WHEN TG_NARGS > 3 THEN TG_ARGV[3] ELSE 'true' END)
           INTO v_referenced;
    END IF;
    IF v_referenced THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = format('%s on %s.%s refused: rows of %s (%s) still reference it',
                             TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[1]);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ql_private.refuse_referenced_delete() FROM PUBLIC;
