-- ql_private.candidate_page(after_priority, after_seq, after_id, limit) -> SETOF candidate rows
--
-- Purpose: one keyset page of dispatch candidates (SPEC §3.1, R-CAND), in
--   priority DESC, queue_seq, id order. Returns up to `limit + 1` rows so the
--   caller can report `truncated` exactly.
-- Candidate: run runtime-owned, not cancel-requested, queued|dispatching; its
--   current attempt `claimed`, executor remote_worker, not_before passed; and no
--   live lease that is started or still unexpired (by clock_timestamp()) — so a
--   released lease, or a live one that expired unstarted, leaves it claimable.
-- Keyset: the position (after_priority, after_seq, after_id), all NULL for the
--   first page, is one row comparison on the ascending key
--   (-priority, queue_seq, id) of the partial index runs_candidate_keyset: a single
--   index range scan, no OFFSET, no sort of the queue (docs/EXPLAIN.md).
-- plpgsql (not SQL) so the plan is prepared once per session and reused.
-- Caller: ql_private.scan_and_claim. Locks: none. Read-only: an idle pull
--   generates no WAL. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.candidate_page(
    p_after_priority smallint,
    p_after_seq bigint,
    p_after_id uuid,
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
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
           r.queue_seq, r.current_attempt_id, r.created_at
      FROM ql_private.runs r
     WHERE (-(r.priority::integer), r.queue_seq, r.id)
           > (coalesce(-(p_after_priority::integer), -2147483648),
              coalesce(p_after_seq, -9223372036854775808),
              coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
       AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
       AND NOT r.cancel_requested
       AND EXISTS (
           SELECT 1
             FROM ql_private.attempts a
            WHERE a.id = r.current_attempt_id
              AND a.state = 'claimed'
              AND a.executor = 'remote_worker'
              AND a.not_before <= clock_timestamp())
       AND NOT EXISTS (
           SELECT 1
             FROM ql_private.run_leases l
            WHERE l.attempt_id = r.current_attempt_id
              AND l.released_at IS NULL
              AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp()))
     ORDER BY -(r.priority::integer), r.queue_seq, r.id
     LIMIT p_limit + 1;
END
$$;
REVOKE ALL ON FUNCTION ql_private.candidate_page(smallint, bigint, uuid, integer) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.candidate_page(smallint, bigint, uuid, integer) IS
'One keyset page (limit + 1 rows) of dispatch candidates in priority DESC, queue_seq, id order (R-CAND): a single range scan of runs_candidate_keyset. Read-only, no locks. Caller: ql_private.scan_and_claim.';
