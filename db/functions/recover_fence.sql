-- ql_private.recover_fence(lease, worker_id, session_id, generation, token_digest) -> text
--
-- Purpose: every fence a replayed offer must pass (SPEC §3.3 step 1); returns the
--   first failing conflict category, or NULL when the offer may be rebuilt.
--   1 offer_foreign     lease belongs to another worker
--   2 token_mismatch    token digest differs (constant-time compare)
--   3 session_replaced  other session/generation, or that session is no longer
--                       active and unexpired (replaced, closed or lapsed), or the
--                       lease was released because its session went away
--   4 lease_expired     released as expired, or unstarted and past expires_at
--   5 lease_terminal    released for any other reason (completed, lost, …)
--   6 attempt_changed   the run moved to another attempt, or the attempt left the
--                       state the lease implies (claimed before start, starting/
--                       running after)
--   7 revision_drift    the run's pinned revision or its digest differ from the lease
-- Caller: ql_private.recover_offer and lease lifecycle functions.
-- Locks: none. Read-only. SQLSTATEs: none.
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
    now_ts timestamptz := clock_timestamp();
    s ql_private.worker_sessions;
    a ql_private.attempts;
    r ql_private.runs;
    rev_digest text;
BEGIN
    IF l.worker_id <> p_worker_id THEN
        RETURN 'offer_foreign';
    END IF;
    IF NOT ql_private.digest_equal(l.token_digest, p_token_digest) THEN
        RETURN 'token_mismatch';
    END IF;
    SELECT * INTO s FROM ql_private.worker_sessions WHERE session_id = l.session_id;
    IF l.session_id <> p_session_id OR l.session_generation <> p_generation
       OR s.state <> 'active' OR s.expires_at <= now_ts
       OR l.release_reason IN ('session_replaced', 'session_closed') THEN
        RETURN 'session_replaced';
    END IF;
    IF l.release_reason = 'expired'
       OR (l.released_at IS NULL AND l.started_at IS NULL AND l.expires_at <= now_ts) THEN
        RETURN 'lease_expired';
    END IF;
    IF l.released_at IS NOT NULL THEN
        RETURN 'lease_terminal';
    END IF;
    SELECT * INTO a FROM ql_private.attempts WHERE id = l.attempt_id;
    SELECT * INTO r FROM ql_private.runs WHERE id = l.run_id;
    IF r.current_attempt_id IS DISTINCT FROM l.attempt_id
       OR (l.started_at IS NULL AND a.state <> 'claimed')
       OR (l.started_at IS NOT NULL AND a.state NOT IN ('starting', 'running')) THEN
        RETURN 'attempt_changed';
    END IF;
    SELECT content_digest INTO rev_digest
      FROM ql_private.execution_revisions WHERE id = r.execution_revision_id;
    IF r.execution_revision_id <> l.execution_revision_id
       OR rev_digest IS DISTINCT FROM l.content_digest THEN
        RETURN 'revision_drift';
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea)
    FROM PUBLIC;
COMMENT ON FUNCTION ql_private.recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea) IS
'Fences of an offer replay in order: offer_foreign, token_mismatch, session_replaced, lease_expired, lease_terminal, attempt_changed, revision_drift; NULL when all hold. Read-only.';
