-- ql_private.candidate_attempt_ok(attempt_id uuid) -> boolean
--
-- Purpose: the attempt half of the candidate rule (SPEC §3.1): the run's current
--   attempt is `claimed`, executor remote_worker, its not_before has passed, and
--   it has no live lease that is started or still unexpired by clock_timestamp().
--   A released lease, or a live one that expired without starting, leaves the
--   attempt claimable again.
-- Why no `SET search_path`: a SET clause stops the planner from inlining a SQL
--   function; inlined, this becomes two index probes inside the keyset scan. All
--   references are schema-qualified, and it is not SECURITY DEFINER.
-- Caller: ql_private.candidate_page, ql.pull_offer (re-check after locking).
-- Locks: none. Read-only. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.candidate_attempt_ok(p_attempt_id uuid)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1
          FROM ql_private.attempts a
         WHERE a.id = p_attempt_id
           AND a.state = 'claimed'
           AND a.executor = 'remote_worker'
           AND a.not_before <= pg_catalog.clock_timestamp()
           AND NOT EXISTS (
               SELECT 1
                 FROM ql_private.run_leases l
                WHERE l.attempt_id = a.id
                  AND l.released_at IS NULL
                  AND (l.started_at IS NOT NULL
                       OR l.expires_at > pg_catalog.clock_timestamp())))
$$;
REVOKE ALL ON FUNCTION ql_private.candidate_attempt_ok(uuid) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.candidate_attempt_ok(uuid) IS
'True when the attempt is claimed, remote_worker, past not_before, and has no started or unexpired live lease (SPEC 3.1). Read-only, no locks.';
