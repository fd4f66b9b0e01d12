-- 0023 queue depth split into ready and scheduled runs per task (SPEC §10,
-- the console overview; SPEC §9.2 scheduled runs).
--
-- runs_task_queued_due (task_id, due_at) over the queued runs: ql.queue_depth
-- counts a task's ready runs (due_at IS NULL) and its scheduled ones (due_at IS
-- NOT NULL, not yet promoted by the sweeper) as two ranges of this index, each
-- stopping at the page's cap (index-only, whatever the task holds: 100,000
-- scheduled runs ahead of the ready ones are never walked to count the ready).
-- runs_task_state_seq cannot: due_at is not among its keys, so a filter on it
-- would read every scheduled run of the task to find the ready ones.
-- Partial on state = 'queued': an enqueue adds one entry, a claim (queued ->
-- dispatching) none.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE INDEX runs_task_queued_due ON ql_private.runs (task_id, due_at)
    WHERE state = 'queued';
