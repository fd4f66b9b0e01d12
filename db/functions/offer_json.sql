-- ql_private.offer_json(lease, run, revision) -> jsonb
--
-- Purpose: the `qinglong/remote-execution-offer@v1` body (without `schema` and
--   `status`, which the ingress adds) from a lease row, its run row and its
--   pinned execution revision row. Pure: the claim passes the rows it has just
--   written or locked, a replay (ql_private.offer_projection) the rows it reads,
--   so both answers come from this one definition and are identical.
-- Only immutable facts of the run are used (ids, priority, created_at), so the
--   run row from before the claim's own state update gives the same JSON.
-- Never contains the lease token or its digest (R-LEASE-2).
-- `executionRevision.placement` is omitted for old revisions without one
--   (R-REV-2), exactly as in the canonical bytes the content digest covers.
-- `executionRevision.signature` is {kid, jws} of a signed revision, null for an
--   unsigned one (SPEC §16.1); the worker verifies it before it starts anything.
-- Caller: ql_private.claim_candidate, ql_private.offer_projection. Locks: none.
--   SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.offer_json(
    l ql_private.run_leases,
    r ql_private.runs,
    er ql_private.execution_revisions
)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
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
                    ELSE jsonb_build_object('placement', er.placement) END
            || jsonb_build_object('signature', CASE WHEN er.signature_jws IS NULL THEN NULL
                ELSE jsonb_build_object('kid', er.signature_kid, 'jws', er.signature_jws) END),
        'contentDigest', l.content_digest,
        'placementScore', l.placement_score,
        'lease', ql_private.lease_json(l))
$$;
REVOKE ALL ON FUNCTION ql_private.offer_json(
    ql_private.run_leases, ql_private.runs, ql_private.execution_revisions) FROM PUBLIC;
