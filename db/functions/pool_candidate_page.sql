-- ql_private.pool_candidate_page(pools, after_priority, after_seq, after_id, limit,
--                                now, snapshot, own) -> SETOF candidate rows
--
-- Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
--   candidates of the given pools (the pools a worker holds a grant for, SPEC
--   §13.1, §13.3), in the same priority DESC, queue_seq, id order and with the
--   same candidate conditions as ql_private.candidate_page. Each pool is one
--   range scan of runs_pool_keyset (equality on the pool, row comparison on the
--   key, migration 0019), limited to limit + 1; the per-pool heads are merged and
--   cut to limit + 1. Cost: two index descents per granted pool, whatever other
--   pools hold — with 1,000 pools queued and one granted, a page reads that
--   pool's head alone.
-- Two sources per pool, merged in key order as in candidate_page:
--   * ready `queued` runs (due_at IS NULL): runs_pool_keyset;
--   * scheduled `queued` runs that came due (due_at <= now): runs_pool_due in
--     due_at order, at most 4 x (limit + 1) per pool, then filtered by the
--     keyset position; runs not yet due are never read.
--   An offer that expired unstarted is not here: the sweeper re-queues it within
--   seconds and it is then a ready run of its pool.
-- Rows a concurrent claim holds are passed over without a lock
--   (ql_private.xid_in_progress), as in candidate_page. The claim re-checks every
--   fence, the pool grant included, on the locked rows.
-- Inlinable SQL (no SET clause, nothing volatile in the body).
-- Caller: ql_private.scan_and_claim.
-- Writes: none. Locks: none. Errors: none.
CREATE OR REPLACE FUNCTION ql_private.pool_candidate_page(
    p_pools uuid[],
    p_after_priority smallint,
    p_after_seq bigint,
    p_after_id uuid,
    p_limit integer,
    p_now timestamptz,
    p_snapshot pg_snapshot,
    p_own xid8
)
RETURNS TABLE (
    run_id uuid,
    execution_revision_id uuid,
    priority smallint,
    queue_seq bigint
)
LANGUAGE sql STABLE
AS $$
    SELECT c.id, c.execution_revision_id, c.priority, c.queue_seq
      FROM unnest(p_pools) AS k(pool_id)
     CROSS JOIN LATERAL (
        (SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE r.pool_id = k.pool_id
            AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.execution_revision_id, d.priority, d.queue_seq
           FROM (SELECT dr.id, dr.execution_revision_id, dr.priority, dr.queue_seq,
                        dr.current_attempt_id, dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.pool_id = k.pool_id
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
REVOKE ALL ON FUNCTION ql_private.pool_candidate_page(
    uuid[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
