-- ql_private.session_claim_lock(session) -> boolean
--
-- Purpose: right before a pull's first claim, lock the session row (FOR NO KEY
--   UPDATE) and re-verify it on the locked row by clock_timestamp(): still active,
--   same generation, unexpired, capabilities digest unchanged, and a free slot
--   (every live lease counts, started or not; an unstarted one only while
--   unexpired). Concurrent pulls of one session serialize here, so slots can
--   never be exceeded and a session replaced meanwhile can never gain a lease.
-- Returns false when no slot is free. Only taken when a claim will be attempted,
--   so idle pulls take no row lock (a row lock writes WAL).
-- Caller: ql_private.claim_page.
-- Locks: the worker_sessions row.
-- SQLSTATEs: QL010–QL013, QL015 (session fences), QL014 (capabilities digest drift).
CREATE OR REPLACE FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    locked ql_private.worker_sessions;
BEGIN
    locked := ql_private.session_fence(s.worker_id, s.session_id, s.generation, true);
    IF locked.capabilities_digest <> s.capabilities_digest THEN
        RAISE EXCEPTION USING ERRCODE = 'QL014',
            MESSAGE = 'session capabilities changed during the pull';
    END IF;
    RETURN ql_private.session_live_leases(locked.session_id) < locked.slots;
END
$$;
REVOKE ALL ON FUNCTION ql_private.session_claim_lock(ql_private.worker_sessions) FROM PUBLIC;
