-- ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text,
--                     p_attempt_no integer DEFAULT NULL, p_offset bigint DEFAULT 0,
--                     p_max_bytes integer DEFAULT 1048576) -> jsonb
--
-- Purpose: `GET /v1/runs/{id}/log?offset=N[&attempt=N]` of the producer API
--   (SPEC §13.4, §15.3): ql.run_log's document {runId, attemptNumber, offset,
--   text, storedBytes, logBytes, truncated, complete, ended} for a run of the
--   token's project only (another project's run is not_found, like an unknown
--   one). Following (`follow=1`) is the API calling this again from the next
--   offset: every call checks the token anew, so a revoked token stops a follow.
-- Inputs: the token id and digest; p_run_id (lowercase canonical UUID);
--   p_attempt_no (NULL = the run's latest attempt), p_offset, p_max_bytes as
--   ql.run_log.
-- Fences: token valid, unrevoked, unexpired, scope log; run in the token's
--   project (ql_private.producer_run).
-- Writes: none. Locks: none.
-- Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
--   QL004 unknown or foreign run (COLUMN runId); then ql.run_log's (unknown
--   attempt, offset or max bytes out of bounds).
-- Caller: ql_producer.
CREATE OR REPLACE FUNCTION ql.producer_run_log(
    p_token_id text,
    p_token_digest bytea,
    p_run_id text,
    p_attempt_no integer DEFAULT NULL,
    p_offset bigint DEFAULT 0,
    p_max_bytes integer DEFAULT 1048576
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'log');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    RETURN ql.run_log(p_run_id => v_run_id, p_attempt_no => p_attempt_no,
                      p_offset => p_offset, p_max_bytes => p_max_bytes);
END
$$;
REVOKE ALL ON FUNCTION ql.producer_run_log(text, bytea, text, integer, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.producer_run_log(text, bytea, text, integer, bigint, integer) TO ql_producer;
