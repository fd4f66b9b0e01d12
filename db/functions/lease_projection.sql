-- ql_private.lease_projection(lease_id bigint) -> jsonb
--
-- Purpose: the `qinglong/lease@v1` body of a lease as stored now (without
--   `schema`, which the ingress adds; SPEC §4.7): reads the lease, its attempt
--   and its run and answers ql_private.lease_answer (the shape: lease fields,
--   `state` of the lease's own attempt, `startedAtMs`, `cancelRequested`).
-- Never contains the lease token or its digest (R-LEASE-2). plpgsql (not SQL)
--   so its plan is cached per session.
-- Caller: ql_private.lease_prelude (replays), ql.ack_lease, ql.complete_lease
--   (changes that went through the retry policy).
-- Locks: none. Read-only. SQLSTATEs: none (NULL when the lease does not exist).
CREATE OR REPLACE FUNCTION ql_private.lease_projection(p_lease_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (
    SELECT ql_private.lease_answer(l, a.state, r.cancel_requested)
      FROM ql_private.run_leases l
      JOIN ql_private.attempts a ON a.id = l.attempt_id
      JOIN ql_private.runs r ON r.id = l.run_id
     WHERE l.id = p_lease_id);
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_projection(bigint) FROM PUBLIC;
