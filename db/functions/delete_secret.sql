-- ql.delete_secret(p_project text, p_name text) -> jsonb {project, name, version, deleted}
--
-- Purpose: `admin secret delete --project P --name NAME` (SPEC §14.1): remove a
--   secret (its ciphertext goes with the row). A revision that names it stays
--   as published; a run of it is then answered `secret_missing` by
--   ql.lease_secrets, and a new publish naming it is refused.
-- Inputs: p_project, p_name (^[a-z][a-z0-9_.-]{0,63}$).
-- Fences: the secret exists.
-- Returns {project, name, version (the deleted one), deleted: true}.
-- Writes: deletes the secrets row; one security_audit row (action
--   secret.delete, reason secret_deleted, actor session_user, detail
--   {project, name, version}).
-- Locks: the secret row (DELETE).
-- Idempotency: none: a second delete is QL004.
-- Errors: QL001 malformed (COLUMN project|name), QL004 no such secret (COLUMN name).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.delete_secret(p_project text, p_name text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_version integer;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_.-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'secret name must match ^[a-z][a-z0-9_.-]{0,63}$';
    END IF;
    DELETE FROM ql_private.secrets s
     USING ql_private.projects p
     WHERE p.name = p_project AND s.project_id = p.id AND s.name = p_name
    RETURNING s.version INTO v_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'name',
            MESSAGE = format('secret %s not found in project %s', p_name, p_project);
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.delete', 'allowed', 'secret_deleted', session_user,
            jsonb_build_object('project', p_project, 'name', p_name, 'version', v_version));
    RETURN jsonb_build_object('project', p_project, 'name', p_name, 'version', v_version,
                              'deleted', true);
END
$$;
REVOKE ALL ON FUNCTION ql.delete_secret(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.delete_secret(text, text) TO ql_runtime;
