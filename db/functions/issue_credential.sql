-- ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea) -> jsonb
--
-- Purpose: attach a bearer credential to a worker (SPEC §5, §8). The caller
--   generates the id and the secret and sends only SHA-256 of the secret's 43
--   ASCII bytes; the secret never reaches the database.
-- Inputs: p_worker_id (lowercase canonical UUID), p_credential_id
--   (^[a-z0-9]{16}$), p_secret_digest (32 bytes).
-- Fences: the worker exists; the credential id is new.
-- Returns {credentialId, workerId}.
-- Writes: one worker_credentials row.
-- Locks: the worker row FOR KEY SHARE (via the existence check), so the worker
--   cannot vanish underneath.
-- Idempotency: none; re-issuing an existing id is refused (QL001), never a
--   silent overwrite of its digest.
-- Errors: QL001 malformed worker id / credential id not ^[a-z0-9]{16}$ /
--   digest not 32 bytes / credential id already exists; QL004 unknown worker.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.issue_credential(
    p_worker_id text,
    p_credential_id text,
    p_secret_digest bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_secret_digest bytea := ql_private.require_digest(p_secret_digest, 'secretDigest');
    v_inserted text;
BEGIN
    IF p_credential_id IS NULL OR p_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    PERFORM 1 FROM ql_private.workers w WHERE w.id = v_worker_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_credentials AS c (credential_id, worker_id, secret_digest)
    VALUES (p_credential_id, v_worker_id, v_secret_digest)
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING c.credential_id INTO v_inserted;
    IF v_inserted IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'credentialId already exists';
    END IF;
    RETURN jsonb_build_object('credentialId', v_inserted, 'workerId', v_worker_id);
END
$$;
REVOKE ALL ON FUNCTION ql.issue_credential(text, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.issue_credential(text, text, bytea) TO ql_runtime;
COMMENT ON FUNCTION ql.issue_credential(text, text, bytea) IS
'Store a worker credential (id + SHA-256 of the secret, never the secret); returns {credentialId, workerId}. Inputs: p_worker_id, p_credential_id ^[a-z0-9]{16}$, p_secret_digest (32 bytes). Fences: worker exists, id new. Writes: one worker_credentials row. Locks: worker row FOR KEY SHARE. Not idempotent. Errors: QL001 malformed/duplicate id or digest, QL004 unknown worker. Caller: ql_runtime.';
