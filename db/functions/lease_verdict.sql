-- ql_private.lease_verdict(p_lease, p_session, p_attempt, p_run, p_revision_digest,
--                          p_worker_id, p_session_id, p_generation, p_token_digest,
--                          p_now, p_lifecycle) -> text
--
-- Purpose: THE fence verdict on a lease, for an offer replay (SPEC §3.3 step 1,
--   ql_private.recover_fence) and for every lease lifecycle call (ACK,
--   heartbeat, completion; SPEC §7, ql_private.lease_open). Returns the first
--   failing conflict category, in this order, or NULL when every fence holds:
--   1 offer_foreign     the lease belongs to another worker
--   2 token_mismatch    the token digest differs (constant-time compare,
--                       ql_private.digest_equal)
--   3 session_replaced  other session/generation, or that session is no longer
--                       active or draining and unexpired (replaced, closed or
--                       lapsed), or the lease was released because its session
--                       went away (replaced, or closed without drain)
--     session_draining  the lease's session is draining (ql.end_session /
--                       ql.disable_worker with drain) and the lease never
--                       started: the drain released it (or will not let it
--                       start). A STARTED lease of a draining session passes
--                       this fence: its attempt may still ACK running,
--                       heartbeat and complete until it ends.
--   4 lease_expired     released as expired, or unstarted and past expires_at
--   5 lease_terminal    released for any other reason (completed, lost, …)
--   6 attempt_changed   the run moved to another attempt, or the attempt left the
--                       state the lease implies (claimed before start, starting/
--                       running after)
--   7 revision_drift    the run's pinned revision or its digest differ from the
--                       lease's
--   With p_lifecycle (an ACK, heartbeat or completion) one rule differs from a
--   replay: a lease past its expires_at accepts no worker operation any more,
--   started or not — from that instant it belongs to the sweeper — so a live
--   lease past expires_at and a lease the sweeper released as `lost` both answer
--   `lease_expired` (never `lease_terminal`): the worker's answer does not depend
--   on the sweeper's timing.
-- Why a pure function of rows the caller read: the fences used to read the
--   session, attempt, run and revision with four statements of their own, on
--   every replay and twice per lifecycle call (before and after its row locks).
--   The callers now read them with the lease in ONE statement (one snapshot,
--   which also rules out a verdict mixed from two snapshots: a lease read live
--   just before a sweeper commits and its attempt read `lost` just after), and
--   this expression decides on them. SQL and IMMUTABLE with no query, so the
--   planner inlines it into the caller's statement; `p_now` is the caller's
--   clock_timestamp(), taken after its locks.
-- Inputs: the lease row; its session (by the lease's session id), attempt (by
--   the lease's attempt id), run (by the lease's run id) and the digest of the
--   run's pinned execution revision; the caller's proof (p_worker_id,
--   p_session_id, p_generation, p_token_digest); p_now; p_lifecycle.
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.recover_fence, ql_private.lease_open.
CREATE OR REPLACE FUNCTION ql_private.lease_verdict(
    p_lease ql_private.run_leases,
    p_session ql_private.worker_sessions,
    p_attempt ql_private.attempts,
    p_run ql_private.runs,
    p_revision_digest text,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea,
    p_now timestamptz,
    p_lifecycle boolean
)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN (p_lease).worker_id <> p_worker_id THEN 'offer_foreign'
        WHEN NOT ql_private.digest_equal((p_lease).token_digest, p_token_digest)
            THEN 'token_mismatch'
        WHEN (p_lease).session_id <> p_session_id
             OR (p_lease).session_generation <> p_generation
             OR (p_session).state NOT IN ('active', 'draining')
             OR (p_session).expires_at <= p_now
             OR (p_lease).release_reason = 'session_replaced'
             OR ((p_lease).release_reason = 'session_closed'
                 AND (p_session).state <> 'draining')
            THEN 'session_replaced'
        WHEN (p_session).state = 'draining' AND (p_lease).started_at IS NULL
            THEN 'session_draining'
        WHEN (p_lease).release_reason = 'expired'
             OR ((p_lease).released_at IS NULL AND (p_lease).started_at IS NULL
                 AND (p_lease).expires_at <= p_now)
            THEN 'lease_expired'
        WHEN (p_lease).released_at IS NOT NULL
            THEN CASE WHEN p_lifecycle AND (p_lease).release_reason = 'lost'
                      THEN 'lease_expired' ELSE 'lease_terminal' END
        WHEN (p_run).current_attempt_id IS DISTINCT FROM (p_lease).attempt_id
             OR ((p_lease).started_at IS NULL AND (p_attempt).state <> 'claimed')
             OR ((p_lease).started_at IS NOT NULL
                 AND (p_attempt).state NOT IN ('starting', 'running'))
            THEN 'attempt_changed'
        WHEN (p_run).execution_revision_id <> (p_lease).execution_revision_id
             OR p_revision_digest IS DISTINCT FROM (p_lease).content_digest
            THEN 'revision_drift'
        WHEN p_lifecycle AND (p_lease).expires_at <= p_now THEN 'lease_expired'
    END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_verdict(
    ql_private.run_leases, ql_private.worker_sessions, ql_private.attempts, ql_private.runs,
    text, uuid, uuid, bigint, bytea, timestamptz, boolean) FROM PUBLIC;
