-- ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea,
--                         p_scopes text[], p_expires_in_s bigint DEFAULT NULL) -> jsonb
--
-- Purpose: `admin token create --project P --scope ... [--expires-in D]` (SPEC
--   §13.4). The CLI generates the token `qlp_<p_token_id>_<secret>` with a CSPRNG
--   and prints it once; only p_token_digest, the SHA-256 of the whole token
--   string, reaches the database. The project is created when it does not exist
--   yet (with its default pool, like ql.create_pool), so a token can be made
--   before the project's first publish.
--   Returns {tokenId, project, scopes, createdAtMs, expiresAtMs} (scopes sorted,
--   duplicates dropped; expiresAtMs null = never). Never the digest.
-- Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_token_id
--   (^[a-z0-9]{16}$), p_token_digest (32 bytes), p_scopes (1..5 of enqueue,
--   read, cancel, retry, log), p_expires_in_s (NULL = never, else 1..
--   315360000 = 10 years).
-- Fences: the inputs; a token id already used is refused.
-- Writes: one project_tokens row (created_by = session_user); the project row
--   (and its default pool) on first use.
-- Locks: none beyond the unique indexes.
-- Idempotency: none (each call is a new token).
-- Errors: QL001 bad project (COLUMN project), token id (COLUMN tokenId), digest
--   (COLUMN tokenDigest), scope (COLUMN scope); QL006 p_expires_in_s out of
--   bounds (COLUMN expiresIn); QL001 token id already used (COLUMN tokenId).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.create_project_token(
    p_project text,
    p_token_id text,
    p_token_digest bytea,
    p_scopes text[],
    p_expires_in_s bigint DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_all_scopes constant text[] := ARRAY['enqueue', 'read', 'cancel', 'retry', 'log'];
    v_max_expires_s constant bigint := 315360000;
    v_project_id uuid;
    v_scopes text[];
    v_now timestamptz := clock_timestamp();
    v_token ql_private.project_tokens;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_token_id IS NULL OR p_token_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id must be 16 characters [a-z0-9]';
    END IF;
    IF p_token_digest IS NULL OR octet_length(p_token_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenDigest',
            MESSAGE = 'token digest must be 32 bytes (SHA-256)';
    END IF;
    IF p_scopes IS NULL OR cardinality(p_scopes) = 0
       OR EXISTS (SELECT 1 FROM unnest(p_scopes) s WHERE s IS NULL OR s <> ALL (v_all_scopes)) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'scope',
            MESSAGE = 'scopes must be one or more of enqueue, read, cancel, retry, log';
    END IF;
    IF p_expires_in_s IS NOT NULL AND p_expires_in_s NOT BETWEEN 1 AND v_max_expires_s THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'expiresIn',
            MESSAGE = format('expires-in must be between 1 s and %s s', v_max_expires_s);
    END IF;
    v_scopes := ARRAY(SELECT DISTINCT s FROM unnest(p_scopes) s ORDER BY s);

    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.project_tokens AS t (
        id, project_id, token_digest, scopes, created_at, created_by, expires_at)
    VALUES (p_token_id, v_project_id, p_token_digest, v_scopes, v_now, session_user,
            v_now + make_interval(secs => p_expires_in_s))
    ON CONFLICT (id) DO NOTHING
    RETURNING t.* INTO v_token;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id already used';
    END IF;
    RETURN jsonb_build_object(
        'tokenId', v_token.id,
        'project', p_project,
        'scopes', to_jsonb(v_token.scopes),
        'createdAtMs', ql_private.epoch_ms(v_token.created_at),
        'expiresAtMs', ql_private.epoch_ms(v_token.expires_at));
END
$$;
REVOKE ALL ON FUNCTION ql.create_project_token(text, text, bytea, text[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.create_project_token(text, text, bytea, text[], bigint) TO ql_runtime;
