-- ql_private.candidate_page(after_priority, after_seq, after_id, limit) -> SETOF candidate rows
--
-- Purpose: one keyset page of dispatch candidates (SPEC §3.1, R-CAND), in
--   priority DESC, queue_seq, id order. Returns up to `limit + 1` rows so the
--   caller can report `truncated` exactly.
-- Candidate: run runtime-owned, not cancel-requested, queued|dispatching; its
--   current attempt `claimed`, executor remote_worker, not_before passed; and no
--   live lease that is started or still unexpired (by clock_timestamp()). Both
--   sources below satisfy the lease half by construction; claim_candidate
--   re-checks everything on the locked rows anyway.
-- Two sources, merged in key order:
--   * `queued` runs: one range scan of runs_candidate_keyset on the ascending key
--     (-priority, queue_seq, id), the keyset position a single row comparison;
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
-- No OFFSET, no sort of the queue (docs/EXPLAIN.md). Planning: the plan is
--   generic (planned once per connection, ~0.05 ms a call instead of ~0.4 ms of
--   re-planning), and sequential scans are disabled for it so that plan is the
--   ordered keyset index scan whatever the statistics said when it was made — a
--   plan cached while the queue was empty (seq scan + sort) would otherwise stick
--   to the connection after the queue fills.
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
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    k_priority integer := coalesce(-(p_after_priority::integer), -2147483648);
    k_seq bigint := coalesce(p_after_seq, -9223372036854775808);
    k_id uuid := coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid);
    -- clock_timestamp() is volatile and so can never be an index condition; read
    -- it once and pass it in as a value the planner (custom plan) can use.
    now_ts timestamptz := clock_timestamp();
BEGIN
    RETURN QUERY
    WITH waiting AS (
        SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
               r.queue_seq, r.current_attempt_id, r.created_at
          FROM ql_private.runs r
         CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, now_ts) ok
         WHERE (-(r.priority::integer), r.queue_seq, r.id) > (k_priority, k_seq, k_id)
           AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT p_limit + 1
    ), expired_offers AS (
        SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
               r.queue_seq, r.current_attempt_id, r.created_at
          FROM (SELECT el.run_id, el.attempt_id
                  FROM ql_private.run_leases el
                 WHERE el.released_at IS NULL AND el.started_at IS NULL
                   AND el.expires_at <= now_ts
                 ORDER BY el.expires_at
                 LIMIT (p_limit + 1) * 4) l
         CROSS JOIN LATERAL (
               SELECT rr.* FROM ql_private.runs rr
                WHERE rr.id = l.run_id AND rr.current_attempt_id = l.attempt_id
                LIMIT 1) r
         CROSS JOIN LATERAL ql_private.dispatchable_attempt(l.attempt_id, now_ts) ok
         WHERE (-(r.priority::integer), r.queue_seq, r.id) > (k_priority, k_seq, k_id)
           AND r.state = 'dispatching' AND r.runtime_owned AND NOT r.cancel_requested
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT p_limit + 1
    )
    SELECT c.id, c.project_id, c.task_id, c.execution_revision_id, c.priority,
           c.queue_seq, c.current_attempt_id, c.created_at
      FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired_offers) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1;
END
$$;
REVOKE ALL ON FUNCTION ql_private.candidate_page(smallint, bigint, uuid, integer) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.candidate_page(smallint, bigint, uuid, integer) IS
'One keyset page (limit + 1 rows) of dispatch candidates in priority DESC, queue_seq, id order (R-CAND): queued runs by a range scan of runs_candidate_keyset, merged with dispatching runs whose lease expired unstarted (run_leases_unstarted_expiry). Read-only, no locks. Caller: ql_private.scan_and_claim.';
