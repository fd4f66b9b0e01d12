-- ql.waiting_runs(p_limit integer DEFAULT 20) -> jsonb
--
-- Purpose: the console overview's "waiting" panel (SPEC §10): for the oldest
--   waiting runs, whether any live session could take them. {runs: [{runId,
--   taskId, task, project, priority, queuedAtMs, waitingMs, verdict,
--   sessionsMatching, sessionsWithFreeSlots, mismatches: {executor, label,
--   runtime}}], liveSessions, sessionsCapped, scanned}.
--   * The runs: queued (not offered), runtime-owned, not cancel-requested, due
--     (not scheduled for later), oldest first by enqueue order (queue_seq),
--     among the first 1000 queued runs; at most p_limit of them.
--   * The sessions: active, unexpired, of a worker that is not disabled (what a
--     pull needs: ql.pull_offer refuses the others), at most 200 (most recently
--     seen first; `sessionsCapped` when more were live).
--   * The verdict of a run against a session is ql_private.placement_evaluate
--     of the run's placement class ({required} of its revision, migration 0006)
--     against the session's stored capabilities: the same evaluation the claim
--     path makes (ql_private.matching_classes), so the panel cannot disagree
--     with dispatch about who qualifies. It is computed once per distinct class
--     and session, not per run. verdict: `no_live_session` (no session is
--     live), `ready` (a matching session has a free slot: the next pull of that
--     session can take it), `busy` (sessions match but all their slots are
--     used), `no_match` (no live session satisfies the placement; `mismatches`
--     counts the sessions by the first failing requirement, names only, never a
--     label value or version).
-- Cost: one range of runs_state_seq ('queued', queue_seq ASC) stopping at 1000
--   entries, the listed runs' rows by primary key, the active sessions
--   (worker_sessions_one_active) with one live-lease count each
--   (run_leases_session_live_counted), and classes x sessions evaluations
--   (<= p_limit x 200).
-- Inputs: p_limit 1..100 (default 20).
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL006 limit out of 1..100 (COLUMN limit).
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.waiting_runs(p_limit integer DEFAULT 20)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_scan_cap constant integer := 1000;
    v_session_cap constant integer := 200;
    v_default_required constant jsonb := '{"executors": ["remote-worker"]}';
    v_now timestamptz := clock_timestamp();
    v_scanned integer;
    v_live integer;
    v_rows jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 100';
    END IF;

    SELECT count(*) INTO v_live
      FROM ql_private.worker_sessions s
      JOIN ql_private.workers w ON w.id = s.worker_id
     WHERE s.state = 'active' AND s.expires_at > v_now AND w.disabled_at IS NULL;

    WITH head AS (
        SELECT r.id, r.queue_seq
          FROM ql_private.runs r
         WHERE r.state = 'queued'
         ORDER BY r.state, r.queue_seq
         LIMIT v_scan_cap
    ), waiting AS (
        SELECT r.*, h.queue_seq AS seq
          FROM head h
          JOIN ql_private.runs r ON r.id = h.id
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND (r.due_at IS NULL OR r.due_at <= v_now)
         ORDER BY h.queue_seq
         LIMIT p_limit
    ), req AS (
        SELECT wr.id, coalesce(pc.required, er.placement -> 'required', v_default_required) AS required
          FROM waiting wr
          LEFT JOIN ql_private.placement_classes pc ON pc.id = wr.placement_class
          LEFT JOIN ql_private.execution_revisions er ON er.id = wr.execution_revision_id
    ), sessions AS (
        SELECT s.session_id, s.capabilities, s.slots,
               (SELECT count(*) FROM ql_private.run_leases rl
                 WHERE rl.session_id = s.session_id AND rl.released_at IS NULL
                   AND (rl.started_at IS NOT NULL OR rl.expires_at > v_now)) AS used
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
         WHERE s.state = 'active' AND s.expires_at > v_now AND w.disabled_at IS NULL
         ORDER BY s.heartbeat_at DESC, s.session_id
         LIMIT v_session_cap
    ), classes AS (
        SELECT DISTINCT q.required FROM req q
    ), verdicts AS (
        SELECT c.required,
               count(*) FILTER (WHERE pe.passed) AS matching,
               count(*) FILTER (WHERE pe.passed AND s.used < s.slots) AS free,
               count(*) FILTER (WHERE pe.category = 'executor') AS executor,
               count(*) FILTER (WHERE pe.category = 'label') AS label,
               count(*) FILTER (WHERE pe.category = 'runtime') AS runtime
          FROM classes c
         CROSS JOIN sessions s
         CROSS JOIN LATERAL ql_private.placement_evaluate(
               jsonb_build_object('required', c.required), s.capabilities) pe
         GROUP BY c.required
    )
    SELECT jsonb_agg(jsonb_build_object(
               'runId', wr.id,
               'taskId', wr.task_id,
               'task', t.name,
               'project', p.name,
               'priority', wr.priority,
               'queuedAtMs', ql_private.epoch_ms(wr.created_at),
               'waitingMs', floor(extract(epoch FROM v_now - coalesce(wr.due_at, wr.created_at))
                                  * 1000)::bigint,
               'verdict', CASE WHEN v_live = 0 THEN 'no_live_session'
                               WHEN coalesce(v.free, 0) > 0 THEN 'ready'
                               WHEN coalesce(v.matching, 0) > 0 THEN 'busy'
                               ELSE 'no_match' END,
               'sessionsMatching', coalesce(v.matching, 0),
               'sessionsWithFreeSlots', coalesce(v.free, 0),
               'mismatches', jsonb_build_object('executor', coalesce(v.executor, 0),
                                                'label', coalesce(v.label, 0),
                                                'runtime', coalesce(v.runtime, 0)))
               ORDER BY wr.seq),
           (SELECT count(*) FROM head)
      INTO v_rows, v_scanned
      FROM waiting wr
      JOIN req q ON q.id = wr.id
      JOIN ql_private.tasks t ON t.id = wr.task_id
      JOIN ql_private.projects p ON p.id = t.project_id
      LEFT JOIN verdicts v ON v.required = q.required;

    RETURN jsonb_build_object(
        'runs', coalesce(v_rows, '[]'::jsonb),
        'liveSessions', v_live,
        'sessionsCapped', v_live > v_session_cap,
        'scanned', coalesce(v_scanned, 0));
END
$$;
REVOKE ALL ON FUNCTION ql.waiting_runs(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.waiting_runs(integer) TO ql_readonly, ql_runtime;
COMMENT ON FUNCTION ql.waiting_runs(integer) IS
'The console''s waiting panel (SPEC 10): the oldest waiting runs (queued, due, not cancel-requested; among the first 1000 queued by queue_seq, at most p_limit) each with a placement verdict against the live sessions (active, unexpired, worker enabled; at most 200) by ql_private.placement_evaluate of its placement class, as the claim path evaluates it: {runs: [{runId, taskId, task, project, priority, queuedAtMs, waitingMs, verdict (ready|busy|no_match|no_live_session), sessionsMatching, sessionsWithFreeSlots, mismatches}], liveSessions, sessionsCapped, scanned}. Inputs: p_limit 1..100 (default 20). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 limit. Caller: ql_readonly, ql_runtime.';
