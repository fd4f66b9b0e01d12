-- ql.list_secrets(p_project text) -> jsonb {project, secrets: [...]}
--
-- Purpose: `admin secret list --project P` (SPEC §14.1): the secrets of a
--   project by name: {project, secrets: [{name, version, createdAtMs,
--   updatedAtMs}]}, in name order (C collation). Never a value, a ciphertext
--   or a key.
-- Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$; an unknown project
--   lists nothing).
-- Fences: none. Writes: none (STABLE). Locks: none.
-- Errors: QL001 malformed project (COLUMN project).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.list_secrets(p_project text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_secrets jsonb;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', s.name, 'version', s.version,
               'createdAtMs', ql_private.epoch_ms(s.created_at),
               'updatedAtMs', ql_private.epoch_ms(s.updated_at))
               ORDER BY s.name COLLATE "C"), '[]'::jsonb)
      INTO v_secrets
      FROM ql_private.projects p
      JOIN ql_private.secrets s ON s.project_id = p.id
     WHERE p.name = p_project;
    RETURN jsonb_build_object('project', p_project, 'secrets', v_secrets);
END
$$;
REVOKE ALL ON FUNCTION ql.list_secrets(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.list_secrets(text) TO ql_runtime;
