-- ql.list_data_keys() -> jsonb {keys: [{projectId, keyId, kekId, nonce, wrappedKey}]}
--
-- Purpose: what `admin secret rotate-kek` re-wraps (SPEC §14.1): every
--   project's wrapped data key (bytes as lowercase hex), in key id order. Only
--   wrapped keys: without the key-encryption key file they reveal nothing.
-- Inputs: none. Fences: none. Writes: none (STABLE). Locks: none.
-- Errors: none.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.list_data_keys()
RETURNS jsonb
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('keys', coalesce(jsonb_agg(jsonb_build_object(
               'projectId', k.project_id, 'keyId', k.key_id, 'kekId', k.kek_id,
               'nonce', encode(k.nonce, 'hex'), 'wrappedKey', encode(k.wrapped_key, 'hex'))
               ORDER BY k.key_id), '[]'::jsonb))
      FROM ql_private.project_data_keys k
$$;
REVOKE ALL ON FUNCTION ql.list_data_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.list_data_keys() TO ql_runtime;
