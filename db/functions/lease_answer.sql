-- ql_private.lease_answer(p_lease, p_state, p_cancel_requested) -> jsonb
--
-- Purpose: the `qinglong/lease@v1` body (without `schema`, which the ingress
--   adds; SPEC §4.7) from values the caller holds: the lease fields of the offer
--   projection (ql_private.lease_json: same names and values as offer@v1
--   `lease`), plus `state` = the state of the lease's own attempt (not the run's
--   current one: after a retry the old lease still reports its failed attempt),
--   `startedAtMs` (null before the starting ACK) and `cancelRequested` (the run's
--   flag; how a started worker learns of a cancel). The one definition of that
--   shape: ql_private.lease_projection reads the rows and calls it; a lifecycle
--   call that just changed the lease (UPDATE … RETURNING) answers with it
--   directly, without reading the rows again.
-- Never contains the lease token or its digest (R-LEASE-2).
-- Inputs: the lease row; its attempt's state; its run's cancel flag.
-- Writes: none. Locks: none. Errors: none. SQL, so it is inlined.
-- Caller: ql_private.lease_projection, ql.ack_lease, ql.heartbeat_lease,
--   ql.complete_lease.
CREATE OR REPLACE FUNCTION ql_private.lease_answer(
    p_lease ql_private.run_leases,
    p_state text,
    p_cancel_requested boolean
)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT ql_private.lease_json(p_lease) || jsonb_build_object(
        'state', p_state,
        'startedAtMs', ql_private.epoch_ms((p_lease).started_at),
        'cancelRequested', p_cancel_requested)
$$;
REVOKE ALL ON FUNCTION ql_private.lease_answer(ql_private.run_leases, text, boolean) FROM PUBLIC;
