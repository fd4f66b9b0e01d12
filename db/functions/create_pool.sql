-- ql.create_pool(p_project text, p_name text) -> jsonb {poolId, project, name, created}
--
-- Purpose: `admin pool create --project P --name N` (SPEC §13.1). A pool belongs
--   to one project; the project is created when it does not exist yet (with its
--   `default` pool, migration 0019's projects_default_pool trigger).
-- Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_name
--   (^[a-z0-9][a-z0-9._-]{0,62}$).
-- Fences: the names.
-- Writes: the project row (first use), one pools row; nothing when the pool
--   exists.
-- Locks: none beyond the unique indexes (INSERT ON CONFLICT DO NOTHING + re-read:
--   a concurrent creator wins and this call reads its committed row).
-- Idempotency: an existing pool is returned with created = false.
-- Errors: QL001 bad project (COLUMN project) or pool name (COLUMN name).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.create_pool(p_project text, p_name text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid;
    v_pool ql_private.pools;
    v_created boolean := false;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z0-9][a-z0-9._-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'pool name must match ^[a-z0-9][a-z0-9._-]{0,62}$';
    END IF;
    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.pools AS pl (project_id, name) VALUES (v_project_id, p_name)
    ON CONFLICT (project_id, name) DO NOTHING
    RETURNING pl.* INTO v_pool;
    v_created := FOUND;
    IF NOT v_created THEN
        SELECT pl.* INTO STRICT v_pool FROM ql_private.pools pl
         WHERE pl.project_id = v_project_id AND pl.name = p_name;
    END IF;
    RETURN jsonb_build_object('poolId', v_pool.id, 'project', p_project, 'name', v_pool.name,
                              'created', v_created);
END
$$;
REVOKE ALL ON FUNCTION ql.create_pool(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.create_pool(text, text) TO ql_runtime;
