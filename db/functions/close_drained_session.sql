-- ql_private.close_drained_session() -> trigger
--
-- Purpose: end a draining session with its last lease (SPEC §9.5 drain,
--   ql_private.drain_session). Runs AFTER UPDATE of run_leases for each lease
--   that was started and is released now (completion, start failure, loss,
--   cancellation; trigger run_leases_close_drained, migration 0018, whose WHEN
--   keeps every other lease update — claims, ACKs, heartbeats, unstarted
--   releases — free of any call). When the lease's session is `draining` and no
--   live lease of it is left, the session is closed (state closed, closed_at)
--   and one `session.drained` event is written (events.worker_id; payload
--   sessionId, workerId, generation). The session UPDATE notifies
--   's:<workerId>' (migration 0005), and the worker's next session heartbeat
--   answers 409 session_closed, after which it opens a new session (or, when
--   disabled, is refused).
-- Cost on the hot path: one primary-key probe of worker_sessions per released
--   started lease; an active session is neither locked nor written.
-- Locks: the draining session row FOR NO KEY UPDATE (only when it reads
--   `draining`), so two leases of one session ending at once serialize here and
--   the later one sees the earlier one released; taken after the caller's
--   attempt -> run -> lease locks. No deadlock: whoever holds a draining
--   session's row (a session heartbeat, ql.end_session / ql.disable_worker /
--   ql.open_session closing it) never waits for one of its started leases
--   (only ql_private.drain_session waits for leases, and it runs on an active
--   session, whose row this function does not lock).
-- Writes: at most the session row and one event.
-- Idempotency: a session already closed (or not draining) is left alone.
-- Errors: none of its own.
-- Caller: trigger on ql_private.run_leases (run_leases_close_drained only).
CREATE OR REPLACE FUNCTION ql_private.close_drained_session()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_session ql_private.worker_sessions;
BEGIN
    SELECT ws.* INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = NEW.session_id AND ws.state = 'draining'
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.run_leases rl
                WHERE rl.session_id = NEW.session_id AND rl.released_at IS NULL) THEN
        RETURN NULL;
    END IF;
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = clock_timestamp()
     WHERE ws.session_id = NEW.session_id;
    INSERT INTO ql_private.events (type, worker_id, payload)
    VALUES ('session.drained', v_session.worker_id, jsonb_build_object(
        'sessionId', v_session.session_id, 'workerId', v_session.worker_id,
        'generation', v_session.generation));
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ql_private.close_drained_session() FROM PUBLIC;
