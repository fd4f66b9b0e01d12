-- ql_private.recover_fence(lease, worker_id, session_id, generation, token_digest) -> text
--
-- Purpose: every fence a replayed offer must pass (SPEC §3.3 step 1); returns the
--   first failing conflict category (ql_private.lease_verdict, replay rules), or
--   NULL when the offer may be rebuilt. Then the pool grant (SPEC §13.1): when
--   the lease's worker no longer holds a grant for the run's pool (ql.revoke_pool),
--   the replay answers lease_terminal, started lease or not.
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
    -- After every lease fence, the pool grant (SPEC §13.1): a replay never
    -- hands back an offer of a pool the worker no longer holds — started or not —
    -- and answers lease_terminal (the offer is over for this worker; ql.revoke_pool
    -- released it if it had not started).
    SELECT coalesce(
               ql_private.lease_verdict(l, ws, aa, rr, er.content_digest, p_worker_id,
                                        p_session_id, p_generation, p_token_digest, v_now,
                                        false),
               CASE WHEN NOT coalesce(gw.all_pools, false)
                         AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                                          WHERE g.worker_id = l.worker_id
                                            AND g.pool_id = rr.pool_id)
                    THEN 'lease_terminal' END)
      INTO v_category
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = l.session_id
      LEFT JOIN ql_private.attempts aa ON aa.id = l.attempt_id
      LEFT JOIN ql_private.runs rr ON rr.id = l.run_id
      LEFT JOIN ql_private.workers gw ON gw.id = l.worker_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id;
    RETURN v_category;
END
$$;
REVOKE ALL ON FUNCTION ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea)
    FROM PUBLIC;
