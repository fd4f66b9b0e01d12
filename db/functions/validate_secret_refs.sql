-- ql_private.validate_secret_refs(p_project text, p_spec jsonb) -> void
--
-- Purpose: the publish fence of a command's `secrets` (SPEC §14.2):
--   spec.secrets is an object of at most 16 entries ENV_NAME
--   (^[A-Za-z_][A-Za-z0-9_]{0,127}$) -> secret name (^[a-z][a-z0-9_.-]{0,63}$);
--   no ENV_NAME is also a key of spec.env (the run's environment would hold
--   two values for it); every named secret exists in project p_project now.
--   The revision pins names only: a value set later is the one delivered.
-- Inputs: p_project (the publishing project's name; it may not exist yet, then
--   it has no secret), p_spec (the revision's spec, with a `secrets` key).
-- Fences: as above. Writes: none. Locks: none (plain reads).
-- Errors: QL001 COLUMN secrets: not an object of strings, too many, a
--   malformed name, an env name in both (named), a secret the project does not
--   have (named, in C order: the first one).
-- Caller: ql.publish_revision.
CREATE OR REPLACE FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_secrets jsonb := p_spec -> 'secrets';
    v_bad text;
BEGIN
    IF jsonb_typeof(v_secrets) IS DISTINCT FROM 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(v_secrets) e WHERE jsonb_typeof(e.value) <> 'string') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets must be an object of secret names';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(v_secrets)) > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets names at most 16 secrets';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each_text(v_secrets) e
                WHERE e.key !~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
                   OR e.value !~ '^[a-z][a-z0-9_.-]{0,63}$') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets maps ENV_NAME (^[A-Za-z_][A-Za-z0-9_]*$) to a secret name (^[a-z][a-z0-9_.-]{0,63}$)';
    END IF;
    SELECT min(k COLLATE "C") INTO v_bad
      FROM jsonb_object_keys(v_secrets) k
     WHERE jsonb_typeof(p_spec -> 'env') = 'object' AND (p_spec -> 'env') ? k;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = format('%s is in both spec.env and spec.secrets', v_bad);
    END IF;
    SELECT min(e.value COLLATE "C") INTO v_bad
      FROM jsonb_each_text(v_secrets) e
     WHERE NOT EXISTS (SELECT 1 FROM ql_private.projects p
                         JOIN ql_private.secrets s ON s.project_id = p.id
                        WHERE p.name = p_project AND s.name = e.value);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = format('secret %s does not exist in project %s (admin secret set)',
                             v_bad, p_project);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION ql_private.validate_secret_refs(text, jsonb) FROM PUBLIC;
