-- ql.cancel_runs(p_task_id text, p_state text) -> jsonb {cancelled}
--
-- Purpose: bulk cancel (SPEC §9.5 `admin run cancel --task ID --state queued`):
--   every run of the task in state p_state is cancelled as ql.cancel_run
--   cancels a queued run: the run -> 'cancelled' (cancel_requested,
--   finished_at), its current attempt -> 'cancelled' (reason cancelled,
--   finished_at), one `run.cancelled` event each ({attemptId, leaseReleased:
--   false, actor: session_user, bulk: true}). Only `queued` is supported: a
--   queued run holds no live lease (every release path re-queues, see
--   candidate_page), so nothing else changes; runs in flight are cancelled one
--   by one with ql.cancel_run (their worker must be told). Scheduled runs (due
--   later) are queued too and are cancelled with the rest.
--   Set-based: one statement locks, cancels and records the whole set (runs_task_state_seq
--   range of the task's queued runs).
-- Inputs: p_task_id (lowercase canonical UUID), p_state ('queued').
-- Fences: the task exists; each run is re-checked on its locked row (still
--   queued).
-- Writes: the runs, their current attempts, one event per run.
-- Locks: each run and its current attempt FOR NO KEY UPDATE SKIP LOCKED, in one
--   statement (so it never waits for, and cannot deadlock with, a claim, a
--   sweeper or ql.cancel_run): a run a claim holds right now is left alone — it
--   is leaving `queued` anyway — and is not counted.
-- Idempotency: a second call finds no queued run and returns {cancelled: 0}.
-- Errors: QL001 malformed task id (COLUMN taskId), a state other than queued
--   (COLUMN state); QL004 unknown task (COLUMN taskId); nothing changed on error.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.cancel_runs(p_task_id text, p_state text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_now timestamptz;
    v_count bigint;
BEGIN
    IF p_state IS NULL OR p_state <> 'queued' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
            MESSAGE = 'state must be queued (the only state cancelled in bulk)';
    END IF;
    PERFORM 1 FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;

    v_now := clock_timestamp();
    WITH picked AS MATERIALIZED (
        SELECT r.id AS run_id, a.id AS attempt_id, a.state AS attempt_state
          FROM ql_private.runs r
          JOIN ql_private.attempts a ON a.id = r.current_attempt_id
         WHERE r.task_id = v_task_id AND r.state = 'queued'
         ORDER BY r.queue_seq
           FOR NO KEY UPDATE OF r, a SKIP LOCKED
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
    SELECT count(*) INTO v_count FROM picked;
    RETURN jsonb_build_object('cancelled', v_count);
END
$$;
REVOKE ALL ON FUNCTION ql.cancel_runs(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.cancel_runs(text, text) TO ql_runtime;
COMMENT ON FUNCTION ql.cancel_runs(text, text) IS
'Bulk cancel of a task''s queued runs (SPEC 9.5), each as ql.cancel_run cancels a queued run: run and current attempt cancelled, one run.cancelled event each naming the actor (session_user); returns {cancelled: N}. Inputs: p_task_id, p_state (only queued). Fences: task exists; runs re-checked on the locked rows. Writes: runs, attempts, events. Locks: run + attempt FOR NO KEY UPDATE SKIP LOCKED in one statement (never waits; a run being claimed is left alone). Idempotent (a second call cancels 0). Errors: QL001 taskId/state (COLUMN), QL004 unknown task. Caller: ql_runtime.';
