-- ql_private.lease_json(lease) -> jsonb
--
-- Purpose: the `lease` object of the wire contract from a run_leases row —
--   {runId, attemptId, workerId, sessionId, sessionGeneration, leaseGeneration,
--   leaseVersion, offerId, claimedAtMs, expiresAtMs, updatedAtMs} — the one
--   definition behind offer@v1 `lease` (ql_private.offer_json) and lease@v1
--   (ql_private.lease_projection, which adds state/startedAtMs/cancelRequested).
-- Never contains the lease token or its digest (R-LEASE-2).
-- Pure SQL expression, inlined by the planner.
-- Caller: ql_private.offer_json, ql_private.lease_answer.
-- SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.lease_json(l ql_private.run_leases)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'runId', l.run_id,
        'attemptId', l.attempt_id,
        'workerId', l.worker_id,
        'sessionId', l.session_id,
        'sessionGeneration', l.session_generation,
        'leaseGeneration', l.lease_generation,
        'leaseVersion', l.lease_version,
        'offerId', l.offer_id,
        'claimedAtMs', ql_private.epoch_ms(l.claimed_at),
        'expiresAtMs', ql_private.epoch_ms(l.expires_at),
        'updatedAtMs', ql_private.epoch_ms(l.updated_at))
$$;
REVOKE ALL ON FUNCTION ql_private.lease_json(ql_private.run_leases) FROM PUBLIC;
