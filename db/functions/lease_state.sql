-- ql_private.lease_state(p_offer_id, p_worker_id, p_session_id, p_generation,
--                        p_token_digest) -> (lease, attempt, run, category)
--
-- Purpose: what a lease lifecycle call decides on, read in ONE statement so the
--   lease, its attempt, its run, the session and the fence verdict
--   (ql_private.lease_fence) all come from the same snapshot. Reading them in
--   separate statements of a VOLATILE function would mix snapshots under READ
--   COMMITTED: e.g. a lease read live just before a sweeper commits, then its
--   attempt read `lost` just after, yields a bogus `attempt_changed`.
--   No row when no lease has this offer id. STABLE, so every query it runs
--   (including lease_fence's) uses the snapshot of the calling statement;
--   plpgsql rather than SQL so its plan is cached per session.
-- Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest
--   (the caller's proof, for the fences).
-- Fences: ql_private.lease_fence.
-- Writes: none. Locks: none (ql_private.lease_open locks before calling it).
-- Errors: none.
-- Caller: ql_private.lease_open (for ql.ack_lease, ql.heartbeat_lease,
--   ql.complete_lease: before locking, and again after locking the rows they
--   change).
CREATE OR REPLACE FUNCTION ql_private.lease_state(
    p_offer_id uuid,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea
)
RETURNS TABLE (
    lease ql_private.run_leases,
    attempt ql_private.attempts,
    run ql_private.runs,
    category text
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT rl, aa, rr,
           ql_private.lease_fence(rl, p_worker_id, p_session_id, p_generation, p_token_digest)
      FROM ql_private.run_leases rl
      JOIN ql_private.attempts aa ON aa.id = rl.attempt_id
      JOIN ql_private.runs rr ON rr.id = rl.run_id
     WHERE rl.offer_id = p_offer_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_state(uuid, uuid, uuid, bigint, bytea) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.lease_state(uuid, uuid, uuid, bigint, bytea) IS
'Lease, attempt, run and lease_fence verdict of an offer id, read in one statement (one snapshot). Inputs: p_offer_id and the caller''s proof (p_worker_id, p_session_id, p_generation, p_token_digest). No row for an unknown offer. Fences: lease_fence. Writes: none. Locks: none. Errors: none. Caller: ql_private.lease_open.';
