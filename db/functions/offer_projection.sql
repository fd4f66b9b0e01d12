-- ql_private.offer_projection(lease_id bigint) -> jsonb
--
-- Purpose: the `qinglong/remote-execution-offer@v1` body (without `schema` and
--   `status`, which the ingress adds) rebuilt purely from the durable lease, its
--   run and its pinned execution revision. The first claim and every replay call
--   this same function, which is why a replay returns the very same offer.
-- Never contains the lease token or its digest (R-LEASE-2).
-- `executionRevision.placement` is omitted for old revisions without one
--   (R-REV-2), exactly as in the canonical bytes the content digest covers.
-- The JSON itself is built by ql_private.offer_json(lease, run, revision), which
--   the claim calls with the rows it already holds — so the first answer and
--   every replay come from one definition.
-- Caller: ql_private.recover_offer. Locks: none. Read-only. SQLSTATEs: none
--   (NULL when the lease does not exist).
CREATE OR REPLACE FUNCTION ql_private.offer_projection(p_lease_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- plpgsql, not SQL: a non-inlinable SQL function is re-planned on every call,
    -- a plpgsql statement keeps its plan for the connection.
    RETURN (SELECT ql_private.offer_json(l, r, er)
              FROM ql_private.run_leases l
              JOIN ql_private.runs r ON r.id = l.run_id
              JOIN ql_private.execution_revisions er ON er.id = l.execution_revision_id
             WHERE l.id = p_lease_id);
END
$$;
REVOKE ALL ON FUNCTION ql_private.offer_projection(bigint) FROM PUBLIC;
