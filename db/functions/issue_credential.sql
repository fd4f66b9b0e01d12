-- ql.issue_credential(worker_id text, credential_id text, secret_digest bytea) -> jsonb
--
-- Purpose: attach a bearer credential to a worker (SPEC §5, §8). The caller
--   generates the id and the secret and sends only SHA-256 of the secret's 43
--   ASCII bytes; the secret never reaches the database.
-- Returns {credentialId, workerId}.
-- Caller: ql_runtime (control plane). Locks: the worker row FOR KEY SHARE (via
--   the existence check), so the worker cannot vanish underneath.
-- Writes: one worker_credentials row.
-- Idempotency: none; re-issuing an existing id is refused (QL001), never a
--   silent overwrite of its digest.
-- SQLSTATEs: QL001 malformed worker id / credential id not ^[a-z0-9]{16}$ /
--   digest not 32 bytes / credential id already exists; QL004 unknown worker.
CREATE OR REPLACE FUNCTION ql.issue_credential(
    worker_id text,
    credential_id text,
    secret_digest bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid := ql_private.parse_uuid(issue_credential.worker_id, 'workerId');
    digest bytea := ql_private.require_digest(issue_credential.secret_digest, 'secretDigest');
    inserted text;
BEGIN
    IF issue_credential.credential_id IS NULL
       OR issue_credential.credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    PERFORM 1 FROM ql_private.workers w WHERE w.id = wid FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_credentials AS c (credential_id, worker_id, secret_digest)
    VALUES (issue_credential.credential_id, wid, digest)
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING c.credential_id INTO inserted;
    IF inserted IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'credentialId already exists';
    END IF;
    RETURN jsonb_build_object('credentialId', inserted, 'workerId', wid);
END
$$;
REVOKE ALL ON FUNCTION ql.issue_credential(text, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.issue_credential(text, text, bytea) TO ql_runtime;
COMMENT ON FUNCTION ql.issue_credential(text, text, bytea) IS
'Store a worker credential (id + SHA-256 of the secret, never the secret); returns {credentialId, workerId}. Caller: ql_runtime. Locks: worker row FOR KEY SHARE. Not idempotent. QL001 malformed/duplicate id or digest, QL004 unknown worker.';
