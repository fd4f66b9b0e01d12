-- ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) -> jsonb
--
-- Purpose: `GET /v1/runs/{id}` of the producer API (SPEC §13.4): the §9.4 show
--   document of ql.show_run, for a run of the token's project only (another
--   project's run is not_found, like an unknown one).
-- Inputs: the token id and digest; p_run_id (lowercase canonical UUID).
-- Fences: token valid, unrevoked, unexpired, scope read; run in the token's
--   project (ql_private.producer_run).
-- Writes: none. Locks: none.
-- Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
--   QL004 unknown or foreign run (COLUMN runId).
-- Caller: ql_producer.
CREATE OR REPLACE FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'read');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    RETURN ql.show_run(p_run_id => v_run_id::text);
END
$$;
REVOKE ALL ON FUNCTION ql.producer_show_run(text, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.producer_show_run(text, bytea, text) TO ql_producer;
