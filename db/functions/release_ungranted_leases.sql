-- ql_private.release_ungranted_leases(p_session_id uuid) -> integer
--
-- Purpose: release every live, UNSTARTED lease of the session whose run's pool
--   its worker no longer holds a grant for (ql.revoke_pool), reason
--   `grant_revoked`, and put each run whose current attempt it held back in
--   `queued` (a candidate again at once, for a worker that holds the pool).
--   Started leases are left alone: they may finish (SPEC §13.1).
-- Inputs: p_session_id (its row already locked FOR UPDATE by the caller, so no
--   claim of the session is in flight and none starts until the caller commits).
-- Writes: the released leases; their runs -> queued.
-- Locks: attempt, then run, then lease per lease — the one lifecycle order
--   (docs/LIFECYCLE.md "Locks"), as ql_private.release_unstarted_leases.
-- Errors: none. Returns the number released.
-- Caller: ql.revoke_pool.
CREATE OR REPLACE FUNCTION ql_private.release_ungranted_leases(p_session_id uuid)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
    v_now timestamptz;
    v_released integer := 0;
BEGIN
    FOR l IN SELECT rl.id, rl.attempt_id, rl.run_id
               FROM ql_private.run_leases rl
               JOIN ql_private.runs r ON r.id = rl.run_id
               JOIN ql_private.workers w ON w.id = rl.worker_id
              WHERE rl.session_id = p_session_id
                AND rl.released_at IS NULL AND rl.started_at IS NULL
                AND NOT w.all_pools
                AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                                 WHERE g.worker_id = rl.worker_id AND g.pool_id = r.pool_id)
              ORDER BY rl.id
    LOOP
        PERFORM 1 FROM ql_private.attempts a WHERE a.id = l.attempt_id FOR UPDATE;
        PERFORM 1 FROM ql_private.runs r WHERE r.id = l.run_id FOR NO KEY UPDATE;
        v_now := clock_timestamp();
        UPDATE ql_private.run_leases rl
           SET released_at = v_now, release_reason = 'grant_revoked', updated_at = v_now
         WHERE rl.id = l.id AND rl.released_at IS NULL AND rl.started_at IS NULL;
        IF FOUND THEN
            v_released := v_released + 1;
            UPDATE ql_private.runs r
               SET state = 'queued', updated_at = v_now
             WHERE r.id = l.run_id AND r.state = 'dispatching'
               AND r.current_attempt_id = l.attempt_id;
        END IF;
    END LOOP;
    RETURN v_released;
END
$$;
REVOKE ALL ON FUNCTION ql_private.release_ungranted_leases(uuid) FROM PUBLIC;
