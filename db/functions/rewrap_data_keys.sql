-- ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) -> jsonb
--
-- Purpose: `admin secret rotate-kek` (SPEC §14.1): replace the wrap of EVERY
--   project's data key at once, in this one transaction: the CLI unwrapped each
--   key (ql.list_data_keys) with the old key-encryption key file and wrapped it
--   with the new one; the data keys themselves (and so every ciphertext) stay.
--   From the commit on, only the new KEK unwraps anything.
-- Inputs: p_old_kek_id, p_new_kek_id (^[a-z0-9][a-z0-9._-]{0,63}$, different);
--   p_keys: [{keyId, nonce, wrappedKey}] (hex; nonce 12 bytes, wrappedKey 48),
--   exactly one entry per stored data key.
-- Fences: every stored key is wrapped by p_old_kek_id and p_keys names exactly
--   the stored keys (a key created or rotated since the CLI read them: QL040
--   secret_conflict, nothing written; the CLI reads again).
-- Returns {oldKekId, kekId, rewrapped: <count>}.
-- Writes: kek_id, nonce, wrapped_key, updated_at of every project_data_keys row;
--   one security_audit row (action secret.rotate_kek, reason kek_rotated,
--   actor session_user, detail {oldKekId, kekId, keys}).
-- Locks: every project_data_keys row FOR UPDATE (in key id order), so a
--   concurrent ql.project_data_key insert waits or is seen.
-- Idempotency: none: a repeat (the keys now carry p_new_kek_id) is QL041.
-- Errors: QL001 malformed (COLUMN kekId|keys), QL041 kek_mismatch (a stored key
--   is wrapped by another KEK than p_old_kek_id), QL040 secret_conflict.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.rewrap_data_keys(
    p_old_kek_id text,
    p_new_kek_id text,
    p_keys jsonb
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_kek_pattern constant text := '^[a-z0-9][a-z0-9._-]{0,63}$';
    v_stored integer;
    v_count integer;
BEGIN
    IF p_old_kek_id IS NULL OR p_old_kek_id !~ v_kek_pattern
       OR p_new_kek_id IS NULL OR p_new_kek_id !~ v_kek_pattern
       OR p_old_kek_id = p_new_kek_id THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'kekId',
            MESSAGE = 'KEK ids must match ^[a-z0-9][a-z0-9._-]{0,63}$ and differ';
    END IF;
    IF jsonb_typeof(p_keys) IS DISTINCT FROM 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_keys) e
                   WHERE jsonb_typeof(e) <> 'object'
                      OR (SELECT count(*) FROM jsonb_object_keys(e)) <> 3
                      OR coalesce(e ->> 'keyId', '') !~ '^[a-f0-9]{32}$'
                      OR coalesce(e ->> 'nonce', '') !~ '^[a-f0-9]{24}$'
                      OR coalesce(e ->> 'wrappedKey', '') !~ '^[a-f0-9]{96}$')
       OR (SELECT count(DISTINCT e ->> 'keyId') FROM jsonb_array_elements(p_keys) e)
          <> jsonb_array_length(p_keys) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keys',
            MESSAGE = 'keys must be [{keyId, nonce, wrappedKey}] (hex), each key once';
    END IF;

    PERFORM 1 FROM ql_private.project_data_keys k ORDER BY k.key_id FOR UPDATE;
    IF EXISTS (SELECT 1 FROM ql_private.project_data_keys k WHERE k.kek_id <> p_old_kek_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL041', COLUMN = 'kekId',
            MESSAGE = 'kek_mismatch: a stored data key is not wrapped by the old key-encryption key';
    END IF;
    SELECT count(*) INTO v_stored FROM ql_private.project_data_keys;
    UPDATE ql_private.project_data_keys k
       SET kek_id = p_new_kek_id, nonce = decode(e ->> 'nonce', 'hex'),
           wrapped_key = decode(e ->> 'wrappedKey', 'hex'), updated_at = clock_timestamp()
      FROM jsonb_array_elements(p_keys) e
     WHERE k.key_id = e ->> 'keyId';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count <> v_stored OR v_count <> jsonb_array_length(p_keys) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL040', COLUMN = 'keys',
            MESSAGE = 'secret_conflict: the stored data keys changed since they were read';
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.rotate_kek', 'allowed', 'kek_rotated', session_user,
            jsonb_build_object('oldKekId', p_old_kek_id, 'kekId', p_new_kek_id,
                               'keys', v_count));
    RETURN jsonb_build_object('oldKekId', p_old_kek_id, 'kekId', p_new_kek_id,
                              'rewrapped', v_count);
END
$$;
REVOKE ALL ON FUNCTION ql.rewrap_data_keys(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.rewrap_data_keys(text, text, jsonb) TO ql_runtime;
