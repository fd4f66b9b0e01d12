-- ql.record_auth_denial(credential_id, worker_id, action, reason) -> void
--
-- Purpose: store a denial the ingress decided in process, before any credential
--   lookup could run (missing_credential, malformed_credential, identity_mismatch
--   between certificate, credential and body), so security_audit holds every
--   denial (SPEC §2, §5). The inputs come from an unauthenticated request, so
--   they are stored only when harmless: the credential id only when it matches
--   ^[a-z0-9]{16}$, the worker id only when it is a lowercase canonical UUID,
--   otherwise NULL. Never a secret, digest or request body.
-- Caller: ql_worker_ingress. Locks: none. Writes: one security_audit row.
-- Idempotency: none; every call is a separate audit fact.
-- SQLSTATEs: QL001 when action is not ^[a-z][a-z0-9_.]{0,63}$ or reason is not
--   ^[a-z][a-z0-9_]{0,63}$ (the security_audit CHECK: a reason category has no dots).
CREATE OR REPLACE FUNCTION ql.record_auth_denial(
    credential_id text,
    worker_id text,
    action text,
    reason text
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF record_auth_denial.action IS NULL
       OR record_auth_denial.action !~ '^[a-z][a-z0-9_.]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'action must match ^[a-z][a-z0-9_.]{0,63}$';
    END IF;
    IF record_auth_denial.reason IS NULL
       OR record_auth_denial.reason !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'reason must match ^[a-z][a-z0-9_]{0,63}$';
    END IF;
    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason)
    VALUES (
        CASE WHEN record_auth_denial.credential_id ~ '^[a-z0-9]{16}$'
             THEN record_auth_denial.credential_id END,
        CASE WHEN record_auth_denial.worker_id
                  ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
             THEN record_auth_denial.worker_id::uuid END,
        record_auth_denial.action,
        'denied',
        record_auth_denial.reason);
END
$$;
REVOKE ALL ON FUNCTION ql.record_auth_denial(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.record_auth_denial(text, text, text, text) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.record_auth_denial(text, text, text, text) IS
'Store an ingress-decided denial (missing_credential, malformed_credential, identity_mismatch, ...) in security_audit; credential id kept only if well-formed, worker id only if a canonical UUID. Caller: ql_worker_ingress. Locks: none. Not idempotent (each call is an audit fact). QL001 malformed action/reason.';
