-- ql_private.drain_session(p_session_id uuid) -> (released integer, running integer, state text)
--
-- Purpose: start draining a session (ql.end_session / ql.disable_worker with
--   drain, SPEC §9.5): it takes no new offer from now on (the session fence
--   answers QL015 session_draining), its unstarted live leases are released
--   (`session_closed`, runs re-queued at once, ql_private.release_unstarted_leases),
--   and its STARTED leases run on: their attempts may still ACK running,
--   heartbeat and complete (ql_private.lease_verdict lets a started lease of a
--   draining session pass). The session is closed when its last live lease is
--   released (ql_private.close_drained_session, the run_leases trigger of
--   migration 0018) — at once here when none is left — or it lapses at its
--   normal expiry when its worker stops heartbeating it.
-- Inputs: p_session_id, an `active` session the caller holds FOR UPDATE (so no
--   claim of it is in flight, and none can start: claims take the session row
--   FOR NO KEY UPDATE and then find it draining).
-- Returns: released (unstarted leases released), running (live leases left,
--   all started), state (`draining`, or `closed` when running = 0).
-- Writes: the released leases and their runs, the session row (state; closed_at
--   when closed at once). The caller writes the event.
-- Locks: attempt -> run -> lease per released lease (release_unstarted_leases),
--   then FOR SHARE on the session's remaining live leases: that waits for any
--   lease change in flight (an ACK, heartbeat, completion or sweep holding the
--   lease row) and re-reads the row after it, so the count sees a completion that
--   committed meanwhile. Together with the trigger (which locks the session
--   only once it reads `draining`, i.e. after this transaction committed) that
--   leaves no window in which the last lease ends unseen and the session stays
--   draining with nothing left. No deadlock: the lease holders this waits for
--   never wait for the session row while it still reads `active`.
-- Idempotency: none here (the callers skip a session already draining).
-- Errors: QL001 the session is not active (a caller bug).
-- Caller: ql.end_session, ql.disable_worker, ql.label_worker (a revoked label).
CREATE OR REPLACE FUNCTION ql_private.drain_session(
    p_session_id uuid,
    OUT released integer,
    OUT running integer,
    OUT state text
)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ql_private.worker_sessions ws
                    WHERE ws.session_id = p_session_id AND ws.state = 'active') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'only an active session can start draining';
    END IF;
    released := ql_private.release_unstarted_leases(ARRAY[p_session_id], 'session_closed');
    SELECT count(*)::integer INTO running
      FROM (SELECT 1 FROM ql_private.run_leases rl
             WHERE rl.session_id = p_session_id AND rl.released_at IS NULL
               FOR SHARE) AS live;
    state := CASE WHEN running = 0 THEN 'closed' ELSE 'draining' END;
    v_now := clock_timestamp();
    UPDATE ql_private.worker_sessions ws
       SET state = drain_session.state,
           closed_at = CASE WHEN drain_session.running = 0 THEN v_now END
     WHERE ws.session_id = p_session_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.drain_session(uuid) FROM PUBLIC;
