-- ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text,
--                       p_states text[] DEFAULT NULL, p_limit integer DEFAULT 100,
--                       p_after text DEFAULT NULL) -> jsonb {runs, next}
--
-- Purpose: `GET /v1/runs?task=&state=&after=&limit=` of the producer API (SPEC
--   §13.4): the §9.4 list document of ql.list_runs for one task of the token's
--   project (an id or "<project>/<name>"; another project's task is not_found),
--   or, without a task (p_task NULL), for every task of the token's project
--   (ql_private.project_runs_page: the same fields and pages over the index
--   runs_project_state_seq, never another project's run).
-- Inputs: the token id and digest; p_task (NULL = the whole project); p_states,
--   p_limit, p_after as ql.list_runs.
-- Fences: token valid, unrevoked, unexpired, scope read; task (when given) or
--   every run listed in the token's project.
-- Writes: none. Locks: none.
-- Errors: QL030 token_invalid, QL031 scope_missing; QL001 task malformed, QL004
--   unknown or foreign task (COLUMN task); then ql.list_runs' (QL001
--   state/after, QL006 limit).
-- Caller: ql_producer.
CREATE OR REPLACE FUNCTION ql.producer_list_runs(
    p_token_id text,
    p_token_digest bytea,
    p_task text,
    p_states text[] DEFAULT NULL,
    p_limit integer DEFAULT 100,
    p_after text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'read');
    v_task_id uuid;
BEGIN
    IF p_task IS NULL THEN
        RETURN ql_private.project_runs_page(v_project_id, p_states, p_limit, p_after);
    END IF;
    v_task_id := ql_private.producer_task(v_project_id, p_task);
    RETURN ql.list_runs(p_task_id => v_task_id::text, p_states => p_states,
                        p_limit => p_limit, p_after => p_after);
END
$$;
REVOKE ALL ON FUNCTION ql.producer_list_runs(text, bytea, text, text[], integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.producer_list_runs(text, bytea, text, text[], integer, text)
    TO ql_producer;
