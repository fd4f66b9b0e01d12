-- ql_private.ready_priorities(p_limit integer) -> SETOF integer
--
-- Purpose: the distinct priorities of the ready queue (queued, runtime-owned,
--   not cancel-requested, not scheduled: runs_candidate_keyset's rows with
--   due_at NULL), as negated priorities (-priority, the index's first key) in
--   key order — highest priority first — at most p_limit of them.
--   A loose index scan: one descent of runs_candidate_keyset per distinct
--   priority, never a walk of the queue, so it costs the same with 10 or
--   1,000,000 ready runs. Callers then read each priority's rows as a key range
--   (row comparisons on the index keys, as candidate_page does): an equality on
--   the priority expression would be estimated at 0.5 % of the table and
--   planned as a bitmap scan of the whole priority.
-- Inputs: p_limit (>= 0; the callers' cap on priorities examined).
-- Fences: none (an operator's read). Writes: none. Locks: none.
-- Errors: none. Inlinable SQL, read-only.
-- Caller: ql.queue_depth, ql.waiting_runs (both SECURITY DEFINER as ql_owner).
CREATE OR REPLACE FUNCTION ql_private.ready_priorities(p_limit integer)
RETURNS SETOF integer
LANGUAGE sql STABLE
AS $$
    WITH RECURSIVE prio(neg) AS (
        SELECT (SELECT -(r.priority::integer) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
        UNION ALL
        SELECT (SELECT -(r.priority::integer) FROM ql_private.runs r
                 WHERE -(r.priority::integer) > p.neg
                   AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
          FROM prio p
         WHERE p.neg IS NOT NULL
    )
    SELECT p.neg FROM prio p WHERE p.neg IS NOT NULL LIMIT p_limit
$$;
REVOKE ALL ON FUNCTION ql_private.ready_priorities(integer) FROM PUBLIC;
