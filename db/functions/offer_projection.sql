-- ql_private.offer_projection(lease_id bigint) -> jsonb
--
-- Purpose: the `qinglong/remote-execution-offer@v1` body (without `schema` and
--   `status`, which the ingress adds) rebuilt purely from the durable lease, its
--   run and its pinned execution revision. The first claim and every replay call
--   this same function, which is why a replay returns the very same offer.
-- Never contains the lease token or its digest (R-LEASE-2).
-- `executionRevision.placement` is omitted for old revisions without one
--   (R-REV-2), exactly as in the canonical bytes the content digest covers.
-- Caller: ql.pull_offer. Locks: none. Read-only. SQLSTATEs: none (NULL when the
--   lease does not exist).
-- plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
-- call, a plpgsql one keeps its plan for the session (this is on the pull hot path).
CREATE OR REPLACE FUNCTION ql_private.offer_projection(p_lease_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'offerId', l.offer_id,
        'target', jsonb_build_object(
            'workerId', l.worker_id,
            'sessionId', l.session_id,
            'generation', l.session_generation),
        'candidate', jsonb_build_object(
            'runId', r.id,
            'attemptId', l.attempt_id,
            'projectId', r.project_id,
            'taskId', r.task_id,
            'executionRevisionId', l.execution_revision_id,
            'priority', r.priority,
            'queuedAtMs', ql_private.epoch_ms(r.created_at)),
        'executionRevision', jsonb_build_object(
            'id', er.id,
            'taskId', er.task_id,
            'revision', er.revision,
            'kind', er.kind,
            'executor', er.executor,
            'spec', er.spec,
            'contentDigest', er.content_digest,
            'createdAtMs', ql_private.epoch_ms(er.created_at))
            || CASE WHEN er.placement IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('placement', er.placement) END,
        'contentDigest', l.content_digest,
        'placementScore', l.placement_score,
        'lease', jsonb_build_object(
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
            'updatedAtMs', ql_private.epoch_ms(l.updated_at)))
      FROM ql_private.run_leases l
      JOIN ql_private.runs r ON r.id = l.run_id
      JOIN ql_private.execution_revisions er ON er.id = l.execution_revision_id
     WHERE l.id = p_lease_id);
END
$$;
REVOKE ALL ON FUNCTION ql_private.offer_projection(bigint) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.offer_projection(bigint) IS
'offer@v1 projection (without schema/status) rebuilt from the durable lease, run and pinned revision; identical for claim and replay; never carries the token or its digest. Read-only.';
