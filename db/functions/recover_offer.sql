-- ql_private.recover_offer(worker_id, session_id, generation, offer_id, token_digest) -> jsonb
--
-- Purpose: step 1 of a pull (SPEC §3.3): if a lease with this offer id already
--   exists, the worker is retrying a pull whose response it lost. Prove the same
--   capability and every fence, then return the *same* offer rebuilt from the
--   durable lease: `{"status":"idempotent","offer":…}` — no second lease, no
--   second event, no write at all. Any drift: `{"status":"conflict","category":…}`.
--   NULL when no lease has this offer id (the caller goes on to claim).
-- Check order (why): the owning worker first (another worker learns nothing but
--   `offer_foreign`), then the token (a wrong token learns nothing about session
--   or lease state), then session, lease, attempt and revision fences.
-- Categories: offer_foreign, token_mismatch, session_replaced, session_draining,
--   lease_expired, lease_terminal, attempt_changed, revision_drift.
-- Caller: ql.pull_offer, ql.pull_offers.
-- Locks: none. Read-only. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.recover_offer(
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_offer_id uuid,
    p_token_digest bytea
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    l ql_private.run_leases;
    category text;
BEGIN
    SELECT * INTO l FROM ql_private.run_leases WHERE offer_id = p_offer_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    category := ql_private.recover_fence(l, p_worker_id, p_session_id, p_generation,
                                         p_token_digest);
    IF category IS NOT NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', category);
    END IF;
    RETURN jsonb_build_object('status', 'idempotent',
                              'offer', ql_private.offer_projection(l.id));
END
$$;
REVOKE ALL ON FUNCTION ql_private.recover_offer(uuid, uuid, bigint, uuid, bytea) FROM PUBLIC;
