-- ql_private.recover_fence(lease, worker_id, session_id, generation, token_digest) -> text
--
-- Purpose: every fence a replayed offer must pass (SPEC §3.3 step 1); returns the
--   first failing conflict category (ql_private.lease_verdict, replay rules), or
--   NULL when the offer may be rebuilt.
-- Inputs: the lease row (read by its offer id) and the caller's proof.
-- Reads the lease's session, attempt, run and the run's revision digest in ONE
--   statement (one snapshot), then ql_private.lease_verdict decides on them, with
--   clock_timestamp() as now.
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.recover_offer.
CREATE OR REPLACE FUNCTION ql_private.recover_fence(
    l ql_private.run_leases,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea
)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_category text;
BEGIN
    SELECT ql_private.lease_verdict(l, ws, aa, rr, er.content_digest, p_worker_id, p_session_id,
                                    p_generation, p_token_digest, v_now, false)
      INTO v_category
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = l.session_id
      LEFT JOIN ql_private.attempts aa ON aa.id = l.attempt_id
      LEFT JOIN ql_private.runs rr ON rr.id = l.run_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id;
    RETURN v_category;
END
$$;
REVOKE ALL ON FUNCTION ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea)
    FROM PUBLIC;
COMMENT ON FUNCTION ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea) IS
'Fences of an offer replay (ql_private.lease_verdict, replay rules) in order: offer_foreign, token_mismatch, session_replaced, session_draining, lease_expired, lease_terminal, attempt_changed, revision_drift; NULL when all hold. Reads session, attempt, run and revision digest in one statement. Read-only.';
