-- ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea,
--                     p_wrapped_key bytea) -> jsonb
--
-- Purpose: the data key of a project's secrets (SPEC §14.1), installed on first
--   use. `admin secret set` generates a fresh AES-256 data key, wraps it with
--   its key-encryption key (KEK, a key file the database never sees; AES-256-GCM
--   with associated data binding project id and key id: service/secrets_crypto.py)
--   and offers it here: a project without a data key gets this one, a project
--   with one keeps it (the offered one is discarded). Answers the stored key
--   either way, so the caller encrypts under the key the project really has.
--   The project is created when it does not exist yet (with its default pool,
--   like ql.create_pool).
-- Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_key_id (32 lowercase
--   hex), p_kek_id (^[a-z0-9][a-z0-9._-]{0,63}$), p_nonce (12 bytes),
--   p_wrapped_key (48 bytes: 32 + the GCM tag).
-- Fences: one KEK at a time: while any data key is wrapped by another KEK than
--   p_kek_id (after `admin secret rotate-kek`, the old key file), nothing is
--   installed (QL041 kek_mismatch), so no two KEKs are ever needed at once.
-- Returns {project, projectId, keyId, kekId, nonce, wrappedKey, created}
--   (bytes as lowercase hex).
-- Writes: the project row (and its default pool) on first use; one
--   project_data_keys row when the project had none. Nothing else.
-- Locks: none beyond the primary key (INSERT ... ON CONFLICT DO NOTHING: of two
--   concurrent first calls one key wins, both answer it).
-- Idempotency: a project's key, once stored, is answered unchanged.
-- Errors: QL001 malformed input (COLUMN project|keyId|kekId|nonce|wrappedKey);
--   QL041 kek_mismatch (another KEK wraps the stored keys).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.project_data_key(
    p_project text,
    p_key_id text,
    p_kek_id text,
    p_nonce bytea,
    p_wrapped_key bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid;
    v_key ql_private.project_data_keys;
    v_created boolean;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_key_id IS NULL OR p_key_id !~ '^[a-f0-9]{32}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keyId',
            MESSAGE = 'key id must be 32 lowercase hex digits';
    END IF;
    IF p_kek_id IS NULL OR p_kek_id !~ '^[a-z0-9][a-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'kekId',
            MESSAGE = 'KEK id must match ^[a-z0-9][a-z0-9._-]{0,63}$';
    END IF;
    IF p_nonce IS NULL OR octet_length(p_nonce) <> 12 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'nonce',
            MESSAGE = 'nonce must be 12 bytes';
    END IF;
    IF p_wrapped_key IS NULL OR octet_length(p_wrapped_key) <> 48 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'wrappedKey',
            MESSAGE = 'wrapped key must be 48 bytes (AES-256 key + GCM tag)';
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.project_data_keys k WHERE k.kek_id <> p_kek_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL041', COLUMN = 'kekId',
            MESSAGE = 'kek_mismatch: the stored data keys are wrapped by another key-encryption key';
    END IF;

    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.project_data_keys AS k (project_id, key_id, kek_id, nonce, wrapped_key)
    VALUES (v_project_id, p_key_id, p_kek_id, p_nonce, p_wrapped_key)
    ON CONFLICT (project_id) DO NOTHING
    RETURNING k.* INTO v_key;
    v_created := FOUND;
    IF NOT v_created THEN
        SELECT k.* INTO STRICT v_key FROM ql_private.project_data_keys k
         WHERE k.project_id = v_project_id;
    END IF;
    RETURN jsonb_build_object(
        'project', p_project, 'projectId', v_project_id, 'keyId', v_key.key_id,
        'kekId', v_key.kek_id, 'nonce', encode(v_key.nonce, 'hex'),
        'wrappedKey', encode(v_key.wrapped_key, 'hex'), 'created', v_created);
END
$$;
REVOKE ALL ON FUNCTION ql.project_data_key(text, text, text, bytea, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.project_data_key(text, text, text, bytea, bytea) TO ql_runtime;
