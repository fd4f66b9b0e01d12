-- ql_private.class_candidate_page(classes, after_priority, after_seq, after_id, limit,
--                                 now, snapshot, own) -> SETOF candidate rows
--
-- Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
--   candidates restricted to the given placement classes (migration 0006), in
--   the same priority DESC, queue_seq, id order and with the same candidate
--   conditions as ql_private.candidate_page. Each class is one range scan of
--   runs_class_keyset (equality on the class, row comparison on the key),
--   limited to limit + 1; the per-class heads are merged and cut to limit + 1.
--   Cost: one index descent per class, whatever is queued in other classes —
--   this is how a pull jumps over a head of runs its session cannot take.
-- Only `queued` runs that are ready (due_at IS NULL, the predicate of
--   runs_class_keyset): an offer that expired unstarted, or a scheduled run that
--   came due, behind a blocked head is re-queued / promoted by the sweeper
--   within seconds and then found here.
-- Rows a concurrent claim holds are passed over without a lock
--   (ql_private.xid_in_progress), as in candidate_page.
-- Inlinable SQL (no SET clause, nothing volatile in the body). Caller:
--   ql_private.scan_and_claim. Locks: none. Read-only. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.class_candidate_page(
    p_classes integer[],
    p_after_priority smallint,
    p_after_seq bigint,
    p_after_id uuid,
    p_limit integer,
    p_now timestamptz DEFAULT clock_timestamp(),
    p_snapshot pg_snapshot DEFAULT pg_current_snapshot(),
    p_own xid8 DEFAULT pg_current_xact_id_if_assigned()
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
AS $$
    SELECT c.id, c.project_id, c.task_id, c.execution_revision_id, c.priority,
           c.queue_seq, c.current_attempt_id, c.created_at
      FROM unnest(p_classes) AS k(class_id)
     CROSS JOIN LATERAL (
        SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
               r.queue_seq, r.current_attempt_id, r.created_at
          FROM ql_private.runs r
         CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
         WHERE r.placement_class = k.class_id
           AND (-(r.priority::integer), r.queue_seq, r.id)
               > (coalesce(-(p_after_priority::integer), -2147483648),
                  coalesce(p_after_seq, -9223372036854775808),
                  coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
           AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NULL
           AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT p_limit + 1) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.class_candidate_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.class_candidate_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) IS
'One keyset page (limit + 1 rows) of queued candidates of the given placement classes, in priority DESC, queue_seq, id order: one runs_class_keyset range scan per class, merged. Passes over rows a concurrent claim holds. Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';
