-- ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea,
--                     p_ttl_s bigint DEFAULT NULL) -> jsonb
--
-- Purpose: attach a bearer credential to a worker (SPEC §5, §8). The caller
--   generates the id and the secret and sends only SHA-256 of the secret's 43
--   ASCII bytes; the secret never reaches the database.
-- Inputs: p_worker_id (lowercase canonical UUID), p_credential_id
--   (^[a-z0-9]{16}$), p_secret_digest (32 bytes), p_ttl_s (the lifetime,
--   10 s .. 3650 d, SPEC §16.2 `--credential-ttl`; NULL = never expires).
-- Fences: the worker exists; the credential id is new.
-- Returns {credentialId, workerId, expiresAtMs (null: never)}.
-- Writes: one worker_credentials row.
-- Locks: the worker row FOR KEY SHARE (via the existence check), so the worker
--   cannot vanish underneath.
-- Idempotency: none; re-issuing an existing id is refused (QL001), never a
--   silent overwrite of its digest.
-- Errors: QL001 malformed worker id / credential id not ^[a-z0-9]{16}$ /
--   digest not 32 bytes / credential id already exists; QL006 (COLUMN
--   credentialTtlS) p_ttl_s outside 10 .. 315360000; QL004 unknown worker.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.issue_credential(
    p_worker_id text,
    p_credential_id text,
    p_secret_digest bytea,
    p_ttl_s bigint DEFAULT NULL
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
    v_expires_at timestamptz;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_credential_id IS NULL OR p_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    IF p_ttl_s IS NOT NULL AND p_ttl_s NOT BETWEEN 10 AND 315360000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'credentialTtlS',
            MESSAGE = 'credentialTtlS must be between 10 s and 3650 d';
    END IF;
    PERFORM 1 FROM ql_private.workers w WHERE w.id = v_worker_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_credentials AS c
           (credential_id, worker_id, secret_digest, created_at, ttl_s, expires_at)
    VALUES (p_credential_id, v_worker_id, v_secret_digest, v_now, p_ttl_s,
            v_now + make_interval(secs => p_ttl_s))
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING c.credential_id, c.expires_at INTO v_inserted, v_expires_at;
    IF v_inserted IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'credentialId already exists';
    END IF;
    RETURN jsonb_build_object('credentialId', v_inserted, 'workerId', v_worker_id,
                              'expiresAtMs', ql_private.epoch_ms(v_expires_at));
END
$$;
REVOKE ALL ON FUNCTION ql.issue_credential(text, text, bytea, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.issue_credential(text, text, bytea, bigint) TO ql_runtime;
