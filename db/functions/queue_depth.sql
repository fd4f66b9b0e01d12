-- ql.queue_depth() -> jsonb
--
-- Purpose: the console overview's queue panel (SPEC §10): how deep the ready
--   queue is per priority and which tasks hold the not-yet-started runs,
--   ready runs apart from scheduled ones (SPEC §9.2: not due yet).
--   {byPriority: [{priority, runs, capped, oldestWaitingAgeMs}],
--   scheduled: {runs, capped, nextDueAtMs, byPriority: [{priority, runs}]},
--   byTask: [{taskId, project, task, pool, queued, ready, readyCapped,
--   scheduled, scheduledCapped, dispatching, capped}], tasksWithRuns, cap,
--   tasksExamined, tasksCapped}.
--   byPriority: the ready runs (queued, due, runtime-owned, not
--   cancel-requested: runs_candidate_keyset) of each priority, highest first,
--   at most 16 priorities, each counted up to `cap` (1000), with the age of
--   its oldest (first in dispatch order). The age counts from
--   greatest(created_at, current attempt's not_before), one primary-key
--   probe: a retry or a promoted scheduled run waits from when it became ready.
--   scheduled: the runs scheduled for later (queued, runtime-owned, not
--   cancel-requested, due_at set: runs_due, not yet promoted by the sweeper),
--   counted up to `cap`, the soonest due time, and the priorities of the
--   `cap` + 1 due soonest (when `capped`, each priority's count is a lower
--   bound: the runs of that priority among the soonest).
--   byTask: `ready` (queued, due_at NULL) and `scheduled` (queued, due_at set)
--   are a task's queued runs split, each counted up to `cap` (xCapped when it
--   has more); `pool` the task's pool as P/N.
--   byTask: per task its queued and dispatching runs, each counted up to
--   `cap`, the 20 deepest listed (tasksWithRuns = how many tasks have any).
--   Only the first 1000 tasks by id are examined (tasksExamined; tasksCapped
--   when there are more, and the page says so): the per-task probes must not
--   grow with the number of tasks.
--   The page needs orders of magnitude, not exact totals past a thousand: caps
--   keep a page ≤ 100 ms with 1,000,000 runs stored (ql.status_snapshot counts
--   to 100,000 and costs hundreds of milliseconds on such a queue; `qinglong
--   status` is where the larger counts are).
-- Cost: a loose index scan of runs_candidate_keyset (one descent per distinct
--   priority, <= 16), each priority's range read up to cap + 1 entries; per
--   task two ranges of runs_task_state_seq (task_id, state, queue_seq) and two
--   of runs_task_queued_due (task_id, due_at) (ready: due_at NULL; scheduled:
--   due_at set) of at most cap + 1 entries each, and its pool and project by
--   primary key, for at most 1000 tasks; one range of runs_due of at most cap
--   + 1 entries (each with its priority): bounded by 16 x cap + cap +
--   min(tasks, 1000) probes and the queued/dispatching runs they hold.
-- Inputs: none.
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: none.
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.queue_depth()
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_cap constant integer := 1000;
    v_priority_limit constant integer := 16;
    v_task_limit constant integer := 20;
    v_task_scan_cap constant integer := 1000;
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_priorities jsonb;
    v_scheduled jsonb;
    v_tasks jsonb;
    v_with_runs integer;
    v_tasks_capped boolean;
