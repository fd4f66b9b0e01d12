-- ql_private.candidate_page(after_priority, after_seq, limit) -> SETOF candidate rows
--
-- Purpose: one keyset page of dispatch candidates (SPEC §3.1, R-CAND), in
--   priority DESC, queue_seq, id order (queue_seq is unique, so id never decides
--   but is kept in the index for a total order). Returns up to `limit + 1` rows so
--   the caller can report `truncated` exactly.
-- Candidate: run runtime-owned, not cancel-requested, queued|dispatching; its
--   current attempt `claimed`, executor remote_worker, not_before passed; and no
--   live lease that is started or unexpired (by clock_timestamp()).
-- Keyset: (after_priority, after_seq) NULL = first page. The mixed-direction key
--   is split into two index range scans of runs_candidate_keyset (same priority
--   after the seq, then lower priorities), so no OFFSET and no sort of the queue.
-- Caller: ql.pull_offer. Locks: none (read-only; no writes, so an idle pull
--   generates no WAL). SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.candidate_page(
    p_after_priority smallint,
    p_after_seq bigint,
    p_limit integer
)
RETURNS TABLE (
    run_id uuid,
    project_id uuid,
    task_id uuid,
    execution_revision_id uuid,
    priority smallint,
    queue_seq bigint,
    attempt_id uuid,
    queued_at timestamptz
)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH keyed AS (
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          WHERE p_after_priority IS NOT NULL
            AND r.priority = p_after_priority AND r.queue_seq > p_after_seq
            AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
            AND NOT r.cancel_requested
            AND ql_private.candidate_attempt_ok(r.current_attempt_id)
          ORDER BY r.priority DESC, r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          WHERE (p_after_priority IS NULL OR r.priority < p_after_priority)
            AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
            AND NOT r.cancel_requested
            AND ql_private.candidate_attempt_ok(r.current_attempt_id)
          ORDER BY r.priority DESC, r.queue_seq, r.id
          LIMIT p_limit + 1)
    )
    SELECT k.id, k.project_id, k.task_id, k.execution_revision_id, k.priority,
           k.queue_seq, k.current_attempt_id, k.created_at
      FROM keyed k
     ORDER BY k.priority DESC, k.queue_seq, k.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.candidate_page(smallint, bigint, integer) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.candidate_page(smallint, bigint, integer) IS
'One keyset page (limit + 1 rows) of dispatch candidates in priority DESC, queue_seq, id order (R-CAND). Read-only, no locks. Caller: ql.pull_offer.';
