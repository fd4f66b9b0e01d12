-- ql.enable_worker(p_worker_id text) -> jsonb {workerId, disabled: false}
--
-- Purpose: put a disabled worker back in service (SPEC §9.5 `admin worker
--   enable`): workers.disabled_at := NULL, so its credentials that are not
--   revoked authenticate again (it opens a new session itself). One
--   `worker.enabled` event (events.worker_id; payload workerId, actor =
--   session_user) when it was disabled; 'c:<credentialId>' is sent on
--   ql_dispatch for each of its credentials, so ingress replicas drop a cached
--   refusal.
-- Inputs: p_worker_id (lowercase canonical UUID).
-- Fences: the worker exists.
-- Writes: the worker row and one event (nothing when already enabled).
-- Locks: the worker row FOR NO KEY UPDATE.
-- Idempotency: enabling an enabled worker changes nothing and writes no event.
-- Errors: QL001 malformed worker id (COLUMN workerId); QL004 unknown worker
--   (COLUMN workerId).
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.enable_worker(p_worker_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF v_worker.disabled_at IS NOT NULL THEN
        UPDATE ql_private.workers w SET disabled_at = NULL WHERE w.id = v_worker_id;
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.enabled', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'actor', session_user));
        PERFORM pg_notify('ql_dispatch', 'c:' || c.credential_id)
           FROM ql_private.worker_credentials c WHERE c.worker_id = v_worker_id;
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'disabled', false);
END
$$;
REVOKE ALL ON FUNCTION ql.enable_worker(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.enable_worker(text) TO ql_runtime;
