-- ql_private.waiting_classes(p_due_by timestamptz) -> SETOF integer
--
-- Purpose: the placement classes (migration 0006) that have runs waiting: a
--   ready queued run (runs_class_keyset) or a scheduled queued run due by
--   p_due_by (runs_class_due, migration 0017; 'infinity' = any scheduled run).
--   Found by a skip scan of each index — a recursive query, one descent per
--   class that has such a run, then one past the last — so classes without
--   waiting runs cost nothing however many were ever made; a scheduled class
--   costs one more descent (its earliest due_at).
-- Inputs: p_due_by (the pull's now; 'infinity' for retention).
-- Cost: independent of queue depth and of the number of classes ever made.
-- Inlinable SQL (no SET clause, nothing volatile): the caller's settings hold
--   (ql.pull_offer: sequential scans off), so the skip scans stay index-driven.
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.matching_classes (the pull's class fallback),
--   ql.prune_fleet (classes that must be kept).
CREATE OR REPLACE FUNCTION ql_private.waiting_classes(p_due_by timestamptz)
RETURNS SETOF integer
LANGUAGE sql STABLE
AS $$
    WITH RECURSIVE ready(class_id) AS (
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL)
        UNION ALL
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL AND r.placement_class > ready.class_id)
          FROM ready WHERE ready.class_id IS NOT NULL
    ), scheduled(class_id) AS (
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NOT NULL)
        UNION ALL
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NOT NULL AND r.placement_class > scheduled.class_id)
          FROM scheduled WHERE scheduled.class_id IS NOT NULL
    )
    SELECT ready.class_id FROM ready WHERE ready.class_id IS NOT NULL
    UNION
    SELECT s.class_id FROM scheduled s
     WHERE s.class_id IS NOT NULL
       AND (SELECT min(d.due_at) FROM ql_private.runs d
             WHERE d.placement_class = s.class_id
               AND d.state = 'queued' AND d.runtime_owned AND NOT d.cancel_requested
               AND d.due_at IS NOT NULL) <= p_due_by
$$;
REVOKE ALL ON FUNCTION ql_private.waiting_classes(timestamptz) FROM PUBLIC;
