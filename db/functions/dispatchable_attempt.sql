-- ql_private.dispatchable_attempt(attempt_id uuid, now_ts timestamptz) -> SETOF integer
--
-- Purpose: the attempt half of the candidate rule (SPEC §3.1): one row when the
--   attempt is `claimed`, executor remote_worker and its not_before has passed
--   at `now_ts`; no row otherwise. Used as `CROSS JOIN LATERAL` in
--   candidate_page: a set-returning SQL function with LIMIT is inlined as a
--   LATERAL subquery the planner keeps as a per-row index probe.
-- Why no `SET search_path`: a SET clause prevents inlining; all references are
--   schema-qualified and it is not SECURITY DEFINER.
-- Caller: ql_private.candidate_page, ql_private.class_candidate_page,
--   ql_private.pool_candidate_page, ql_private.pool_class_candidate_page,
--   ql_private.pool_ready_candidate_page, ql_private.ready_candidate_page.
-- Locks: none. Read-only. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamptz)
RETURNS SETOF integer
LANGUAGE sql STABLE
AS $$
    SELECT 1
      FROM ql_private.attempts a
     WHERE a.id = p_attempt_id
       AND a.state = 'claimed'
       AND a.executor = 'remote_worker'
       AND a.not_before <= p_now
     LIMIT 1
$$;
REVOKE ALL ON FUNCTION ql_private.dispatchable_attempt(uuid, timestamptz) FROM PUBLIC;
