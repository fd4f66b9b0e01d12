-- ql_private.authenticate(credential_id, secret_digest, worker_id, action) -> jsonb
--
-- Purpose: the credential check every worker-facing function starts with (SPEC
--   §5: authenticate -> authorize -> audit -> act). Returns NULL when the caller
--   may act as worker_id; otherwise stores ONE low-sensitivity row in
--   ql_private.security_audit and returns the denial envelope
--   {"status":"denied","httpStatus":401|403,"reason":...}. Denials are returned,
--   not raised, so the audit row commits with the caller's transaction.
--   Reasons, checked in this order so a caller without the secret learns nothing
--   about the credential's state:
--     malformed_credential 401  id not ^[a-z0-9]{16}$, or digest not 32 bytes
--     unknown_credential   401  no such credential (a dummy constant-time compare
--                               still runs, so timing does not reveal existence)
--     bad_secret           401  digest differs (ql_private.digest_equal)
--     revoked_credential   401  revoked_at set
--     expired_credential   401  expires_at passed (SPEC §16.2: its lifetime,
--                               or a rotated credential's 24 h / first use of
--                               its successor)
--     worker_mismatch      403  the credential belongs to another worker
--     worker_disabled      403  the worker is disabled (ql.disable_worker, SPEC
--                               §9.5): every credential of it is refused until
--                               ql.enable_worker — with one exception, for a
--                               worker disabled with drain: while it has a
--                               draining, unexpired session, the calls that
--                               only let started work end are allowed
--                               (session.heartbeat, session.close, lease.ack,
--                               lease.heartbeat, lease.complete, lease.log,
--                               lease.secrets: a started run still needs its
--                               secrets to start its command).
--                               Their own
--                               fences keep them to the draining session's
--                               STARTED leases (ql_private.lease_verdict:
--                               an unstarted lease of a draining session
--                               answers session_draining); session.open and
--                               offer.pull stay refused: no new work, ever.
--   The audit row holds time, the credential id only when well-formed, the worker
--   id, the action, outcome 'denied' and the reason: never a secret or a digest.
-- Caller: ql.authenticate_worker, ql.open_session, ql.heartbeat_session,
--   ql.close_session, ql.pull_offer, ql.pull_offers, ql.rotate_credential,
--   ql_private.lease_prelude (the lease calls; all from SECURITY DEFINER
--   functions, so this runs as ql_owner).
-- Locks: none (plain read of worker_credentials and the worker's row, one
--   statement: the disabled flag costs one primary-key probe more; a disabled
--   worker's drain exception one probe of worker_sessions_draining). Writes: nothing when allowed
--   (an idle pull must write nothing) — except the first use of a rotated
--   credential (ql_private.credential_first_use: its first_used_at, its
--   predecessor's expires_at, row locks on both) —, exactly one audit row when denied.
-- Idempotency: read-only when allowed; each denial is its own audit fact.
-- SQLSTATEs: QL001 when worker_id is NULL or action is not ^[a-z][a-z0-9_.]{0,63}$
--   (caller bugs, not authentication outcomes).
CREATE OR REPLACE FUNCTION ql_private.authenticate(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id uuid,
    p_action text
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    -- Compared against when the credential is unknown, so the unknown path costs
    -- the same 32-byte constant-time comparison as the known one.
    dummy_digest constant bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
    id_ok boolean := p_credential_id IS NOT NULL AND p_credential_id ~ '^[a-z0-9]{16}$';
    cred record;
    secret_ok boolean;
    reason text;
    http_status integer := 401;
BEGIN
    IF p_worker_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'worker_id is required';
    END IF;
    IF p_action IS NULL OR p_action !~ '^[a-z][a-z0-9_.]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'action must match ^[a-z][a-z0-9_.]{0,63}$';
    END IF;

    IF NOT id_ok OR p_secret_digest IS NULL OR octet_length(p_secret_digest) <> 32 THEN
        reason := 'malformed_credential';
    ELSE
        SELECT c.worker_id, c.secret_digest, c.revoked_at, w.disabled_at, c.expires_at,
               c.rotated_from, c.first_used_at INTO cred
          FROM ql_private.worker_credentials c
          JOIN ql_private.workers w ON w.id = c.worker_id
         WHERE c.credential_id = p_credential_id;
        IF NOT FOUND THEN
            secret_ok := ql_private.digest_equal(p_secret_digest, dummy_digest);
            reason := 'unknown_credential';
        ELSE
            secret_ok := ql_private.digest_equal(p_secret_digest, cred.secret_digest);
            IF NOT secret_ok THEN
                reason := 'bad_secret';
            ELSIF cred.revoked_at IS NOT NULL THEN
                reason := 'revoked_credential';
            ELSIF cred.expires_at IS NOT NULL AND cred.expires_at <= clock_timestamp() THEN
                reason := 'expired_credential';
            ELSIF cred.worker_id <> p_worker_id THEN
                reason := 'worker_mismatch';
                http_status := 403;
            ELSIF cred.disabled_at IS NOT NULL
                  AND NOT (p_action IN ('session.heartbeat', 'session.close', 'lease.ack',
                                        'lease.heartbeat', 'lease.complete', 'lease.log',
                                        'lease.secrets')
                           AND EXISTS (SELECT 1 FROM ql_private.worker_sessions ws
                                        WHERE ws.worker_id = p_worker_id
                                          AND ws.state = 'draining'
                                          AND ws.expires_at > clock_timestamp())) THEN
                reason := 'worker_disabled';
                http_status := 403;
            ELSE
                IF cred.rotated_from IS NOT NULL AND cred.first_used_at IS NULL THEN
                    -- The first use of a rotated credential retires its
                    -- predecessor (SPEC §16.2): the one write it costs, once.
                    PERFORM ql_private.credential_first_use(p_credential_id, cred.rotated_from);
                END IF;
                RETURN NULL;  -- allowed: no write (but a rotated credential's first use)
            END IF;
        END IF;
    END IF;

    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason)
    VALUES (CASE WHEN id_ok THEN p_credential_id END, p_worker_id, p_action, 'denied', reason);
    RETURN jsonb_build_object('status', 'denied', 'httpStatus', http_status, 'reason', reason);
END
$$;
REVOKE ALL ON FUNCTION ql_private.authenticate(text, bytea, uuid, text) FROM PUBLIC;
