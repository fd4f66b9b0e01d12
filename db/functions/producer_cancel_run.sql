-- ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) -> jsonb
--
-- Purpose: `POST /v1/runs/{id}/cancel` of the producer API (SPEC §13.4): exactly
--   ql.cancel_run on a run of the token's project (another project's run is
--   not_found, like an unknown one), answering the §9.4 show document
--   (ql.show_run) as it is after the action.
-- Inputs: the token id and digest; p_run_id (lowercase canonical UUID).
-- Fences: token valid, unrevoked, unexpired, scope cancel; run in the token's
--   project; then those of ql.cancel_run.
-- Writes: as ql.cancel_run (its event names the acting login, session_user);
--   nothing on any error.
-- Locks: as ql.cancel_run.
-- Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
--   QL004 unknown or foreign run (COLUMN runId); then ql.cancel_run's.
-- Caller: ql_producer.
CREATE OR REPLACE FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'cancel');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    PERFORM ql.cancel_run(p_run_id => v_run_id::text);
    RETURN ql.show_run(p_run_id => v_run_id::text);
END
$$;
REVOKE ALL ON FUNCTION ql.producer_cancel_run(text, bytea, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.producer_cancel_run(text, bytea, text) TO ql_producer;
