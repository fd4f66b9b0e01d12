-- ql.waiting_runs(p_limit integer DEFAULT 20) -> jsonb
--
-- Purpose: the console overview's "waiting" panel (SPEC §10): for the oldest
--   waiting runs, whether any live session could take them. {runs: [{runId,
--   taskId, task, project, priority, queuedAtMs, waitingMs, verdict,
--   sessionsMatching, sessionsWithFreeSlots, mismatches: {executor, label,
--   runtime}}], liveSessions, sessionsCapped, scanned, prioritiesCapped,
--   capabilitiesCapped}.
--   * The runs: queued (not offered), runtime-owned, not cancel-requested, due
--     (not scheduled for later), oldest first by enqueue order (queue_seq); at
--     most p_limit of them. They are taken where dispatch takes them, never
--     from a scan of all queued runs (100,000 runs scheduled for later ahead of
--     one ready run must not hide it): the head (first p_limit by queue_seq) of
--     each ready priority in runs_candidate_keyset (at most 64 priorities; one
--     index descent each, ql_private.ready_priorities; `prioritiesCapped` when
--     more exist), plus the p_limit earliest-due runs of runs_due whose due time
--     has passed (not yet promoted by the sweeper), merged by queue_seq.
--     `scanned` = the index entries read for the head.
--   * waitingMs: since the run became ready: greatest(created_at, its current
--     attempt's not_before) (one primary-key probe): a retry waits from its
--     retry's not_before, a promoted scheduled run from its due time (the
--     sweeper clears due_at on promotion; created_at would overstate both).
--   * The sessions: active, unexpired, of a worker that is not disabled (what a
--     pull needs: ql.pull_offer refuses the others), at most 200 (most recently
--     seen first; `sessionsCapped` when more were live).
--   * The verdict of a run against a session is ql_private.placement_evaluate
--     of the run's placement class ({required} of its revision, migration 0006)
--     against the session's stored capabilities: the same evaluation the claim
--     path makes (ql_private.matching_classes), so the panel cannot disagree
--     with dispatch about who qualifies. It is computed once per distinct class
--     and distinct session capabilities (sessions declaring the same
--     capabilities share one evaluation), not per run; at most the 50 most
--     recently seen distinct capability sets are evaluated
--     (`capabilitiesCapped` when the live sessions have more; their counts are
--     then lower bounds). Why 50: 20 classes x 200 distinct sessions measured
--     ~100 ms of evaluations on a busy bench machine, the page's whole budget.
--     verdict: `no_live_session` (no session is live), `ready` (a matching
--     session has a free slot: the next pull of that session can take it),
--     `busy` (sessions match but all their slots are
--     used), `no_match` (no live session satisfies the placement; `mismatches`
--     counts the sessions by the first failing requirement, names only, never a
--     label value or version).
-- Cost: a loose index scan of runs_candidate_keyset (<= 65 descents), each
--   priority's range read up to p_limit entries; one range of runs_due up to
--   p_limit; the listed runs' rows and current attempts by primary key; the
--   active sessions (worker_sessions_one_active) with one live-lease count each
--   (run_leases_session_live_counted), and classes x distinct capabilities
--   evaluations (<= p_limit x 50; a fleet of identical workers: p_limit).
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
-- Every statement planned for its own p_limit and clock (a generic plan of the
-- head's key ranges measured 10x slower than the custom one in a busy window).
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_priority_cap constant integer := 64;
    v_session_cap constant integer := 200;
    v_capability_cap constant integer := 50;
    v_default_required constant jsonb := '{"executors": ["remote-worker"]}';
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_scanned integer;
    v_priorities integer;
    v_capabilities integer;
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

    -- The ready priorities (ql_private.ready_priorities: one index descent
    -- each, highest first), then each priority's head as a key range.
    WITH listed AS (
        SELECT p.neg, p.n
          FROM ql_private.ready_priorities(v_priority_cap + 1) WITH ORDINALITY AS p(neg, n)
    ), ready AS (
        SELECT h.id, h.queue_seq
          FROM listed l
         CROSS JOIN LATERAL (
               SELECT r.id, r.queue_seq FROM ql_private.runs r
                WHERE (-(r.priority::integer), r.queue_seq, r.id)
                      >= (l.neg, -9223372036854775808, v_nil)
                  AND (-(r.priority::integer), r.queue_seq, r.id)
                      < (l.neg + 1, -9223372036854775808, v_nil)
                  AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                  AND r.due_at IS NULL
                ORDER BY -(r.priority::integer), r.queue_seq, r.id
                LIMIT p_limit) h
         WHERE l.n <= v_priority_cap
    ), due AS (
        SELECT r.id, r.queue_seq FROM ql_private.runs r
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NOT NULL AND r.due_at <= v_now
         ORDER BY r.due_at
         LIMIT p_limit
    ), head AS (
        SELECT * FROM ready UNION ALL SELECT * FROM due
    ), waiting AS (
        SELECT r.*, h.queue_seq AS seq, greatest(r.created_at, a.not_before) AS since
          FROM (SELECT hh.id, hh.queue_seq FROM head hh ORDER BY hh.queue_seq LIMIT p_limit) h
          JOIN ql_private.runs r ON r.id = h.id
          LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id
    ), req AS (
        SELECT wr.id, coalesce(pc.required, er.placement -> 'required', v_default_required) AS required
          FROM waiting wr
          LEFT JOIN ql_private.placement_classes pc ON pc.id = wr.placement_class
          LEFT JOIN ql_private.execution_revisions er ON er.id = wr.execution_revision_id
    ), sessions AS (
        SELECT s.session_id, s.capabilities, s.slots, s.heartbeat_at,
               (SELECT count(*) FROM ql_private.run_leases rl
                 WHERE rl.session_id = s.session_id AND rl.released_at IS NULL
                   AND (rl.started_at IS NOT NULL OR rl.expires_at > v_now)) AS used
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
         WHERE s.state = 'active' AND s.expires_at > v_now AND w.disabled_at IS NULL
         ORDER BY s.heartbeat_at DESC, s.session_id
         LIMIT v_session_cap
    ), fleet AS (
        -- Sessions with equal capabilities get equal verdicts: evaluate each once,
        -- the 50 most recently seen distinct capability sets at most.
        SELECT s.capabilities, count(*) AS n, count(*) FILTER (WHERE s.used < s.slots) AS n_free
          FROM sessions s
         GROUP BY s.capabilities
         ORDER BY max(s.heartbeat_at) DESC, min(s.session_id::text)
         LIMIT v_capability_cap
    ), classes AS (
        SELECT DISTINCT q.required FROM req q
    ), verdicts AS (
        SELECT c.required,
               sum(f.n) FILTER (WHERE pe.passed) AS matching,
               sum(f.n_free) FILTER (WHERE pe.passed) AS free,
               sum(f.n) FILTER (WHERE pe.category = 'executor') AS executor,
               sum(f.n) FILTER (WHERE pe.category = 'label') AS label,
               sum(f.n) FILTER (WHERE pe.category = 'runtime') AS runtime
          FROM classes c
         CROSS JOIN fleet f
         CROSS JOIN LATERAL ql_private.placement_evaluate(
               jsonb_build_object('required', c.required), f.capabilities) pe
         GROUP BY c.required
    )
    SELECT jsonb_agg(jsonb_build_object(
               'runId', wr.id,
               'taskId', wr.task_id,
               'task', t.name,
               'project', p.name,
               'priority', wr.priority,
               'queuedAtMs', ql_private.epoch_ms(wr.created_at),
               'waitingMs', greatest(floor(extract(epoch FROM v_now - wr.since) * 1000), 0)::bigint,
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
           (SELECT count(*) FROM head),
           (SELECT count(*) FROM listed),
           (SELECT count(DISTINCT s.capabilities) FROM sessions s)
      INTO v_rows, v_scanned, v_priorities, v_capabilities
      FROM waiting wr
      JOIN req q ON q.id = wr.id
      JOIN ql_private.tasks t ON t.id = wr.task_id
      JOIN ql_private.projects p ON p.id = t.project_id
      LEFT JOIN verdicts v ON v.required = q.required;

    RETURN jsonb_build_object(
        'runs', coalesce(v_rows, '[]'::jsonb),
        'liveSessions', v_live,
        'sessionsCapped', v_live > v_session_cap,
        'scanned', coalesce(v_scanned, 0),
        'prioritiesCapped', coalesce(v_priorities, 0) > v_priority_cap,
        'capabilitiesCapped', coalesce(v_capabilities, 0) > v_capability_cap);
END
$$;
REVOKE ALL ON FUNCTION ql.waiting_runs(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.waiting_runs(integer) TO ql_readonly, ql_runtime;
