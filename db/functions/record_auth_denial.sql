-- ql.record_auth_denial(p_credential_id, p_worker_id, p_action, p_reason) -> void
--
-- Purpose: store a denial the ingress decided in process, before any credential
--   lookup could run (missing_credential, malformed_credential, identity_mismatch
--   between certificate, credential and body), so security_audit holds every
--   denial (SPEC §2, §5).
-- Inputs: come from an unauthenticated request, so they are stored only when
--   harmless: p_credential_id only when it matches ^[a-z0-9]{16}$, p_worker_id
--   only when it is a lowercase canonical UUID, otherwise NULL. Never a secret,
--   digest or request body. p_action ^[a-z][a-z0-9_.]{0,63}$, p_reason
--   ^[a-z][a-z0-9_]{0,63}$ (the security_audit CHECK: a reason category has no
--   dots).
-- Fences: none (the denial is the ingress's decision).
-- Writes: one security_audit row.
-- Locks: none.
-- Idempotency: none; every call is a separate audit fact.
-- Errors: QL001 when p_action or p_reason is malformed.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.record_auth_denial(
    p_credential_id text,
    p_worker_id text,
    p_action text,
    p_reason text
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_action IS NULL OR p_action !~ '^[a-z][a-z0-9_.]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'action must match ^[a-z][a-z0-9_.]{0,63}$';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'reason must match ^[a-z][a-z0-9_]{0,63}$';
    END IF;
    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason)
    VALUES (
        CASE WHEN p_credential_id ~ '^[a-z0-9]{16}$' THEN p_credential_id END,
        CASE WHEN p_worker_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
             THEN p_worker_id::uuid END,
        p_action,
        'denied',
        p_reason);
END
$$;
REVOKE ALL ON FUNCTION ql.record_auth_denial(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.record_auth_denial(text, text, text, text) TO ql_worker_ingress;
