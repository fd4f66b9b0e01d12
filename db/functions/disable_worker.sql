-- ql.disable_worker(p_worker_id text, p_drain boolean DEFAULT false) -> jsonb
--   {workerId, disabled: true, drain, sessionsClosed, sessionsDraining,
--    leasesReleased}
--
-- Purpose: take a worker out of service (SPEC §9.5 `admin worker disable`).
--   Sets workers.disabled_at; from then on ql_private.authenticate refuses every
--   credential of the worker with the denial envelope reason `worker_disabled`,
--   httpStatus 403 (audited like every denial), until ql.enable_worker. Its
--   sessions that are not closed are closed the way ql.close_session closes
--   one: unstarted live leases released (`session_closed`, runs re-queued at
--   once), state closed, closed_at; started leases stay live (their lease
--   lifecycle decides, but with their session closed they can no longer
--   heartbeat or complete and end as `lost`). One `worker.disabled` event
--   (events.worker_id; payload workerId, drain, sessionsClosed,
--   sessionsDraining, leasesReleased, actor = session_user) when anything
--   changed.
--   With drain, each ACTIVE session drains instead of closing
--   (ql_private.drain_session, as ql.end_session with drain): unstarted leases
--   released, no new offer, started leases may still ACK running, heartbeat and
--   complete, the session closes with its last one (at once when none runs).
--   The credentials are refused all the same (worker_disabled) for session.open
--   and offer.pull, and for everything once no draining session is left;
--   while one is, ql_private.authenticate lets through only the calls that end
--   started work (session heartbeat/close, lease ACK/heartbeat/complete), which
--   their fences keep to that session's started leases: no new work, ever.
--   sessionsClosed counts the sessions closed (with drain: those with nothing
--   running), sessionsDraining those left draining. A session already draining
--   is left as it is with drain, and closed without it (the escalation).
--   Ingress replicas learn it within their NOTIFY latency: closing a session
--   fires 's:<workerId>' (migration 0005 trigger) and this function sends
--   'c:<credentialId>' for each credential of the worker on channel
--   ql_dispatch, so every replica's idle view drops what it believed about the
--   worker and its credentials (ids only in the payloads).
-- Inputs: p_worker_id (lowercase canonical UUID); p_drain (NULL = false).
-- Fences: the worker exists.
-- Writes: the worker row (when not yet disabled), its open sessions and their
--   released leases, one event; NOTIFYs at commit.
-- Locks: the worker row FOR NO KEY UPDATE, each open session FOR UPDATE (which
--   waits for a claim holding the session's fence lock, as ql.close_session),
--   then attempt -> run -> lease per released lease
--   (ql_private.release_unstarted_leases); with drain also FOR SHARE on each
--   draining session's live leases (ql_private.drain_session).
-- Idempotency: disabling a disabled worker without open sessions (with drain:
--   without active sessions) changes nothing, writes no event and returns
--   sessionsClosed 0, leasesReleased 0.
-- Errors: QL001 malformed worker id (COLUMN workerId); QL004 unknown worker
--   (COLUMN workerId); nothing changed on error.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_drain boolean := coalesce(p_drain, false);
    v_worker ql_private.workers;
    v_session ql_private.worker_sessions;
    v_drained record;
    v_now timestamptz;
    v_closed integer := 0;
    v_draining integer := 0;
    v_released integer := 0;
    v_changed boolean;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    v_now := clock_timestamp();
    v_changed := v_worker.disabled_at IS NULL;
    IF v_changed THEN
        UPDATE ql_private.workers w SET disabled_at = v_now WHERE w.id = v_worker_id;
    END IF;

    FOR v_session IN
        SELECT ws.* FROM ql_private.worker_sessions ws
         WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
         ORDER BY ws.generation
           FOR UPDATE
    LOOP
        IF v_drain AND v_session.state = 'active' THEN
            SELECT * INTO v_drained FROM ql_private.drain_session(v_session.session_id);
            v_released := v_released + v_drained.released;
            IF v_drained.state = 'closed' THEN
                v_closed := v_closed + 1;
            ELSE
                v_draining := v_draining + 1;
            END IF;
        ELSIF NOT v_drain THEN
            v_released := v_released
                + ql_private.release_unstarted_leases(ARRAY[v_session.session_id], 'session_closed');
            UPDATE ql_private.worker_sessions ws
               SET state = 'closed', closed_at = clock_timestamp()
             WHERE ws.session_id = v_session.session_id;
            v_closed := v_closed + 1;
        END IF;
    END LOOP;

    IF v_changed OR v_closed > 0 OR v_draining > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.disabled', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'drain', v_drain, 'sessionsClosed', v_closed,
            'sessionsDraining', v_draining, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;
    PERFORM pg_notify('ql_dispatch', 'c:' || c.credential_id)
       FROM ql_private.worker_credentials c WHERE c.worker_id = v_worker_id;
    RETURN jsonb_build_object('workerId', v_worker_id, 'disabled', true, 'drain', v_drain,
                              'sessionsClosed', v_closed, 'sessionsDraining', v_draining,
                              'leasesReleased', v_released);
END
$$;
REVOKE ALL ON FUNCTION ql.disable_worker(text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.disable_worker(text, boolean) TO ql_runtime;
