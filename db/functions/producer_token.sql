-- ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) -> uuid
--
-- Purpose: the authentication and authorization of every producer call (SPEC
--   §13.4): the project token `qlp_<p_token_id>_<secret>` whose SHA-256 digest
--   (of the whole token string) is p_token_digest must exist, match, be
--   unrevoked and unexpired (clock_timestamp(): checked on every call, so a
--   revocation or an expiry stops the token at the next request), and hold
--   p_scope. Returns the token's project id; the caller then confines what it
--   reads or writes to that project.
-- How: one primary-key probe; the stored digest is compared with
--   ql_private.digest_equal (constant time). An unknown id still runs one
--   comparison (against a zero digest), so timing tells nothing about which
--   ids exist.
-- Inputs: p_token_id, p_token_digest (32 bytes), p_scope (enqueue | read |
--   cancel | retry | log).
-- Fences: digest, revoked_at IS NULL, expires_at > now, p_scope = ANY (scopes).
-- Writes: none. Locks: none.
-- Errors: QL030 token_invalid (unknown id, malformed id or digest, wrong
--   digest, revoked, expired: one answer for all, 401); QL031 scope_missing
--   (a valid token without p_scope, 403). No message ever carries the id or
--   the digest.
-- Caller: ql.producer_cancel_run, ql.producer_enqueue, ql.producer_list_runs,
--   ql.producer_retry_run, ql.producer_run_log, ql.producer_show_run.
CREATE OR REPLACE FUNCTION ql_private.producer_token(
    p_token_id text, p_token_digest bytea, p_scope text)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_token ql_private.project_tokens;
    v_match boolean;
BEGIN
    IF p_token_id IS NOT NULL AND p_token_id ~ '^[a-z0-9]{16}$' THEN
        SELECT t.* INTO v_token FROM ql_private.project_tokens t WHERE t.id = p_token_id;
    END IF;
    v_match := ql_private.digest_equal(
        coalesce(v_token.token_digest, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea),
        p_token_digest);
    IF v_token.id IS NULL OR NOT v_match OR v_token.revoked_at IS NOT NULL
       OR (v_token.expires_at IS NOT NULL AND v_token.expires_at <= clock_timestamp()) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL030', MESSAGE = 'token_invalid';
    END IF;
    IF p_scope IS NULL OR NOT p_scope = ANY (v_token.scopes) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL031', MESSAGE = 'scope_missing';
    END IF;
    RETURN v_token.project_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.producer_token(text, bytea, text) FROM PUBLIC;
