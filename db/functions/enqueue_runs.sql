-- ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer) -> jsonb {runIds}
--
-- Purpose: queue `p_count` runs of a task (SPEC §8 `admin run enqueue`). Each run
--   is pinned to the task's current execution revision, state 'queued',
--   runtime-owned, with its first attempt (attempt_no 1, executor
--   'remote_worker', state 'claimed', not_before = now) set as
--   runs.current_attempt_id, so it is a candidate at once; one `run.queued`
--   event per run. runIds are returned in queue order (queue_seq). Each run
--   records its revision's placement class (ql_private.placement_class_of,
--   which may add one placement_classes row) for runs_class_keyset.
--   Set-based: one statement inserts all runs, attempts and events (ids are
--   generated up front, so current_attempt_id is written with the run and no
--   run row is updated; the runs<->attempts foreign keys are checked at the end
--   of that statement).
-- Inputs: p_task_id (lowercase canonical UUID), p_priority (smallint range),
--   p_count (1..10000).
-- Fences: the task exists, is enabled and has a published revision.
-- Writes: p_count runs, attempts and run.queued events; at most one
--   placement_classes row.
-- Locks: none beyond the foreign-key checks' FOR KEY SHARE on the task and
--   revision rows; a concurrent publish may make a newer revision current, and
--   these runs stay pinned to the one read here (either order is a valid history).
-- Idempotency: none; every call queues new runs.
-- Errors: QL001 malformed task id, priority NULL or outside smallint, count
--   NULL or < 1, task disabled or without a current revision; QL002 count > 10000;
--   QL004 unknown task.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max_count constant integer := 10000;
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
    v_now timestamptz;
    v_class_id integer;
    v_run_ids jsonb;
BEGIN
    IF p_priority IS NULL OR p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'priority must be a smallint';
    END IF;
    IF p_count IS NULL OR p_count < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'count must be >= 1';
    END IF;
    IF p_count > v_max_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002',
            MESSAGE = format('count must be <= %s', v_max_count);
    END IF;
    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'task not found';
    END IF;
    IF NOT v_task.enabled THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'task is disabled';
    END IF;
    IF v_task.current_revision_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'task has no published revision';
    END IF;

    v_class_id := ql_private.placement_class_of(v_task.current_revision_id);
    v_now := clock_timestamp();
    WITH planned AS MATERIALIZED (
        SELECT gen_random_uuid() AS run_id,
               gen_random_uuid() AS attempt_id,
               nextval('ql_private.run_queue_seq') AS seq
          FROM generate_series(1, p_count) AS g
         ORDER BY g
    ), new_runs AS (
        INSERT INTO ql_private.runs (
            id, project_id, task_id, execution_revision_id, priority, queue_seq, state,
            current_attempt_id, placement_class, created_at, updated_at)
        SELECT p.run_id, v_task.project_id, v_task.id, v_task.current_revision_id,
               p_priority::smallint, p.seq, 'queued', p.attempt_id, v_class_id, v_now, v_now
          FROM planned p
    ), new_attempts AS (
        INSERT INTO ql_private.attempts (
            id, run_id, attempt_no, executor, state, not_before, created_at, updated_at)
        SELECT p.attempt_id, p.run_id, 1, 'remote_worker', 'claimed', v_now, v_now, v_now
          FROM planned p
    ), new_events AS (
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        SELECT 'run.queued', p.run_id, p.attempt_id,
               jsonb_build_object('taskId', v_task.id,
                                  'executionRevisionId', v_task.current_revision_id,
                                  'attemptId', p.attempt_id,
                                  'priority', p_priority),
               v_now
          FROM planned p
    )
    -- Data-modifying CTEs always run to completion, referenced or not.
    SELECT jsonb_agg(to_jsonb(p.run_id) ORDER BY p.seq) INTO v_run_ids FROM planned p;
    RETURN jsonb_build_object('runIds', v_run_ids);
END
$$;
REVOKE ALL ON FUNCTION ql.enqueue_runs(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.enqueue_runs(text, integer, integer) TO ql_runtime;
COMMENT ON FUNCTION ql.enqueue_runs(text, integer, integer) IS
'Queue p_count (1..10000) runs of an enabled task pinned to its current revision, each with attempt 1 (claimed, remote_worker, not_before now) and one run.queued event, in one set-based statement; returns {runIds} in queue order. Inputs: p_task_id, p_priority (smallint), p_count. Fences: task exists, enabled, published. Writes: runs, attempts, events, at most one placement class. Locks: FK KEY SHARE only. Not idempotent. Errors: QL001 bad input/disabled/unpublished, QL002 count > 10000, QL004 unknown task. Caller: ql_runtime.';
