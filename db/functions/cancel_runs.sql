-- ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer DEFAULT 5000)
--   -> jsonb {cancelled, notCancelled: [{runId, state, reason}]}
--
-- Purpose: bulk cancel (SPEC §9.5 `admin run cancel --task ID --state queued`):
--   every run of the task that is `queued` when the call starts is `cancelled`
--   when it returns, or listed in notCancelled. Each is cancelled as
--   ql.cancel_run cancels a queued run: the run -> 'cancelled'
--   (cancel_requested, finished_at), its current attempt -> 'cancelled'
--   (reason cancelled, finished_at), one `run.cancelled` event each
--   ({attemptId, leaseReleased, offerId?, actor: session_user, bulk: true}).
--   Scheduled runs (due later) are queued too and are cancelled with the rest.
--   Only `queued` is supported; runs in flight at the start are cancelled one
--   by one with ql.cancel_run (their worker must be told).
--   Two passes. (1) Set-based: one statement takes the set (the task's queued
--   runs, runs_task_state_seq, on the statement's snapshot: "queued when the
--   call started") and locks, cancels and records every run whose attempt and
--   run it can lock at once (SKIP LOCKED). (2) Each run of the set it could not
--   take (another transaction held it: a claim, a sweep, ql.cancel_run, a
--   second bulk cancel) is then waited for, in queue order, within what is
--   left of p_wait_ms: locked through ql_private.lock_run_attempt and decided
--   on the locked rows. Still queued, or claimed meanwhile but not started
--   (dispatching, unstarted lease): cancelled, the unstarted lease released
--   `cancelled` (its offer then recovers as lease_terminal). Cancelled
--   meanwhile by someone else: done, not counted. Started meanwhile
--   (starting|running) or finished: listed, reason `started` | `finished`
--   (left alone: a started run is cancelled with ql.cancel_run, which tells
--   its worker). Not lockable before the bound: listed, reason `locked`,
--   nothing written for it.
-- Inputs: p_task_id (lowercase canonical UUID), p_state ('queued'), p_wait_ms
--   0..60000 (default 5000): how long, in all, pass 2 may wait for locks.
-- Fences: the task exists; each run is re-checked on its locked rows.
-- Writes: the runs, their current attempts, a released unstarted lease, one
--   event per cancelled run; nothing for a listed run.
-- Locks: in the lifecycle order attempt -> run (-> lease) (docs/LIFECYCLE.md
--   "Locks"). First an advisory transaction lock on the task's bulk cancel
--   (two bulk cancels of one task queue instead of each holding half the set
--   and waiting for the other's half), waited for within p_wait_ms; then pass
--   1: attempt + run FOR NO KEY UPDATE SKIP LOCKED in one statement (never
--   waits); pass 2: per run, the attempt FOR UPDATE then the run FOR NO KEY
--   UPDATE, each wait bounded by lock_timeout = the time left (a deadlock
--   detected on one of them gives that wait up and tries again while time is
--   left). lock_timeout is this function's own setting, restored on return.
-- Idempotency: a second call finds no queued run: {cancelled: 0, notCancelled: []}.
-- Errors: QL001 malformed task id (COLUMN taskId), a state other than queued
--   (COLUMN state); QL006 p_wait_ms out of 0..60000 (COLUMN waitMs); QL004
--   unknown task (COLUMN taskId); nothing changed on error. A run that could
--   not be cancelled is no error: it is listed (the admin command exits 1).
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.cancel_runs(
    p_task_id text,
    p_state text,
    p_wait_ms integer DEFAULT 5000
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = 0
AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_max_wait_ms constant integer := 60000;
    v_deadline timestamptz;
    v_now timestamptz;
    v_count bigint;
    v_left uuid[];
    v_run_id uuid;
    v_locked record;
    v_run ql_private.runs;
    v_attempt ql_private.attempts;
    v_live ql_private.run_leases;
    v_not jsonb := '[]'::jsonb;
    v_reason text;
BEGIN
    IF p_state IS NULL OR p_state <> 'queued' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
            MESSAGE = 'state must be queued (the only state cancelled in bulk)';
    END IF;
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND v_max_wait_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'waitMs',
            MESSAGE = format('waitMs must be between 0 and %s', v_max_wait_ms);
    END IF;
    PERFORM 1 FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    v_deadline := clock_timestamp() + make_interval(secs => p_wait_ms / 1000.0);

    BEGIN
        PERFORM set_config('lock_timeout', greatest(p_wait_ms, 1) || 'ms', true);
        PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.cancel_runs:' || v_task_id, 0));
    EXCEPTION WHEN lock_not_available THEN
        -- Another bulk cancel of this task held it for the whole bound.
        SELECT coalesce(jsonb_agg(jsonb_build_object('runId', r.id, 'state', r.state,
                                                     'reason', 'locked') ORDER BY r.queue_seq),
                        '[]'::jsonb)
          INTO v_not
          FROM ql_private.runs r WHERE r.task_id = v_task_id AND r.state = 'queued';
        RETURN jsonb_build_object('cancelled', 0, 'notCancelled', v_not);
    END;

    -- Pass 1: everything lockable right now, in one statement (never waits).
    v_now := clock_timestamp();
    WITH queued AS MATERIALIZED (
        SELECT r.id, r.queue_seq FROM ql_private.runs r
         WHERE r.task_id = v_task_id AND r.state = 'queued'
    ), picked AS MATERIALIZED (
        SELECT r.id AS run_id, a.id AS attempt_id, a.state AS attempt_state
          FROM ql_private.runs r
          JOIN ql_private.attempts a ON a.id = r.current_attempt_id
         WHERE r.task_id = v_task_id AND r.state = 'queued'
         ORDER BY r.queue_seq
           FOR NO KEY UPDATE OF a, r SKIP LOCKED
    ), cancelled_attempts AS (
        UPDATE ql_private.attempts a
           SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
               finished_at = v_now
          FROM picked p
         WHERE a.id = p.attempt_id
           AND p.attempt_state NOT IN ('succeeded', 'failed', 'lost', 'cancelled')
    ), cancelled_runs AS (
        UPDATE ql_private.runs r
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
          FROM picked p
         WHERE r.id = p.run_id
    ), new_events AS (
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        SELECT 'run.cancelled', p.run_id, p.attempt_id, jsonb_strip_nulls(jsonb_build_object(
                   'attemptId', p.attempt_id, 'leaseReleased', false,
                   'actor', session_user, 'bulk', true)),
               v_now
          FROM picked p
    )
    SELECT (SELECT count(*) FROM picked),
           (SELECT array_agg(q.id ORDER BY q.queue_seq) FROM queued q
             WHERE NOT EXISTS (SELECT 1 FROM picked p WHERE p.run_id = q.id))
      INTO v_count, v_left;

    -- Pass 2: the runs another transaction held, waited for within the bound.
    FOREACH v_run_id IN ARRAY coalesce(v_left, '{}') LOOP
        v_reason := NULL;
        LOOP
            BEGIN
                PERFORM set_config('lock_timeout', greatest(1, ceil(1000 * extract(
                    epoch FROM v_deadline - clock_timestamp())))::bigint || 'ms', true);
                v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
                EXIT;
            EXCEPTION
                WHEN lock_not_available THEN
                    v_reason := 'locked';
                    EXIT;
                WHEN deadlock_detected THEN
                    IF clock_timestamp() >= v_deadline THEN
                        v_reason := 'locked';
                        EXIT;
                    END IF;
            END;
        END LOOP;
        IF v_reason IS NOT NULL THEN
            v_not := v_not || jsonb_build_object('runId', v_run_id, 'state',
                (SELECT r.state FROM ql_private.runs r WHERE r.id = v_run_id), 'reason', v_reason);
            CONTINUE;
        END IF;
        v_run := v_locked.run;
        v_attempt := v_locked.attempt;
        CONTINUE WHEN v_run.id IS NULL OR v_run.state = 'cancelled';
        v_live := NULL;
        SELECT l.* INTO v_live FROM ql_private.run_leases l
         WHERE l.attempt_id = v_attempt.id AND l.released_at IS NULL;
        IF v_run.state NOT IN ('queued', 'dispatching') OR v_live.started_at IS NOT NULL THEN
            v_not := v_not || jsonb_build_object('runId', v_run_id, 'state', v_run.state,
                'reason', CASE WHEN v_run.state IN ('succeeded', 'failed') THEN 'finished'
                               ELSE 'started' END);
            CONTINUE;
        END IF;
        v_now := clock_timestamp();
        IF v_live.id IS NOT NULL THEN
            UPDATE ql_private.run_leases l
               SET released_at = v_now, release_reason = 'cancelled', updated_at = v_now
             WHERE l.id = v_live.id;
        END IF;
        IF v_attempt.id IS NOT NULL
           AND v_attempt.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
            UPDATE ql_private.attempts a
               SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
                   finished_at = v_now
             WHERE a.id = v_attempt.id;
        END IF;
        UPDATE ql_private.runs r
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
         WHERE r.id = v_run.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        VALUES ('run.cancelled', v_run.id, v_attempt.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id, 'offerId', v_live.offer_id,
            'leaseReleased', v_live.id IS NOT NULL, 'actor', session_user, 'bulk', true)),
            v_now);
        v_count := v_count + 1;
    END LOOP;
    RETURN jsonb_build_object('cancelled', v_count, 'notCancelled', v_not);
END
$$;
REVOKE ALL ON FUNCTION ql.cancel_runs(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.cancel_runs(text, text, integer) TO ql_runtime;
