-- ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer,
--                 p_not_before_ms bigint DEFAULT NULL, p_delay_ms bigint DEFAULT NULL,
--                 p_key text DEFAULT NULL) -> jsonb {runIds, existing}
--
-- Purpose: queue `p_count` runs of a task (SPEC §8 `admin run enqueue`, §9.2
--   scheduled and idempotent enqueue). Each run is pinned to the task's current
--   execution revision, state 'queued', runtime-owned, with its first attempt
--   (attempt_no 1, executor 'remote_worker', state 'claimed') set as
--   runs.current_attempt_id; one `run.queued` event per run. runIds are returned
--   in queue order (queue_seq). Each run records its revision's placement class
--   (ql_private.placement_class_of, which may add one placement_classes row) for
--   runs_class_keyset.
--   Scheduling: p_delay_ms (from now) or p_not_before_ms (epoch ms) give the
--   time before which the runs are not offered. A time in the future makes them
--   scheduled: runs.due_at = that time (outside the candidate keysets, in
--   runs_due; candidate_page reads them once due, the sweeper promotes them) and
--   the attempt's not_before = the same time. A time not in the future (delay
--   0, a not-before in the past) = ready now (due_at NULL, not_before now). The
--   event carries dueAtMs when scheduled.
--   Idempotency key: p_key names the run within its task while the run row is
--   retained (unique partial index runs_idempotency_key). A key that already
--   names a run of this task returns {runIds: [that run], existing: true} and
--   writes nothing (no run, no event), whatever the other arguments; else the
--   run is inserted with INSERT ... ON CONFLICT DO NOTHING, so the same key sent
--   by many connections at once queues exactly one run: the losers wait for the
--   winner's commit, then read its id (existing: true).
--   Without a key: set-based, one statement inserts all runs, attempts and
--   events (ids are generated up front, so current_attempt_id is written with the
--   run and no run row is updated; attempts.run_id's foreign key is checked at
--   the end of that statement).
-- Inputs: p_task_id (lowercase canonical UUID), p_priority (smallint range),
--   p_count (1..10000; exactly 1 with a key), p_delay_ms (0..31536000000, i.e.
--   up to a year), p_not_before_ms (0..now + 31536000000; not with p_delay_ms),
--   p_key (1..128 characters, no control characters).
-- Fences: the task exists; for new runs it is enabled and has a published
--   revision.
-- Writes: p_count runs (each carrying the task's pool, SPEC §13.1), attempts (each with the task's retry policy pinned:
--   max_attempts, retry_base_ms, retry_cap_ms as configured now, SPEC §9.1)
--   and run.queued events; at most one placement_classes row; nothing when the
--   key names an existing run.
-- Locks: none beyond the foreign-key checks' FOR KEY SHARE on the task and
--   revision rows (and, with a key, the wait of ON CONFLICT on a concurrent
--   insert of the same key); a concurrent publish may make a newer revision
--   current, and these runs stay pinned to the one read here (either order is a
--   valid history).
-- Idempotency: by (task, key) while the run is retained; none without a key.
-- Errors (COLUMN = the wire field): QL001 malformed task id (taskId), priority
--   NULL or outside smallint (priority), count NULL or < 1 (count), both delay
--   and not-before given (delayMs), malformed key or key with count <> 1 (key),
--   task disabled or without a current revision (taskId); QL002 count > 10000
--   (count); QL006 delay or not-before out of bounds (delayMs, notBeforeMs);
--   QL004 unknown task (taskId).
-- Caller: ql_runtime (control plane), ql.producer_enqueue.
CREATE OR REPLACE FUNCTION ql.enqueue_runs(
    p_task_id text,
    p_priority integer,
    p_count integer,
    p_not_before_ms bigint DEFAULT NULL,
    p_delay_ms bigint DEFAULT NULL,
    p_key text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max_count constant integer := 10000;
    v_max_ahead_ms constant bigint := 31536000000;  -- 365 days
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
    v_now timestamptz := clock_timestamp();
    v_due timestamptz;
    v_class_id integer;
    v_run_ids jsonb;
    v_run_id uuid;
BEGIN
    IF p_priority IS NULL OR p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'priority',
            MESSAGE = 'priority must be a smallint';
    END IF;
    IF p_count IS NULL OR p_count < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'count', MESSAGE = 'count must be >= 1';
    END IF;
    IF p_count > v_max_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'count',
            MESSAGE = format('count must be <= %s', v_max_count);
    END IF;
    IF p_delay_ms IS NOT NULL AND p_not_before_ms IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'delayMs',
            MESSAGE = 'give delayMs or notBeforeMs, not both';
    END IF;
    IF p_delay_ms IS NOT NULL AND p_delay_ms NOT BETWEEN 0 AND v_max_ahead_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'delayMs',
            MESSAGE = format('delayMs must be between 0 and %s', v_max_ahead_ms);
    END IF;
    IF p_not_before_ms IS NOT NULL
       AND p_not_before_ms NOT BETWEEN 0 AND ql_private.epoch_ms(v_now) + v_max_ahead_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'notBeforeMs',
            MESSAGE = format('notBeforeMs must be between 0 and %s (now + 1 year)',
                             ql_private.epoch_ms(v_now) + v_max_ahead_ms);
    END IF;
    IF p_key IS NOT NULL THEN
        IF char_length(p_key) NOT BETWEEN 1 AND 128
           OR p_key ~ '[\u0001-\u001f\u007f-\u009f\u2028\u2029]' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'key',
                MESSAGE = 'key must be 1 to 128 printable characters';
        END IF;
        IF p_count <> 1 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'key',
                MESSAGE = 'key requires count = 1';
        END IF;
    END IF;
    v_due := CASE
        WHEN p_delay_ms > 0 THEN v_now + make_interval(secs => p_delay_ms / 1000.0)
        WHEN p_not_before_ms IS NOT NULL
             AND to_timestamp(p_not_before_ms / 1000.0) > v_now
            THEN to_timestamp(p_not_before_ms / 1000.0)
    END;

    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT r.id INTO v_run_id FROM ql_private.runs r
         WHERE r.task_id = v_task_id AND r.idempotency_key = p_key;
        IF FOUND THEN
            RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id), 'existing', true);
        END IF;
    END IF;
    IF NOT v_task.enabled THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'taskId', MESSAGE = 'task is disabled';
    END IF;
    IF v_task.current_revision_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'taskId',
            MESSAGE = 'task has no published revision';
    END IF;

    v_class_id := ql_private.placement_class_of(v_task.current_revision_id);
    v_now := clock_timestamp();

    IF p_key IS NOT NULL THEN
        -- One run; ON CONFLICT waits for a concurrent insert of the same key and
        -- then inserts nothing (and neither the attempt nor the event, which are
        -- fed by RETURNING).
        LOOP
            WITH new_run AS (
                INSERT INTO ql_private.runs (
                    id, project_id, task_id, execution_revision_id, priority, state,
                    current_attempt_id, placement_class, due_at, idempotency_key,
                    created_at, updated_at, pool_id)
                VALUES (gen_random_uuid(), v_task.project_id, v_task.id,
                        v_task.current_revision_id, p_priority::smallint, 'queued',
                        gen_random_uuid(), v_class_id, v_due, p_key, v_now, v_now,
                        v_task.pool_id)
                ON CONFLICT (task_id, idempotency_key) WHERE idempotency_key IS NOT NULL
                DO NOTHING
                RETURNING id, current_attempt_id
            ), new_attempt AS (
                INSERT INTO ql_private.attempts (
                    id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
                    max_attempts, retry_base_ms, retry_cap_ms)
                SELECT nr.current_attempt_id, nr.id, 1, 'remote_worker', 'claimed',
                       coalesce(v_due, v_now), v_now, v_now,
                       v_task.max_attempts, v_task.retry_base_ms, v_task.retry_cap_ms
                  FROM new_run nr
            ), new_event AS (
                INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
                SELECT 'run.queued', nr.id, nr.current_attempt_id,
                       jsonb_strip_nulls(jsonb_build_object(
                           'taskId', v_task.id,
                           'executionRevisionId', v_task.current_revision_id,
                           'attemptId', nr.current_attempt_id,
                           'priority', p_priority,
                           'dueAtMs', ql_private.epoch_ms(v_due))),
                       v_now
                  FROM new_run nr
            )
            SELECT nr.id INTO v_run_id FROM new_run nr;
            IF FOUND THEN
                RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id),
                                          'existing', false);
            END IF;
            SELECT r.id INTO v_run_id FROM ql_private.runs r
             WHERE r.task_id = v_task_id AND r.idempotency_key = p_key;
            IF FOUND THEN
                RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id),
                                          'existing', true);
            END IF;
            -- The conflicting run was pruned in between: insert again.
        END LOOP;
    END IF;

    WITH planned AS MATERIALIZED (
        SELECT gen_random_uuid() AS run_id,
               gen_random_uuid() AS attempt_id,
               nextval('ql_private.run_queue_seq') AS seq
          FROM generate_series(1, p_count) AS g
         ORDER BY g
    ), new_runs AS (
        INSERT INTO ql_private.runs (
            id, project_id, task_id, execution_revision_id, priority, queue_seq, state,
            current_attempt_id, placement_class, due_at, created_at, updated_at, pool_id)
        SELECT p.run_id, v_task.project_id, v_task.id, v_task.current_revision_id,
               p_priority::smallint, p.seq, 'queued', p.attempt_id, v_class_id, v_due,
               v_now, v_now, v_task.pool_id
          FROM planned p
    ), new_attempts AS (
        INSERT INTO ql_private.attempts (
            id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
            max_attempts, retry_base_ms, retry_cap_ms)
        SELECT p.attempt_id, p.run_id, 1, 'remote_worker', 'claimed', coalesce(v_due, v_now),
               v_now, v_now, v_task.max_attempts, v_task.retry_base_ms, v_task.retry_cap_ms
          FROM planned p
    ), new_events AS (
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        SELECT 'run.queued', p.run_id, p.attempt_id,
               jsonb_strip_nulls(jsonb_build_object(
                   'taskId', v_task.id,
                   'executionRevisionId', v_task.current_revision_id,
                   'attemptId', p.attempt_id,
                   'priority', p_priority,
                   'dueAtMs', ql_private.epoch_ms(v_due))),
               v_now
          FROM planned p
    )
    -- Data-modifying CTEs always run to completion, referenced or not.
    SELECT jsonb_agg(to_jsonb(p.run_id) ORDER BY p.seq) INTO v_run_ids FROM planned p;
    RETURN jsonb_build_object('runIds', v_run_ids, 'existing', false);
END
$$;
REVOKE ALL ON FUNCTION ql.enqueue_runs(text, integer, integer, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.enqueue_runs(text, integer, integer, bigint, bigint, text)
    TO ql_runtime;
