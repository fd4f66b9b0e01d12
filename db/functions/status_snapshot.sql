-- ql.status_snapshot() -> jsonb
--
-- Purpose: the operator's glance (SPEC §8 `qinglong status`): queue depth by
--   priority and by task, the oldest waiting run, live sessions with their slot
--   use, live leases by state, and authentication denials of the last hour by
--   reason. Every part reads through a partial or time index and every count
--   and list is capped, so a snapshot stays cheap on a deep queue (about 30 ms
--   at 1M queued runs, docs/OPERATIONS.md):
--   * queue total: an index scan of the partial candidate index
--     runs_candidate_keyset stopping at 100000 rows; past that `capped` is true
--     and `estimate` is the index's planner row count (pg_class.reltuples, kept
--     fresh by the queue tables' autovacuum settings of migration 0002);
--   * per priority (at most 64): a loose index scan finds the distinct
--     priorities (one descent each), each counted up to 10000, with the age of
--     its oldest waiting (`queued`, and due if it was scheduled) run, the first
--     one in index order;
--   * per task: counts over runs_task_state_seq (task_id, state, …), queued and
--     dispatching only, each up to 10000; the top 50 tasks listed, the rest summed;
--   * sessions and leases: the active-session and live-lease partial indexes
--     (bounded by the number of workers and their slots); the session list is
--     capped at 50 (oldest heartbeat first: the ones an operator looks at);
--   * denials: security_audit_time, at most 100000 rows of the last hour
--     (`capped` says when the window held more).
--   * notificationQueueUsage: pg_notification_queue_usage(), the fraction of
--     the cluster's LISTEN/NOTIFY queue in use. A listener that holds a
--     transaction open pins the queue; at 1.0 every commit that fires the
--     idle-view triggers fails (docs/OPERATIONS.md says what to do).
--   * expiring: ql.expiring_identities(14 d, 20): worker credentials and
--     issued certificates that expire within 14 days (SPEC §16.3), soonest first.
--   Queue terms: `runs` = not yet started (queued or dispatching, runtime-owned,
--   not cancel-requested, i.e. the candidate index); `offered` = of those, held
--   by a live unstarted unexpired lease; `waiting` = runs - offered.
-- Inputs: none.
-- Fences: none (an operator's read).
-- Writes: none (no lock, no WAL).
-- Locks: none.
-- Idempotency: read-only.
-- Errors: none.
-- Caller: ql_readonly (monitoring), ql_runtime (`qinglong status`, the demo).
CREATE OR REPLACE FUNCTION ql.status_snapshot()
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- The plans are index scans that stop at a LIMIT; JIT compiling them (the
-- planner's cost guess crosses jit_above_cost on a deep queue) costs more than
-- running them.
SET jit = off
AS $$
DECLARE
    v_total_cap constant integer := 100000;
    v_group_cap constant integer := 10000;
    v_priority_limit constant integer := 64;
    v_task_limit constant integer := 50;
    v_session_limit constant integer := 50;
    v_denial_cap constant integer := 100000;
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_runs bigint;
    v_estimate bigint;
    v_priorities jsonb;
    v_oldest timestamptz;
    v_tasks jsonb;
    v_task_rest jsonb;
    v_sessions jsonb;
    v_session_totals jsonb;
    v_leases jsonb;
    v_denials jsonb;
BEGIN
    -- Counts stop at a cap: an index scan in key order with LIMIT cap + 1 (the
    -- ORDER BY keeps the planner on the index instead of a bitmap scan of a
    -- whole priority range). Past the cap the planner's count of the partial
    -- index (kept fresh by the queue tables' autovacuum, 0002) is the estimate.
    SELECT count(*) INTO v_runs
      FROM (SELECT 1 FROM ql_private.runs r
             WHERE r.state IN ('queued', 'dispatching') AND r.runtime_owned
               AND NOT r.cancel_requested
             ORDER BY -(r.priority::integer), r.queue_seq, r.id
             LIMIT v_total_cap + 1) x;
    IF v_runs > v_total_cap THEN
        SELECT greatest(c.reltuples::bigint, v_total_cap + 1) INTO v_estimate
          FROM pg_catalog.pg_class c
         WHERE c.oid = 'ql_private.runs_candidate_keyset'::pg_catalog.regclass;
    END IF;

    -- Loose index scan: one descent of runs_candidate_keyset per distinct priority.
    -- A priority's rows are a key range written as row comparisons (as in
    -- candidate_page): an equality on the expression would be estimated at 0.5 %
    -- of the table and planned as a bitmap scan of the whole priority.
    WITH RECURSIVE prio(neg) AS (
        SELECT (SELECT -(r.priority::integer)
                  FROM ql_private.runs r
                 WHERE r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
        UNION ALL
        SELECT (SELECT -(r.priority::integer)
                  FROM ql_private.runs r
                 WHERE -(r.priority::integer) > p.neg
                   AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
          FROM prio p
         WHERE p.neg IS NOT NULL
    ), per AS (
        SELECT -p.neg AS priority,
               (SELECT count(*)
                  FROM (SELECT 1 FROM ql_private.runs r
                         WHERE (-(r.priority::integer), r.queue_seq, r.id)
                               >= (p.neg, -9223372036854775808, v_nil)
                           AND (-(r.priority::integer), r.queue_seq, r.id)
                               < (p.neg + 1, -9223372036854775808, v_nil)
                           AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                           AND NOT r.cancel_requested
                         ORDER BY -(r.priority::integer), r.queue_seq, r.id
                         LIMIT v_group_cap + 1) y) AS runs,
               (SELECT r.created_at FROM ql_private.runs r
                 WHERE (-(r.priority::integer), r.queue_seq, r.id)
                       >= (p.neg, -9223372036854775808, v_nil)
                   AND (-(r.priority::integer), r.queue_seq, r.id)
                       < (p.neg + 1, -9223372036854775808, v_nil)
                   AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested AND r.state = 'queued'
                   -- A run scheduled for later is not waiting (yet).
                   AND (r.due_at IS NULL OR r.due_at <= v_now)
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1) AS oldest
          FROM prio p
         WHERE p.neg IS NOT NULL
         LIMIT v_priority_limit
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'priority', per.priority, 'runs', least(per.runs, v_group_cap),
               'capped', per.runs > v_group_cap,
               'oldestWaitingAgeMs', CASE WHEN per.oldest IS NOT NULL THEN
                   floor(extract(epoch FROM v_now - per.oldest) * 1000)::bigint END)
               ORDER BY per.priority DESC), '[]'::jsonb),
           min(per.oldest)
      INTO v_priorities, v_oldest
      FROM per;

    WITH depth AS (
        SELECT t.id, t.name, pr.name AS project, c.runs
          FROM ql_private.tasks t
          JOIN ql_private.projects pr ON pr.id = t.project_id
         CROSS JOIN LATERAL (
               SELECT count(*) AS runs
                 FROM (SELECT 1 FROM ql_private.runs r
                        WHERE r.task_id = t.id AND r.state IN ('queued', 'dispatching')
                        LIMIT v_group_cap + 1) y) c
         WHERE c.runs > 0
    ), ranked AS (
        SELECT d.*, row_number() OVER (ORDER BY d.runs DESC, d.project, d.name) AS rank
          FROM depth d
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'taskId', x.id, 'project', x.project, 'task', x.name,
               'runs', least(x.runs, v_group_cap), 'capped', x.runs > v_group_cap)
               ORDER BY x.rank) FILTER (WHERE x.rank <= v_task_limit), '[]'::jsonb),
           jsonb_build_object(
               'tasks', count(*) FILTER (WHERE x.rank > v_task_limit),
               'runs', coalesce(sum(least(x.runs, v_group_cap))
                                    FILTER (WHERE x.rank > v_task_limit), 0))
      INTO v_tasks, v_task_rest
      FROM ranked x;

    WITH live AS (
        SELECT l.session_id,
               count(*) FILTER (WHERE l.started_at IS NOT NULL OR l.expires_at > v_now) AS used
          FROM ql_private.run_leases l
         WHERE l.released_at IS NULL
         GROUP BY l.session_id
    ), active AS (
        SELECT s.*, w.name AS worker_name, coalesce(live.used, 0) AS used
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
          LEFT JOIN live ON live.session_id = s.session_id
         WHERE s.state = 'active'
    ), listed AS (
        SELECT a.* FROM active a ORDER BY a.heartbeat_at, a.worker_name, a.session_id
         LIMIT v_session_limit
    )
    SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'workerId', x.worker_id, 'worker', x.worker_name,
                   'sessionId', x.session_id, 'generation', x.generation,
                   'slots', x.slots, 'slotsUsed', x.used,
                   'slotsFree', greatest(x.slots - x.used, 0),
                   'labels', coalesce(x.capabilities -> 'labels', '{}'::jsonb),
                   'runtimes', coalesce(x.capabilities -> 'runtimes', '{}'::jsonb),
                   'lastHeartbeatAgeMs',
                       floor(extract(epoch FROM v_now - x.heartbeat_at) * 1000)::bigint,
                   'expiresInMs', floor(extract(epoch FROM x.expires_at - v_now) * 1000)::bigint)
                   ORDER BY x.heartbeat_at, x.worker_name, x.session_id), '[]'::jsonb)
              FROM listed x),
           (SELECT jsonb_build_object(
                   'active', count(*),
                   'expired', count(*) FILTER (WHERE a.expires_at <= v_now),
                   'slots', coalesce(sum(a.slots), 0),
                   'slotsUsed', coalesce(sum(a.used), 0),
                   'truncated', count(*) > v_session_limit)
              FROM active a)
      INTO v_sessions, v_session_totals;

    SELECT jsonb_build_object(
               'unstarted', count(*) FILTER (WHERE l.started_at IS NULL AND l.expires_at > v_now),
               'started', count(*) FILTER (WHERE l.started_at IS NOT NULL AND l.expires_at > v_now),
               'expiredUnstarted',
                   count(*) FILTER (WHERE l.started_at IS NULL AND l.expires_at <= v_now),
               'expiredStarted',
                   count(*) FILTER (WHERE l.started_at IS NOT NULL AND l.expires_at <= v_now))
      INTO v_leases
      FROM ql_private.run_leases l
     WHERE l.released_at IS NULL;

    WITH recent AS (
        SELECT a.reason, a.outcome
          FROM ql_private.security_audit a
         WHERE a.occurred_at > v_now - interval '1 hour'
         ORDER BY a.occurred_at DESC
         LIMIT v_denial_cap + 1
    ), denied AS (
        SELECT d.reason, count(*) AS n FROM recent d WHERE d.outcome = 'denied' GROUP BY d.reason
    )
    SELECT jsonb_build_object(
               'windowS', 3600,
               'total', coalesce((SELECT sum(n) FROM denied), 0),
               'byReason', coalesce((SELECT jsonb_object_agg(reason, n ORDER BY reason) FROM denied),
                                    '{}'::jsonb),
               'capped', (SELECT count(*) FROM recent) > v_denial_cap)
      INTO v_denials;

    RETURN jsonb_build_object(
        'generatedAtMs', floor(extract(epoch FROM v_now) * 1000)::bigint,
        'queue', jsonb_build_object(
            'runs', least(v_runs, v_total_cap),
            'capped', v_runs > v_total_cap,
            'estimate', v_estimate,
            'offered', (v_leases ->> 'unstarted')::bigint,
            'waiting', greatest(least(v_runs, v_total_cap) - (v_leases ->> 'unstarted')::bigint, 0),
            'oldestWaitingAgeMs', CASE WHEN v_oldest IS NOT NULL THEN
                floor(extract(epoch FROM v_now - v_oldest) * 1000)::bigint END,
            'byPriority', v_priorities,
            'byTask', v_tasks,
            'otherTasks', v_task_rest,
            'taskLimit', v_task_limit),
        'sessions', v_session_totals || jsonb_build_object('list', v_sessions,
                                                           'listLimit', v_session_limit),
        'leases', v_leases,
        'denials', v_denials,
        'notificationQueueUsage', pg_catalog.pg_notification_queue_usage(),
        -- SPEC §16.3: credentials and certificates expiring within 14 days.
        'expiring', ql.expiring_identities(1209600, 20));
END
$$;
REVOKE ALL ON FUNCTION ql.status_snapshot() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.status_snapshot() TO ql_readonly, ql_runtime;
