-- ql_private.claim_candidate(session, attempt_id, revision_id, score, offer_id, token_digest) -> bigint
--
-- Purpose: the atomic claim of SPEC §3.3 step 3 for one candidate. Locks the
--   attempt with FOR UPDATE SKIP LOCKED (and its run with FOR NO KEY UPDATE SKIP
--   LOCKED), so a competing replica is skipped, never waited for; then re-checks
--   every candidate fence on the locked rows by clock_timestamp(): run state,
--   runtime ownership, cancellation, current attempt, pinned revision, attempt
--   state/executor/not_before, and no started or unexpired live lease. A live
--   lease that expired unstarted is released here (`expired`) and the new lease
--   gets lease_generation + 1. Writes: one run_leases row, the run -> dispatching,
--   exactly one `run.dispatched` event.
-- Returns the new lease id, or NULL when the race was lost (row locked by
--   another claimer, or a fence no longer holds) — the caller moves on.
-- The session row must already be locked and re-verified by the caller.
-- Caller: ql_private.scan_and_claim. Idempotency: the offer_id UNIQUE constraint;
--   the caller turns a concurrent duplicate into a replay. SQLSTATEs: none raised
--   (unique_violation on offer_id propagates to the caller).
CREATE OR REPLACE FUNCTION ql_private.claim_candidate(
    s ql_private.worker_sessions,
    p_attempt_id uuid,
    p_revision_id uuid,
    p_score integer,
    p_offer_id uuid,
    p_token_digest bytea
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ts timestamptz := clock_timestamp();
    a ql_private.attempts;
    r ql_private.runs;
    live ql_private.run_leases;
    next_generation integer;
    ttl integer;
    digest text;
    lease_id bigint;
BEGIN
    SELECT * INTO a FROM ql_private.attempts WHERE id = p_attempt_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR a.state <> 'claimed' OR a.executor <> 'remote_worker'
       OR a.not_before > now_ts THEN
        RETURN NULL;
    END IF;
    SELECT * INTO r FROM ql_private.runs WHERE id = a.run_id FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR r.state NOT IN ('queued', 'dispatching') OR NOT r.runtime_owned
       OR r.cancel_requested OR r.current_attempt_id IS DISTINCT FROM a.id
       OR r.execution_revision_id <> p_revision_id THEN
        RETURN NULL;
    END IF;
    SELECT * INTO live FROM ql_private.run_leases
     WHERE attempt_id = a.id AND released_at IS NULL;
    IF FOUND THEN
        IF live.started_at IS NOT NULL OR live.expires_at > now_ts THEN
            RETURN NULL;
        END IF;
        UPDATE ql_private.run_leases
           SET released_at = now_ts, release_reason = 'expired', updated_at = now_ts
         WHERE id = live.id;
    END IF;
    SELECT coalesce(max(lease_generation), 0) + 1 INTO next_generation
      FROM ql_private.run_leases WHERE attempt_id = a.id;
    SELECT t.lease_ttl_seconds INTO ttl FROM ql_private.tasks t WHERE t.id = r.task_id;
    SELECT er.content_digest INTO digest
      FROM ql_private.execution_revisions er WHERE er.id = r.execution_revision_id;
    INSERT INTO ql_private.run_leases (
        attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
        lease_version, offer_id, token_digest, execution_revision_id, content_digest,
        placement_score, claimed_at, expires_at, updated_at)
    VALUES (
        a.id, r.id, s.worker_id, s.session_id, s.generation, next_generation,
        1, p_offer_id, p_token_digest, r.execution_revision_id, digest,
        p_score, now_ts, now_ts + make_interval(secs => ttl), now_ts)
    RETURNING id INTO lease_id;
    UPDATE ql_private.runs SET state = 'dispatching', updated_at = now_ts
     WHERE id = r.id AND state <> 'dispatching';
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.dispatched', r.id, a.id, jsonb_build_object(
        'offerId', p_offer_id,
        'workerId', s.worker_id,
        'sessionId', s.session_id,
        'sessionGeneration', s.generation,
        'leaseGeneration', next_generation,
        'placementScore', p_score,
        'contentDigest', digest));
    RETURN lease_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.claim_candidate(
    ql_private.worker_sessions, uuid, uuid, integer, uuid, bytea) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.claim_candidate(
    ql_private.worker_sessions, uuid, uuid, integer, uuid, bytea) IS
'Atomic claim of one candidate: attempt FOR UPDATE SKIP LOCKED, run FOR NO KEY UPDATE SKIP LOCKED, every fence re-checked by clock_timestamp(); inserts the lease (expired unstarted predecessor released), run -> dispatching, one run.dispatched event. NULL = race lost.';
