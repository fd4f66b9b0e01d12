-- ql.list_project_tokens(p_project text DEFAULT NULL) -> jsonb {tokens: [...]}
--
-- Purpose: `admin token list [--project P]` (SPEC §13.4): {tokens: [{tokenId,
--   project, scopes, state, createdAtMs, createdBy, expiresAtMs, revokedAtMs}]},
--   newest first, at most 1000. state: active | expired | revoked (revoked
--   wins). Never the digest (nor, since it is never stored, the token).
-- Inputs: p_project (NULL = every project; else a project name: an unknown one
--   lists nothing).
-- Fences: none. Writes: none (STABLE). Locks: none.
-- Errors: QL001 malformed project (COLUMN project).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.list_project_tokens(p_project text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_tokens jsonb;
BEGIN
    IF p_project IS NOT NULL AND p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'tokenId', x.id,
               'project', x.project,
               'scopes', to_jsonb(x.scopes),
               'state', CASE WHEN x.revoked_at IS NOT NULL THEN 'revoked'
                             WHEN x.expires_at <= v_now THEN 'expired'
                             ELSE 'active' END,
               'createdAtMs', ql_private.epoch_ms(x.created_at),
               'createdBy', x.created_by,
               'expiresAtMs', ql_private.epoch_ms(x.expires_at),
               'revokedAtMs', ql_private.epoch_ms(x.revoked_at))
               ORDER BY x.created_at DESC, x.id), '[]'::jsonb)
      INTO v_tokens
      FROM (SELECT t.id, p.name AS project, t.scopes, t.created_at, t.created_by,
                   t.expires_at, t.revoked_at
              FROM ql_private.project_tokens t
              JOIN ql_private.projects p ON p.id = t.project_id
             WHERE p_project IS NULL OR p.name = p_project
             ORDER BY t.created_at DESC, t.id
             LIMIT 1000) x;
    RETURN jsonb_build_object('tokens', v_tokens);
END
$$;
REVOKE ALL ON FUNCTION ql.list_project_tokens(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.list_project_tokens(text) TO ql_runtime;
