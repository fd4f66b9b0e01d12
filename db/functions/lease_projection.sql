-- ql_private.lease_projection(lease_id bigint) -> jsonb
--
-- Purpose: the `qinglong/lease@v1` body (without `schema`, which the ingress
--   adds; SPEC §4.7): the lease fields of the offer projection (same names and
--   values as offer@v1 `lease`), plus `state` = the state of the lease's own
--   attempt (not the run's current one: after a retry the old lease still reports
--   its failed attempt), `startedAtMs` (null before the starting ACK) and
--   `cancelRequested` (the run's flag; how a started worker learns of a cancel).
-- Never contains the lease token or its digest (R-LEASE-2). plpgsql (not SQL)
--   so its plan is cached per session.
-- Caller: ql.ack_lease, ql.heartbeat_lease, ql.complete_lease.
-- Locks: none. Read-only. SQLSTATEs: none (NULL when the lease does not exist).
CREATE OR REPLACE FUNCTION ql_private.lease_projection(p_lease_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (
    SELECT ql_private.lease_json(l) || jsonb_build_object(
        'state', a.state,
        'startedAtMs', ql_private.epoch_ms(l.started_at),
        'cancelRequested', r.cancel_requested)
      FROM ql_private.run_leases l
      JOIN ql_private.attempts a ON a.id = l.attempt_id
      JOIN ql_private.runs r ON r.id = l.run_id
     WHERE l.id = p_lease_id);
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_projection(bigint) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.lease_projection(bigint) IS
'lease@v1 projection (without schema): offer lease fields + state (the lease''s own attempt) + startedAtMs (null before start) + cancelRequested. Never the token or its digest. Read-only.';
