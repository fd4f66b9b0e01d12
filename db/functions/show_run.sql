-- ql.show_run(p_run_id text) -> jsonb
--
-- Purpose: one run in detail, for `admin run show` and the console (SPEC §9.4):
--   {run: {runId, taskId, projectId, project, taskName, pool, state, priority,
--          queuedAtMs, notBeforeMs, attempts, updatedAtMs, finishedAtMs,
--          cancelRequested, executionRevisionId, key},
--    attempts: [{attemptId, number, state, workerId, sessionId, claimedAtMs,
--                startedAtMs, finishedAtMs, exitCode, reason, result}],
--    events: [{type, atMs, ...payload fields..., attemptId}]}.
--   Attempts in number order (at most the latest 200), each with the worker,
--   session, claim and start time of its latest lease (null when never
--   claimed) and its stored completion result (SPEC §9.3). `project` and
--   `taskName` name the run's project and task, `pool` is the pool the run
--   carries as `P/N` (SPEC §13.1). Events oldest first,
--   at most the latest 200; each is its payload with `type`, `atMs` and
--   `attemptId` added. No token, secret or digest of either is ever stored in a
--   lease projection read here or in an event payload (events CHECK), so none
--   is returned.
-- Cost: one primary-key probe of the run, its task, project and pool, one range of attempts (run_id, attempt_no), one
--   latest-lease probe per attempt ((attempt_id, lease_generation)), one range
--   of events (events_run) — bounded by the caps above.
-- Inputs: p_run_id (lowercase canonical UUID).
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL001 malformed run id (COLUMN runId); QL004 unknown run (COLUMN runId).
-- Caller: ql_readonly, ql_runtime, ql.producer_cancel_run, ql.producer_retry_run,
--   ql.producer_show_run.
CREATE OR REPLACE FUNCTION ql.show_run(p_run_id text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_max_attempts constant integer := 200;
    v_max_events constant integer := 200;
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
    v_run ql_private.runs;
    v_current ql_private.attempts;
    v_attempts jsonb;
    v_events jsonb;
    v_project text;
    v_task_name text;
    v_pool text;
BEGIN
    SELECT r.* INTO v_run FROM ql_private.runs r WHERE r.id = v_run_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    SELECT a.* INTO v_current FROM ql_private.attempts a WHERE a.id = v_run.current_attempt_id;
    SELECT pr.name, t.name, pr.name || '/' || pl.name INTO v_project, v_task_name, v_pool
      FROM ql_private.tasks t, ql_private.projects pr, ql_private.pools pl
     WHERE t.id = v_run.task_id AND pr.id = v_run.project_id AND pl.id = v_run.pool_id;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'attemptId', a.id,
               'number', a.attempt_no,
               'state', a.state,
               'workerId', l.worker_id,
               'sessionId', l.session_id,
               'claimedAtMs', ql_private.epoch_ms(l.claimed_at),
               'startedAtMs', ql_private.epoch_ms(l.started_at),
               'finishedAtMs', ql_private.epoch_ms(a.finished_at),
               'exitCode', a.exit_code,
               'reason', a.reason,
               'result', a.result)
               ORDER BY a.attempt_no), '[]'::jsonb)
      INTO v_attempts
      FROM (SELECT aa.* FROM ql_private.attempts aa
             WHERE aa.run_id = v_run_id
             ORDER BY aa.attempt_no DESC
             LIMIT v_max_attempts) a
      LEFT JOIN LATERAL (
            SELECT ll.worker_id, ll.session_id, ll.claimed_at, ll.started_at
              FROM ql_private.run_leases ll
             WHERE ll.attempt_id = a.id
             ORDER BY ll.lease_generation DESC
             LIMIT 1) l ON true;

    SELECT coalesce(jsonb_agg(
               e.payload || jsonb_build_object(
                   'type', e.type,
                   'atMs', ql_private.epoch_ms(e.created_at),
                   'attemptId', coalesce(to_jsonb(e.attempt_id), e.payload -> 'attemptId'))
               ORDER BY e.id), '[]'::jsonb)
      INTO v_events
      FROM (SELECT ee.id, ee.type, ee.attempt_id, ee.payload, ee.created_at
              FROM ql_private.events ee
             WHERE ee.run_id = v_run_id
             ORDER BY ee.id DESC
             LIMIT v_max_events) e;

    RETURN jsonb_build_object(
        'run', jsonb_build_object(
            'runId', v_run.id,
            'taskId', v_run.task_id,
            'projectId', v_run.project_id,
            'project', v_project,
            'taskName', v_task_name,
            'pool', v_pool,
            'state', v_run.state,
            'priority', v_run.priority,
            'queuedAtMs', ql_private.epoch_ms(v_run.created_at),
            'notBeforeMs', ql_private.epoch_ms(coalesce(v_run.due_at, v_current.not_before)),
            'attempts', v_current.attempt_no,
            'updatedAtMs', ql_private.epoch_ms(v_run.updated_at),
            'finishedAtMs', ql_private.epoch_ms(v_run.finished_at),
            'cancelRequested', v_run.cancel_requested,
            'executionRevisionId', v_run.execution_revision_id,
            'key', v_run.idempotency_key),
        'attempts', v_attempts,
        'events', v_events);
END
$$;
REVOKE ALL ON FUNCTION ql.show_run(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.show_run(text) TO ql_readonly, ql_runtime;
