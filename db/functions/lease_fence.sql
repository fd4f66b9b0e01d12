-- ql_private.lease_fence(p_lease, p_worker_id, p_session_id, p_generation,
--                        p_token_digest) -> text
--
-- Purpose: the fences of every lease lifecycle call (ACK, heartbeat, completion;
--   SPEC §7), in the order of ql_private.recover_fence, which it reuses:
--     offer_foreign, token_mismatch, session_replaced, lease_expired,
--     lease_terminal, attempt_changed, revision_drift
--   plus the one rule that differs from an offer replay: a lease past its
--   expires_at (by clock_timestamp()) accepts no worker operation any more, started
--   or not. From that instant the lease belongs to the sweeper, so the answer is
--   `lease_expired` whether or not a sweeper already released it; a lease the
--   sweeper released as `lost` therefore also answers `lease_expired` (never
--   `lease_terminal`), so the worker's answer does not depend on sweeper timing.
--   Returns the first failing category, or NULL when the lease is live, unexpired
--   and every fence holds. `lease_terminal` is returned for leases released by
--   completion (`completed`, `cancelled`, `start_failed`): ql_private.lease_open
--   then checks, by the lease version, whether the call is an exact replay of
--   the operation that released it before the caller answers conflict.
-- Inputs: p_lease (the lease row), p_worker_id, p_session_id, p_generation,
--   p_token_digest (the caller's proof).
-- Fences: as above (the token digest compared in constant time).
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.lease_state (for ql_private.lease_open).
CREATE OR REPLACE FUNCTION ql_private.lease_fence(
    p_lease ql_private.run_leases,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea
)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_category text;
BEGIN
    v_category := ql_private.recover_fence(p_lease, p_worker_id, p_session_id, p_generation,
                                           p_token_digest);
    IF v_category = 'lease_terminal' AND p_lease.release_reason = 'lost' THEN
        RETURN 'lease_expired';
    END IF;
    IF v_category IS NULL AND p_lease.expires_at <= clock_timestamp() THEN
        RETURN 'lease_expired';
    END IF;
    RETURN v_category;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_fence(ql_private.run_leases, uuid, uuid, bigint, bytea)
    FROM PUBLIC;
COMMENT ON FUNCTION ql_private.lease_fence(ql_private.run_leases, uuid, uuid, bigint, bytea) IS
'Fences of a lease ACK/heartbeat/completion. Inputs: p_lease, p_worker_id, p_session_id, p_generation, p_token_digest. ql_private.recover_fence order (offer_foreign, token_mismatch, session_replaced, lease_expired, lease_terminal, attempt_changed, revision_drift), plus: a live lease past expires_at (started or not) and a lease released as lost answer lease_expired. NULL = live, unexpired, all fences hold. Writes: none. Locks: none. Errors: none. Caller: ql_private.lease_state.';
