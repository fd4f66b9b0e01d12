-- ql_private.ready_candidate_page(after_priority, after_seq, after_id, limit, now, snapshot, own)
--   -> SETOF (run_id, execution_revision_id, priority, queue_seq)
--
-- Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of the
--   ready `queued` runs alone (due_at IS NULL), in priority DESC, queue_seq, id
--   order: the first source of ql_private.candidate_page, as its own statement.
--   A pull reads it instead of candidate_page when the two other sources are
--   empty at the pull's `now` — no scheduled run came due and no offer expired
--   unstarted (ql_private.scan_and_claim probes both once per pull) — which is
--   the steady state: the sweeper drains both within seconds.
-- Why its own statement: executor start-up of a plan is paid on every
--   execution, and candidate_page's plan (three merged sources, each a sorted,
--   limited subquery with per-row probes) cost more to start than to run on the
--   common pull; this plan is one range scan of runs_candidate_keyset with a
--   per-row attempt probe (ql_private.dispatchable_attempt).
-- Candidate: run queued, ready, runtime-owned, not cancel-requested; its current
--   attempt `claimed`, remote_worker, not_before passed at `now`; rows a
--   concurrent claim holds (xmax in progress in `snapshot`, never `own`) are
--   passed over without a lock (ql_private.xid_in_progress), as in
--   candidate_page. The claim re-checks every fence on the locked rows.
-- Inlinable SQL (no SET clause, nothing volatile in the body); the caller pins
--   a generic plan without sequential scans. Unordered output is not allowed to
--   matter: the caller orders by the key.
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.scan_and_claim.
CREATE OR REPLACE FUNCTION ql_private.ready_candidate_page(
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
    SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
      FROM ql_private.runs r
     CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
     WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
           p_after_priority, p_after_seq, p_after_id)
       AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
       AND r.due_at IS NULL
       AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
     ORDER BY -(r.priority::integer), r.queue_seq, r.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.ready_candidate_page(
    smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
