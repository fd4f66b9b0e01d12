-- ql.disable_worker(p_worker_id text) -> jsonb
--   {workerId, disabled: true, sessionsClosed, leasesReleased}
--
-- Purpose: take a worker out of service (SPEC §9.5 `admin worker disable`).
--   Sets workers.disabled_at; from then on ql_private.authenticate refuses every
--   credential of the worker with the denial envelope reason `worker_disabled`,
--   httpStatus 403 (audited like every denial), until ql.enable_worker. Its
--   sessions that are not closed are closed the way ql.close_session closes
--   one: unstarted live leases released (`session_closed`, runs re-queued at
--   once), state closed, closed_at; started leases stay live (their lease
--   lifecycle decides). One `worker.disabled` event (events.worker_id; payload
--   workerId, sessionsClosed, leasesReleased, actor = session_user) when
--   anything changed.
--   Ingress replicas learn it within their NOTIFY latency: closing a session
--   fires 's:<workerId>' (migration 0005 trigger) and this function sends
--   'c:<credentialId>' for each credential of the worker on channel
--   ql_dispatch, so every replica's idle view drops what it believed about the
--   worker and its credentials (ids only in the payloads).
-- Inputs: p_worker_id (lowercase canonical UUID).
-- Fences: the worker exists.
-- Writes: the worker row (when not yet disabled), its open sessions and their
--   released leases, one event; NOTIFYs at commit.
-- Locks: the worker row FOR NO KEY UPDATE, each open session FOR UPDATE (which
--   waits for a claim holding the session's fence lock, as ql.close_session),
--   then attempt -> run -> lease per released lease
--   (ql_private.release_unstarted_leases).
-- Idempotency: disabling a disabled worker without open sessions changes
--   nothing, writes no event and returns sessionsClosed 0, leasesReleased 0.
-- Errors: QL001 malformed worker id (COLUMN workerId); QL004 unknown worker
--   (COLUMN workerId); nothing changed on error.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.disable_worker(p_worker_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
    v_session_id uuid;
    v_now timestamptz;
    v_closed integer := 0;
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

    FOR v_session_id IN
        SELECT ws.session_id FROM ql_private.worker_sessions ws
         WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
         ORDER BY ws.generation
           FOR UPDATE
    LOOP
        v_released := v_released
            + ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
        UPDATE ql_private.worker_sessions ws
           SET state = 'closed', closed_at = clock_timestamp()
         WHERE ws.session_id = v_session_id;
        v_closed := v_closed + 1;
    END LOOP;

    IF v_changed OR v_closed > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.disabled', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'sessionsClosed', v_closed,
            'leasesReleased', v_released, 'actor', session_user));
    END IF;
    PERFORM pg_notify('ql_dispatch', 'c:' || c.credential_id)
       FROM ql_private.worker_credentials c WHERE c.worker_id = v_worker_id;
    RETURN jsonb_build_object('workerId', v_worker_id, 'disabled', true,
                              'sessionsClosed', v_closed, 'leasesReleased', v_released);
END
$$;
REVOKE ALL ON FUNCTION ql.disable_worker(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.disable_worker(text) TO ql_runtime;
COMMENT ON FUNCTION ql.disable_worker(text) IS
'Disable a worker (SPEC 9.5): workers.disabled_at set, so every credential of it is refused (worker_disabled, 403, audited); its open sessions closed as close_session does (unstarted leases released session_closed, runs re-queued); one worker.disabled event naming the actor (session_user) when anything changed; NOTIFY c:<credentialId> per credential (and s:<workerId> by the session trigger). Returns {workerId, disabled: true, sessionsClosed, leasesReleased}. Inputs: p_worker_id. Fences: worker exists. Locks: worker row FOR NO KEY UPDATE, sessions FOR UPDATE, attempt -> run -> lease. Idempotent. Errors: QL001 malformed, QL004 unknown worker (COLUMN workerId). Caller: ql_runtime.';
