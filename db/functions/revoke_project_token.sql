-- ql.revoke_project_token(p_token_id text) -> jsonb {tokenId, project, revokedAtMs, revoked}
--
-- Purpose: `admin token revoke --token-id ID` (SPEC §13.4). The token is refused
--   from the next producer call on: every ql.producer_* function reads the row
--   (ql_private.producer_token), no cache in between.
-- Inputs: p_token_id (^[a-z0-9]{16}$).
-- Fences: the token exists.
-- Writes: project_tokens.revoked_at = now when not revoked yet; nothing when
--   it was (revoked = false, the first revocation's time is returned).
-- Locks: the token row (UPDATE).
-- Idempotency: yes.
-- Errors: QL001 malformed id (COLUMN tokenId); QL004 unknown token (COLUMN tokenId).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.revoke_project_token(p_token_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_token ql_private.project_tokens;
    v_revoked boolean := false;
BEGIN
    IF p_token_id IS NULL OR p_token_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id must be 16 characters [a-z0-9]';
    END IF;
    UPDATE ql_private.project_tokens t SET revoked_at = clock_timestamp()
     WHERE t.id = p_token_id AND t.revoked_at IS NULL
    RETURNING t.* INTO v_token;
    v_revoked := FOUND;
    IF NOT v_revoked THEN
        SELECT t.* INTO v_token FROM ql_private.project_tokens t WHERE t.id = p_token_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'tokenId',
                MESSAGE = 'token not found';
        END IF;
    END IF;
    RETURN jsonb_build_object(
        'tokenId', v_token.id,
        'project', (SELECT p.name FROM ql_private.projects p WHERE p.id = v_token.project_id),
        'revokedAtMs', ql_private.epoch_ms(v_token.revoked_at),
        'revoked', v_revoked);
END
$$;
REVOKE ALL ON FUNCTION ql.revoke_project_token(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.revoke_project_token(text) TO ql_runtime;
