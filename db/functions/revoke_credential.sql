-- ql.revoke_credential(p_credential_id text) -> jsonb {credentialId, revokedAtMs}
--
-- Purpose: stop a credential from authenticating (SPEC §8 `admin credential
--   revoke`). Authentication reads revoked_at inside every worker-facing call,
--   so the revocation applies to the next request after commit (well within
--   the 5 s bound of SPEC §5).
-- Inputs: p_credential_id, ^[a-z0-9]{16}$.
-- Fences: the credential exists.
-- Writes: the credential's revoked_at (only the first time).
-- Locks: the credential row (UPDATE).
-- Idempotency: revoking an already revoked credential returns the original
--   revokedAtMs and writes nothing.
-- Errors: QL001 credential id not ^[a-z0-9]{16}$; QL004 unknown credential.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.revoke_credential(p_credential_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_revoked_at timestamptz;
BEGIN
    IF p_credential_id IS NULL OR p_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    UPDATE ql_private.worker_credentials c
       SET revoked_at = clock_timestamp()
     WHERE c.credential_id = p_credential_id AND c.revoked_at IS NULL
    RETURNING c.revoked_at INTO v_revoked_at;
    IF NOT FOUND THEN
        SELECT c.revoked_at INTO v_revoked_at FROM ql_private.worker_credentials c
         WHERE c.credential_id = p_credential_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'credential not found';
        END IF;
    END IF;
    RETURN jsonb_build_object(
        'credentialId', p_credential_id,
        'revokedAtMs', ql_private.epoch_ms(v_revoked_at));
END
$$;
REVOKE ALL ON FUNCTION ql.revoke_credential(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.revoke_credential(text) TO ql_runtime;
