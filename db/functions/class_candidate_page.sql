-- ql_private.class_candidate_page(classes, after_priority, after_seq, after_id, limit,
--                                 now, snapshot, own) -> SETOF candidate rows
--
-- Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
--   candidates restricted to the given placement classes (migration 0006), in
--   the same priority DESC, queue_seq, id order and with the same candidate
--   conditions as ql_private.candidate_page. Each class is one range scan of
--   runs_class_keyset (equality on the class, row comparison on the key:
--   ql_private.keyset_after, inlined),
--   limited to limit + 1; the per-class heads are merged and cut to limit + 1.
--   Cost: two index descents per class, whatever is queued in other classes —
--   this is how a pull jumps over a head of runs its session cannot take.
-- Two sources per class, merged in key order as in candidate_page:
--   * ready `queued` runs (due_at IS NULL): runs_class_keyset, a range scan on
--     (class, key);
--   * scheduled `queued` runs that came due (due_at <= now): runs_class_due
--     (migration 0017) in due_at order, at most 4 x (limit + 1) per class, then
--     filtered by the keyset position — so a due run the session can take is
--     found behind any head of due runs it cannot, without waiting for the
--     sweeper's promotion; runs not yet due are never read.
--   An offer that expired unstarted behind a blocked head is not here: the
--   sweeper re-queues it within seconds and it is then a ready run.
-- Rows a concurrent claim holds are passed over without a lock
--   (ql_private.xid_in_progress), as in candidate_page.
-- Inlinable SQL (no SET clause, nothing volatile in the body).
-- Caller: ql_private.scan_and_claim.
-- Locks: none. Read-only. SQLSTATEs: none.
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
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE r.placement_class = k.class_id
            AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.project_id, d.task_id, d.execution_revision_id, d.priority,
                d.queue_seq, d.current_attempt_id, d.created_at
           FROM (SELECT dr.id, dr.project_id, dr.task_id, dr.execution_revision_id,
                        dr.priority, dr.queue_seq, dr.current_attempt_id, dr.created_at,
                        dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.placement_class = k.class_id
                    AND dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.class_candidate_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
