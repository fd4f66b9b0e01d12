-- ql.grant_pool(p_worker_id text, p_pool text) -> jsonb {workerId, pool, granted}
--
-- Purpose: `admin worker grant --worker ID --pool P/N` and `admin worker create
--   … --pool P/N` (SPEC §13.1): the worker may take the runs of pool P/N from now
--   on. p_pool '*' grants every pool of every project, present and future
--   (workers.all_pools; single-tenant and development use).
-- Inputs: p_worker_id (lowercase canonical UUID), p_pool ('P/N' or '*').
-- Fences: the worker exists; the pool exists.
-- Writes: one worker_pool_grants row, or workers.all_pools for '*', and one
--   `worker.pool_granted` event (events.worker_id; payload workerId, pool,
--   actor = session_user); nothing when already granted (granted = false).
-- Locks: the worker row FOR NO KEY UPDATE (serializes with ql.revoke_pool).
-- Idempotency: granting a held grant changes nothing.
-- Errors: QL001 malformed worker id (COLUMN workerId) or pool (COLUMN pool);
--   QL004 unknown worker (COLUMN workerId) or pool (COLUMN pool).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.grant_pool(p_worker_id text, p_pool text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
    v_pool ql_private.pools;
    v_granted boolean;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF p_pool = '*' THEN
        v_granted := NOT v_worker.all_pools;
        IF v_granted THEN
            UPDATE ql_private.workers w SET all_pools = true WHERE w.id = v_worker_id;
        END IF;
    ELSE
        v_pool := ql_private.pool_of(p_pool);
        INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id)
        VALUES (v_worker_id, v_pool.id)
        ON CONFLICT (worker_id, pool_id) DO NOTHING;
        v_granted := FOUND;
    END IF;
    IF v_granted THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.pool_granted', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'pool', p_pool, 'actor', session_user));
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'pool', p_pool, 'granted', v_granted);
END
$$;
REVOKE ALL ON FUNCTION ql.grant_pool(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.grant_pool(text, text) TO ql_runtime;
