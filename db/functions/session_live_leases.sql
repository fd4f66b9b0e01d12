-- ql_private.session_live_leases(session_id uuid) -> integer
--
-- Purpose: slot accounting (SPEC §3.3 step 2): the session's live leases, started
--   or not; an unstarted lease stops counting once it expired (its run is a
--   candidate again).
-- Caller: ql.pull_offer, ql.pull_offers, ql_private.session_claim_lock.
-- Locks: none. Read-only.
-- plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
-- call, a plpgsql one keeps its plan for the session (this is on the pull hot path).
CREATE OR REPLACE FUNCTION ql_private.session_live_leases(p_session_id uuid)
RETURNS integer
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN (SELECT count(*)::integer
      FROM ql_private.run_leases l
     WHERE l.session_id = p_session_id
       AND l.released_at IS NULL
       AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp()));
END
$$;
REVOKE ALL ON FUNCTION ql_private.session_live_leases(uuid) FROM PUBLIC;
