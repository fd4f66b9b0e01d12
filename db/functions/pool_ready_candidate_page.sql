-- ql_private.pool_ready_candidate_page(pools, after_priority, after_seq, after_id, limit,
--                                      now, snapshot, own)
--   -> SETOF (run_id, execution_revision_id, priority, queue_seq)
--
-- Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of the
--   ready `queued` runs (due_at IS NULL) of the given pools (the pools a worker
--   holds a grant for, SPEC §13.1, §13.3), in priority DESC, queue_seq, id order:
--   ql_private.pool_candidate_page's first source alone, as its own statement —
--   what ql_private.ready_candidate_page is to candidate_page. A pull reads it
--   instead of pool_candidate_page while no scheduled run is due anywhere (the
--   steady state; ql_private.scan_and_claim probes runs_due once per pull): a
--   plan without the due source is cheaper to start, and start-up is paid on
--   every execution (migration 0014).
-- Each pool is one range scan of runs_pool_keyset (equality on the pool, row
--   comparison on the key), limited to limit + 1; the per-pool heads are merged
--   and cut to limit + 1: two index descents per granted pool, whatever other
--   pools hold.
-- Candidate: run queued, ready, runtime-owned, not cancel-requested; its current
--   attempt `claimed`, remote_worker, not_before passed at `now`; rows a
--   concurrent claim holds (xmax in progress in `snapshot`, never `own`) are
--   passed over without a lock (ql_private.xid_in_progress). The claim re-checks
--   every fence, the pool grant included, on the locked rows.
-- Inlinable SQL (no SET clause, nothing volatile in the body).
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.scan_and_claim.
CREATE OR REPLACE FUNCTION ql_private.pool_ready_candidate_page(
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
        SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
          FROM ql_private.runs r
         CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
         WHERE r.pool_id = k.pool_id
           AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
               p_after_priority, p_after_seq, p_after_id)
           AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NULL
           AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT p_limit + 1) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.pool_ready_candidate_page(
    uuid[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
