-- ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text,
--                     p_priority integer DEFAULT 0, p_count integer DEFAULT 1,
--                     p_not_before_ms bigint DEFAULT NULL, p_delay_ms bigint DEFAULT NULL,
--                     p_key text DEFAULT NULL) -> jsonb {runIds, existing}
--
-- Purpose: `POST /v1/runs` of the producer API (SPEC §13.4): queue runs of a
--   task of the token's project. The token must hold the scope `enqueue`
--   (ql_private.producer_token); the task, an id or "<project>/<name>", must be
--   the token's project's (ql_private.producer_task: another project's task is
--   not_found). Then exactly ql.enqueue_runs (scheduling, idempotency key,
--   bounds, disabled/unpublished refusals, pools, events).
-- Inputs: the token id and the SHA-256 digest of the whole token string;
--   p_task; the rest as ql.enqueue_runs.
-- Fences: token valid, unrevoked, unexpired, scope enqueue; task in the token's
--   project; then those of ql.enqueue_runs.
-- Writes: as ql.enqueue_runs (its run.queued events); nothing on any error.
-- Locks: as ql.enqueue_runs.
-- Idempotency: by key, as ql.enqueue_runs.
-- Errors: QL030 token_invalid, QL031 scope_missing; QL001/QL004 task (COLUMN
--   task); then ql.enqueue_runs' errors (QL001/QL002/QL006, COLUMN = the wire
--   field: taskId there is `task` on this API).
-- Caller: ql_producer.
CREATE OR REPLACE FUNCTION ql.producer_enqueue(
    p_token_id text,
    p_token_digest bytea,
    p_task text,
    p_priority integer DEFAULT 0,
    p_count integer DEFAULT 1,
    p_not_before_ms bigint DEFAULT NULL,
    p_delay_ms bigint DEFAULT NULL,
    p_key text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'enqueue');
    v_task_id uuid := ql_private.producer_task(v_project_id, p_task);
BEGIN
    RETURN ql.enqueue_runs(p_task_id => v_task_id::text, p_priority => p_priority,
                           p_count => p_count, p_not_before_ms => p_not_before_ms,
                           p_delay_ms => p_delay_ms, p_key => p_key);
END
$$;
REVOKE ALL ON FUNCTION ql.producer_enqueue(text, bytea, text, integer, integer, bigint, bigint, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.producer_enqueue(text, bytea, text, integer, integer, bigint, bigint, text)
    TO ql_producer;
