-- ql.revoke_pool(p_worker_id text, p_pool text) -> jsonb
--   {workerId, pool, revoked, leasesReleased}
--
-- Purpose: `admin worker revoke --worker ID --pool P/N` (SPEC §13.1): the worker
--   takes no new run of the pool from the commit on, and its UNSTARTED leases of
--   the pool are released at once (reason `grant_revoked`, runs re-queued); its
--   started ones may finish. '*' withdraws the all-pools grant (explicit grants
--   stay; unstarted leases of pools not explicitly granted are released).
-- How a claim in flight cannot slip past it: a claim re-checks the grant in
--   its one claim statement (ql_private.claim_candidate) while holding its
--   session row FOR NO KEY UPDATE (ql_private.session_claim_lock) until its
--   commit. This function removes the grant first, then locks each open session
--   of the worker FOR UPDATE — waiting for such a claim to commit — and only
--   then looks for unstarted leases, in a statement whose snapshot sees that
--   claim's lease. A claim that locks the session after this function does
--   re-checks the grant after its commit and finds it gone.
-- Inputs: p_worker_id (lowercase canonical UUID), p_pool ('P/N' or '*').
-- Fences: the worker exists; the pool exists.
-- Writes: the grant row deleted (or workers.all_pools := false), released
--   leases and their runs (-> queued), and one `worker.pool_revoked` event
--   (events.worker_id; payload workerId, pool, leasesReleased, actor =
--   session_user) when anything changed.
-- Locks: the worker row FOR NO KEY UPDATE; each open (active or draining)
--   session FOR UPDATE, in generation order; then attempt -> run -> lease per
--   released lease (ql_private.release_ungranted_leases, docs/LIFECYCLE.md
--   "Locks").
-- Idempotency: revoking a grant not held changes nothing (revoked = false), but
--   still releases unstarted leases the worker holds no grant for.
-- Errors: QL001 malformed worker id (COLUMN workerId) or pool (COLUMN pool);
--   QL004 unknown worker (COLUMN workerId) or pool (COLUMN pool).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.revoke_pool(p_worker_id text, p_pool text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
    v_pool ql_private.pools;
    v_session_id uuid;
    v_revoked boolean;
    v_released integer := 0;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF p_pool = '*' THEN
        v_revoked := v_worker.all_pools;
        IF v_revoked THEN
            UPDATE ql_private.workers w SET all_pools = false WHERE w.id = v_worker_id;
        END IF;
    ELSE
        v_pool := ql_private.pool_of(p_pool);
        DELETE FROM ql_private.worker_pool_grants g
         WHERE g.worker_id = v_worker_id AND g.pool_id = v_pool.id;
        v_revoked := FOUND;
    END IF;
    FOR v_session_id IN
        SELECT ws.session_id FROM ql_private.worker_sessions ws
         WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
         ORDER BY ws.generation
           FOR UPDATE
    LOOP
        v_released := v_released + ql_private.release_ungranted_leases(v_session_id);
    END LOOP;
    IF v_revoked OR v_released > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.pool_revoked', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'pool', p_pool, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'pool', p_pool, 'revoked', v_revoked,
                              'leasesReleased', v_released);
END
$$;
REVOKE ALL ON FUNCTION ql.revoke_pool(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.revoke_pool(text, text) TO ql_runtime;
