-- ql_private.candidate_page(after_priority, after_seq, after_id, limit, now, snapshot, own)
--   -> SETOF candidate rows
--
-- Purpose: one keyset page of dispatch candidates (SPEC §3.1, R-CAND), in
--   priority DESC, queue_seq, id order. Returns up to `limit + 1` rows so the
--   caller can report `truncated` exactly.
-- Candidate: run runtime-owned, not cancel-requested, queued|dispatching; its
--   current attempt `claimed`, executor remote_worker, not_before passed; and no
--   live lease that is started or still unexpired (by clock_timestamp()). Both
--   sources below satisfy the lease half by construction; claim_candidate
--   re-checks everything on the locked rows anyway.
-- Three sources, merged in key order:
--   * ready `queued` runs (due_at IS NULL): one range scan of
--     runs_candidate_keyset on the ascending key (-priority, queue_seq, id), the
--     keyset position a single row comparison (ql_private.keyset_after, the one
--     definition every candidate scan uses, inlined into this query);
--   * scheduled `queued` runs that came due (due_at <= now, SPEC §9.2): read
--     through runs_due in due_at order, at most 4 x (limit + 1) of them, then
--     filtered by the keyset position. Runs not yet due sit in runs_due beyond
--     `now` and are never read, so 100,000 future runs ahead of ready ones cost a
--     pull nothing; the sweeper promotes due runs (due_at := NULL) into the
--     keyset within seconds, so this source normally holds a handful;
--   * `dispatching` runs whose live lease expired unstarted: found through
--     run_leases_unstarted_expiry. Every path that releases a lease without a
--     successor re-queues its run, so a dispatching run always has a live
--     unstarted lease, and only the expired ones are candidates — a scan never
--     walks past the offers currently in flight. The sweeper re-queues expired
--     offers within seconds; until it does, a page considers the 4 x (limit + 1)
--     that expired first (index order), so its cost stays bounded however many
--     offers expired at once (measured: a pull walking 13k expired offers took
--     20 ms).
-- The attempt (and, for expired offers, the run) is probed per row through a
--   LATERAL subquery with LIMIT, which the planner cannot flatten or reorder: the
--   scan is driven by the keyset index even when statistics are stale (e.g. right
--   after a bulk enqueue, before autovacuum analyzed it), where a freely planned
--   join was measured at >200 ms a pull.
-- Rows being claimed right now are skipped: a row whose xmax is a transaction
--   still in progress in `snapshot` (the caller's pg_current_snapshot(); `own` =
--   its own xid, never counted; see ql_private.xid_in_progress) has been locked
--   or updated by a concurrent claim. Skipping it here, without taking a
--   lock, is what SKIP LOCKED does inside the raw claim's index scan — so
--   concurrent pulls spread over the queue head instead of all evaluating the
--   same rows and losing the race to each other — while an idle pull still
--   writes nothing (a row lock would write WAL). It is only a hint: the claim
--   re-checks everything under FOR NO KEY UPDATE SKIP LOCKED.
-- `now` is the caller's clock_timestamp(), passed in (the default reads it):
--   LANGUAGE sql without SET clauses and without a volatile call in the body, so
--   the planner inlines it into the caller's query. The caller (ql.pull_offer)
--   pins the plan: a generic plan made once per connection with sequential
--   scans disabled, so the plan is the ordered keyset index scan whatever the
--   statistics said when it was made — a plan cached while the queue was empty
--   (seq scan + sort) would otherwise stick to the connection after it fills.
-- No OFFSET, no sort of the queue (docs/EXPLAIN.md).
-- Caller: ql_private.scan_and_claim. Locks: none. Read-only: an idle pull
--   generates no WAL. SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.candidate_page(
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
      FROM (
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
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
                  WHERE dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM (SELECT el.run_id, el.attempt_id
                   FROM ql_private.run_leases el
                  WHERE el.released_at IS NULL AND el.started_at IS NULL
                    AND el.expires_at <= p_now
                  ORDER BY el.expires_at
                  LIMIT (p_limit + 1) * 4) l
          CROSS JOIN LATERAL (
                SELECT rr.* FROM ql_private.runs rr
                 WHERE rr.id = l.run_id AND rr.current_attempt_id = l.attempt_id
                 LIMIT 1) r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(l.attempt_id, p_now) ok
          WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
            AND r.state = 'dispatching' AND r.runtime_owned AND NOT r.cancel_requested
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
      ) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;
REVOKE ALL ON FUNCTION ql_private.candidate_page(smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8)
    FROM PUBLIC;