BEGIN
    -- The ready priorities (ql_private.ready_priorities: one index descent
    -- each); a priority's rows are a key range written as row comparisons (as
    -- status_snapshot and candidate_page do), so each count stays an index
    -- range scan.
    WITH listed AS (
        SELECT neg FROM ql_private.ready_priorities(v_priority_limit) AS neg
    ), per AS (
        SELECT -l.neg AS priority,
               (SELECT count(*) FROM (
                    SELECT 1 FROM ql_private.runs r
                     WHERE (-(r.priority::integer), r.queue_seq, r.id)
                           >= (l.neg, -9223372036854775808, v_nil)
                       AND (-(r.priority::integer), r.queue_seq, r.id)
                           < (l.neg + 1, -9223372036854775808, v_nil)
                       AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                       AND r.due_at IS NULL
                     ORDER BY -(r.priority::integer), r.queue_seq, r.id
                     LIMIT v_cap + 1) y) AS runs,
               -- Waiting since it became ready: greatest(created_at, its current
               -- attempt's not_before) (a retry, a promoted scheduled run).
               (SELECT greatest(r.created_at,
                                (SELECT a.not_before FROM ql_private.attempts a
                                  WHERE a.id = r.current_attempt_id))
                  FROM ql_private.runs r
                 WHERE (-(r.priority::integer), r.queue_seq, r.id)
                       >= (l.neg, -9223372036854775808, v_nil)
                   AND (-(r.priority::integer), r.queue_seq, r.id)
                       < (l.neg + 1, -9223372036854775808, v_nil)
                   AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1) AS oldest
          FROM listed l
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'priority', per.priority,
               'runs', least(per.runs, v_cap),
               'capped', per.runs > v_cap,
               'oldestWaitingAgeMs',
                   greatest(floor(extract(epoch FROM v_now - per.oldest) * 1000), 0)::bigint)
               ORDER BY per.priority DESC), '[]'::jsonb)
      INTO v_priorities
      FROM per;

    -- Scheduled runs: the cap + 1 due soonest (runs_due), their priorities.
    WITH soonest AS MATERIALIZED (
        SELECT r.priority, r.due_at FROM ql_private.runs r
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NOT NULL
         ORDER BY r.due_at
         LIMIT v_cap + 1
    ), per AS (
        SELECT s.priority, count(*) AS runs FROM soonest s GROUP BY s.priority
    )
    SELECT jsonb_build_object(
               'runs', least((SELECT count(*) FROM soonest), v_cap),
               'capped', (SELECT count(*) FROM soonest) > v_cap,
               'nextDueAtMs', ql_private.epoch_ms((SELECT min(s.due_at) FROM soonest s)),
               'byPriority', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                                 'priority', p.priority,
                                                 'runs', least(p.runs, v_cap))
                                             ORDER BY p.priority DESC)
                                         FROM per p), '[]'::jsonb))
      INTO v_scheduled;

    WITH depth AS (
        SELECT t.id, t.name, pr.name AS project, pr.name || '/' || pl.name AS pool,
               -- ORDER BY in index order: the planner stays on the index range.
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                       ORDER BY r.task_id, r.state, r.queue_seq
                                       LIMIT v_cap + 1) y) AS queued,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'dispatching'
                                       ORDER BY r.task_id, r.state, r.queue_seq
                                       LIMIT v_cap + 1) y) AS dispatching,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                         AND r.due_at IS NULL
                                       ORDER BY r.task_id, r.due_at
                                       LIMIT v_cap + 1) y) AS ready,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                         AND r.due_at IS NOT NULL
                                       ORDER BY r.task_id, r.due_at
                                       LIMIT v_cap + 1) y) AS scheduled
          FROM (SELECT tt.* FROM ql_private.tasks tt ORDER BY tt.id
                 LIMIT v_task_scan_cap) t
          JOIN ql_private.projects pr ON pr.id = t.project_id
          JOIN ql_private.pools pl ON pl.id = t.pool_id
    ), ranked AS (
        SELECT d.*, row_number() OVER (ORDER BY least(d.queued, v_cap) + least(d.dispatching, v_cap)
                                                DESC, d.project, d.name) AS rank
          FROM depth d
         WHERE d.queued + d.dispatching > 0
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'taskId', x.id, 'project', x.project, 'task', x.name, 'pool', x.pool,
               'queued', least(x.queued, v_cap),
               'ready', least(x.ready, v_cap), 'readyCapped', x.ready > v_cap,
               'scheduled', least(x.scheduled, v_cap), 'scheduledCapped', x.scheduled > v_cap,
               'dispatching', least(x.dispatching, v_cap),
               'capped', x.queued > v_cap OR x.dispatching > v_cap)
               ORDER BY x.rank) FILTER (WHERE x.rank <= v_task_limit), '[]'::jsonb),
           count(*)
      INTO v_tasks, v_with_runs
      FROM ranked x;

    v_tasks_capped := EXISTS (SELECT 1 FROM ql_private.tasks tt ORDER BY tt.id
                               OFFSET v_task_scan_cap LIMIT 1);
    RETURN jsonb_build_object('byPriority', v_priorities, 'scheduled', v_scheduled,
                              'byTask', v_tasks,
                              'tasksWithRuns', v_with_runs, 'cap', v_cap,
                              'tasksExamined', least(v_task_scan_cap, (SELECT count(*) FROM (
                                  SELECT 1 FROM ql_private.tasks tt
                                   LIMIT v_task_scan_cap) y)),
                              'tasksCapped', v_tasks_capped);
END
$$;
REVOKE ALL ON FUNCTION ql.queue_depth() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.queue_depth() TO ql_readonly, ql_runtime;
