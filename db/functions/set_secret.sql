-- ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text,
--               p_nonce bytea, p_ciphertext bytea) -> jsonb
--
-- Purpose: `admin secret set --project P --name NAME` (SPEC §14.1): store a new
--   version of a secret, ENCRYPTED by the caller (AES-256-GCM under the
--   project's data key, ql.project_data_key; associated data = project id,
--   name, version, key id: service/secrets_crypto.py). The database never
--   sees the value.
-- Inputs: p_project (an existing project with a data key), p_name
--   (^[a-z][a-z0-9_.-]{0,63}$), p_version (the version this call writes: 1
--   for a new secret, else the current version + 1 — the caller encrypted
--   with it in the associated data), p_key_id (the project's data key id),
--   p_nonce (12 bytes), p_ciphertext (a value of 8 B - 16 KiB + the 16-byte
--   tag: 24 .. 16400 bytes).
-- Fences: the project has a data key and p_key_id is it; p_version is the
--   next version (a concurrent set in between: QL040 secret_conflict, nothing
--   written; the caller encrypts again with the new version).
-- Returns {project, name, version, createdAtMs, updatedAtMs}. Never a value.
-- Writes: the secrets row (insert, or the new version in place); one
--   security_audit row (action secret.set, reason secret_set, actor
--   session_user, detail {project, name, version}).
-- Locks: the secret row (INSERT ... ON CONFLICT DO UPDATE with the version
--   guard): two concurrent sets of the same version — one wins, one QL040.
-- Idempotency: none (each call writes a version).
-- Errors: QL001 malformed (COLUMN project|name|version|keyId|nonce), QL002
--   ciphertext size outside 24 .. 16400 bytes (COLUMN value), QL004 project
--   without a data key (COLUMN project), QL040 secret_conflict.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.set_secret(
    p_project text,
    p_name text,
    p_version integer,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key ql_private.project_data_keys;
    v_row ql_private.secrets;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_.-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'secret name must match ^[a-z][a-z0-9_.-]{0,63}$';
    END IF;
    IF p_version IS NULL OR p_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'version',
            MESSAGE = 'version must be an integer >= 1';
    END IF;
    IF p_nonce IS NULL OR octet_length(p_nonce) <> 12 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'nonce',
            MESSAGE = 'nonce must be 12 bytes';
    END IF;
    IF p_ciphertext IS NULL OR octet_length(p_ciphertext) NOT BETWEEN 8 + 16 AND 16384 + 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'value',
            MESSAGE = 'a secret value is 8 bytes to 16 KiB';
    END IF;
    SELECT k.* INTO v_key
      FROM ql_private.projects p
      JOIN ql_private.project_data_keys k ON k.project_id = p.id
     WHERE p.name = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'project',
            MESSAGE = 'the project has no data key (ql.project_data_key first)';
    END IF;
    IF p_key_id IS DISTINCT FROM v_key.key_id THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keyId',
            MESSAGE = 'key id is not the project''s data key';
    END IF;

    INSERT INTO ql_private.secrets AS s (project_id, name, version, key_id, nonce, ciphertext,
                                         created_at, updated_at)
    VALUES (v_key.project_id, p_name, p_version, p_key_id, p_nonce, p_ciphertext, v_now, v_now)
    ON CONFLICT (project_id, name) DO UPDATE
       SET version = EXCLUDED.version, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
           ciphertext = EXCLUDED.ciphertext, updated_at = EXCLUDED.updated_at
     WHERE s.version = EXCLUDED.version - 1
    RETURNING s.* INTO v_row;
    -- No row: the stored version is not p_version - 1. A row created just now
    -- with p_version > 1: the secret did not exist (raising undoes the insert).
    IF NOT FOUND OR (v_row.created_at = v_now AND p_version <> 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL040', COLUMN = 'version',
            MESSAGE = 'secret_conflict: the secret changed since its version was read';
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.set', 'allowed', 'secret_set', session_user,
            jsonb_build_object('project', p_project, 'name', p_name, 'version', p_version));
    RETURN jsonb_build_object('project', p_project, 'name', v_row.name,
                              'version', v_row.version,
                              'createdAtMs', ql_private.epoch_ms(v_row.created_at),
                              'updatedAtMs', ql_private.epoch_ms(v_row.updated_at));
END
$$;
REVOKE ALL ON FUNCTION ql.set_secret(text, text, integer, text, bytea, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.set_secret(text, text, integer, text, bytea, bytea) TO ql_runtime;
