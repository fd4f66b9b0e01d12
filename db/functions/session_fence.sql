-- ql_private.session_fence(worker_id, session_id, generation, lock) -> worker_sessions
--
-- Purpose: the session fence shared by heartbeat/close and the pull/lease path
--   (SPEC §3.3 step 2). Returns the session row when it exists for this worker,
--   its generation is exactly `generation`, it is active and its lease has not
--   expired by clock_timestamp(). Otherwise raises, first failing check wins:
--     QL010 session_not_found  no such session for this worker (another worker's
--                              session looks exactly like a missing one)
--     QL011 session_replaced   generation differs, or the session is no longer
--                              active and a newer generation exists for the worker
--     QL013 session_closed     closed (not replaced)
--     QL015 session_draining   draining and unexpired (not replaced; a
--                              lapsed draining session is QL012; ql.end_session /
--                              ql.disable_worker with drain): it takes no new
--                              offer, its started leases run on; a distinct
--                              answer so the worker stops pulling instead of
--                              opening a new session (which would replace this
--                              one and fence off its running leases)
--     QL012 session_expired    active or draining, but expires_at <= clock_timestamp()
-- Locks: lock = false reads without a row lock: the pull path's first check,
--   so an idle pull takes no lock (a row lock writes WAL) and never waits for a
--   heartbeat. lock = true takes FOR NO KEY UPDATE on the session row, taken by a
--   pull only right before it claims (ql_private.session_claim_lock):
--   * concurrent claims of one session serialize on it, so live-lease slot
--     accounting cannot be exceeded;
--   * it conflicts with the FOR UPDATE that ql.open_session (replacement) and
--     ql.close_session take before closing the row: a claim holding it finishes
--     first (and the close then releases the new lease), and a claim that waited
--     gets the row's newest version (READ COMMITTED re-check) and fails here with
--     QL011/QL013/QL015, so no lease is ever inserted for a closed or draining
--     session;
--   * it also conflicts with a heartbeat's UPDATE of the row: that wait is one
--     short transaction long and happens only on the claim path, never on an
--     idle pull (plain KEY SHARE would not serialize the slot check).
-- Caller: ql.heartbeat_session, ql.pull_offer, ql.pull_offers,
--   ql_private.session_claim_lock.
-- Idempotency: read-only (a row lock at most).
-- SQLSTATEs: QL001 NULL worker/session id or generation NULL or < 1;
--   QL010/QL011/QL012/QL013/QL015 as above.
CREATE OR REPLACE FUNCTION ql_private.session_fence(
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_lock boolean
)
RETURNS ql_private.worker_sessions
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    s ql_private.worker_sessions;
BEGIN
    IF p_worker_id IS NULL OR p_session_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'workerId and sessionId are required';
    END IF;
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF coalesce(p_lock, false) THEN
        SELECT * INTO s FROM ql_private.worker_sessions ws
         WHERE ws.session_id = p_session_id AND ws.worker_id = p_worker_id
           FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO s FROM ql_private.worker_sessions ws
         WHERE ws.session_id = p_session_id AND ws.worker_id = p_worker_id;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL010', MESSAGE = 'session_not_found';
    END IF;
    IF s.generation <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    -- Only a session that is not active needs the second look (a query): on the
    -- hot path an active session costs one statement.
    IF s.state <> 'active' THEN
        IF EXISTS (SELECT 1 FROM ql_private.worker_sessions newer
                    WHERE newer.worker_id = p_worker_id AND newer.generation > s.generation) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
        END IF;
        IF s.state = 'draining' AND s.expires_at > clock_timestamp() THEN
            RAISE EXCEPTION USING ERRCODE = 'QL015', MESSAGE = 'session_draining';
        ELSIF s.state = 'draining' THEN
            -- A draining session that lapsed is over: the worker opens a new one.
            RAISE EXCEPTION USING ERRCODE = 'QL012', MESSAGE = 'session_expired';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'QL013', MESSAGE = 'session_closed';
    END IF;
    IF s.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = 'QL012', MESSAGE = 'session_expired';
    END IF;
    RETURN s;
END
$$;
REVOKE ALL ON FUNCTION ql_private.session_fence(uuid, uuid, bigint, boolean) FROM PUBLIC;
