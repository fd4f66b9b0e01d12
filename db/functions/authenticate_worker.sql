-- ql.authenticate_worker(p_credential_id, p_secret_digest, p_worker_id, p_action) -> jsonb
--
-- Purpose: stand-alone credential check for ingress actions that have no
--   database work of their own (or that a replica caches for <= 5 s, SPEC §5).
--   Returns {"status":"ok"} or the denial envelope of ql_private.authenticate.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret, 32 bytes; the
--   secret itself never reaches the database), p_worker_id (lowercase canonical
--   UUID: the worker the ingress authenticated by certificate), p_action (the
--   audited action name, ^[a-z][a-z0-9_.]{0,63}$).
-- Fences: the credential (ql_private.authenticate: exists, secret matches in
--   constant time, not revoked, belongs to p_worker_id).
-- Writes: nothing when allowed; one security_audit row when denied.
-- Locks: none.
-- Idempotency: read-only when allowed; each denial is its own audit fact.
-- Errors: QL001 p_worker_id not a lowercase canonical UUID, or malformed action.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.authenticate_worker(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_action text
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_denied jsonb;
BEGIN
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, ql_private.parse_uuid(p_worker_id, 'workerId'),
        p_action);
    RETURN coalesce(v_denied, jsonb_build_object('status', 'ok'));
END
$$;
REVOKE ALL ON FUNCTION ql.authenticate_worker(text, bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.authenticate_worker(text, bytea, text, text) TO ql_worker_ingress;
