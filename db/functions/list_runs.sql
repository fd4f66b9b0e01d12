-- ql.list_runs(p_task_id text DEFAULT NULL, p_states text[] DEFAULT NULL,
--              p_limit integer DEFAULT 100, p_after text DEFAULT NULL) -> jsonb
--
-- Purpose: one keyset page of runs, newest first (queue_seq DESC), for `admin
--   run list` and the console (SPEC §9.4): {runs: [{runId, taskId, state,
--   priority, queuedAtMs, notBeforeMs, attempts, updatedAtMs}], next}.
--   `attempts` = the current attempt's number; `notBeforeMs` = the run's due
--   time when scheduled, else its current attempt's not_before (null without
--   one); `next` = an opaque cursor (the last row's queue_seq as decimal text)
--   to pass as p_after for the next page, null at the end.
-- Cost: index-driven for every filter combination and bounded by the page,
--   whatever is stored: one backward range scan per state — of runs_state_seq
--   (state, queue_seq) without a task, runs_task_state_seq (task_id, state,
--   queue_seq) with one — each stopping after p_limit + 1 rows, merged and cut
--   to p_limit + 1 (PostgreSQL cannot scan `state = ANY (...)` in key order, so
--   the states are a LATERAL loop, at most seven descents); then one
--   primary-key probe per listed run, its current attempt, task, project and
--   pool. No count of anything, no OFFSET.
-- Inputs: p_task_id (NULL = all tasks, else a lowercase canonical UUID),
--   p_states (NULL or empty = all; each one of queued, dispatching, starting,
--   running, succeeded, failed, cancelled; duplicates ignored), p_limit
--   1..1000, p_after (NULL = from the newest, else a cursor of a previous page).
-- Fences: none (an operator's read). An unknown task id lists nothing.
-- Writes: none (STABLE: one snapshot, no write possible). Locks: none.
-- Idempotency: read-only.
-- Errors: QL001 malformed task id (COLUMN taskId), unknown state (COLUMN
--   state), malformed cursor (COLUMN after); QL006 limit out of 1..1000 (COLUMN
--   limit).
-- Caller: ql_readonly, ql_runtime, ql.producer_list_runs.
CREATE OR REPLACE FUNCTION ql.list_runs(
    p_task_id text DEFAULT NULL,
    p_states text[] DEFAULT NULL,
    p_limit integer DEFAULT 100,
    p_after text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_all_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                          'succeeded', 'failed', 'cancelled'];
    v_task_id uuid;
    v_states text[];
    v_after bigint := 9223372036854775807;
    v_ids uuid[];
    v_seqs bigint[];
    v_runs jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_task_id IS NOT NULL THEN
        v_task_id := ql_private.parse_uuid(p_task_id, 'taskId');
    END IF;
    IF p_after IS NOT NULL THEN
        IF p_after !~ '^[0-9]{1,19}$' OR p_after::numeric > 9223372036854775807 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'after',
                MESSAGE = 'after must be the cursor (next) of a previous page';
        END IF;
        v_after := p_after::bigint;
    END IF;
    IF p_states IS NULL OR cardinality(p_states) = 0 THEN
        v_states := v_all_states;
    ELSE
        IF EXISTS (SELECT 1 FROM unnest(p_states) s WHERE s IS NULL OR s <> ALL (v_all_states)) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
                MESSAGE = 'state must be one of queued, dispatching, starting, running, '
                          'succeeded, failed, cancelled';
        END IF;
        v_states := ARRAY(SELECT DISTINCT s FROM unnest(p_states) s);
    END IF;

    -- Two statements rather than `task_id = x OR x IS NULL`: each keeps its
    -- own index whatever plan the function caches.
    IF v_task_id IS NULL THEN
        SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
               array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
          INTO v_ids, v_seqs
          FROM (SELECT r.id, r.queue_seq
                  FROM unnest(v_states) AS st(state)
                 CROSS JOIN LATERAL (
                       SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                        WHERE rr.state = st.state AND rr.queue_seq < v_after
                        ORDER BY rr.queue_seq DESC
                        LIMIT p_limit + 1) r
                 ORDER BY r.queue_seq DESC
                 LIMIT p_limit + 1) x;
    ELSE
        SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
               array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
          INTO v_ids, v_seqs
          FROM (SELECT r.id, r.queue_seq
                  FROM unnest(v_states) AS st(state)
                 CROSS JOIN LATERAL (
                       SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                        WHERE rr.task_id = v_task_id AND rr.state = st.state
                          AND rr.queue_seq < v_after
                        ORDER BY rr.queue_seq DESC
                        LIMIT p_limit + 1) r
                 ORDER BY r.queue_seq DESC
                 LIMIT p_limit + 1) x;
    END IF;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'runId', r.id,
               'taskId', r.task_id,
               'project', pr.name,
               'taskName', t.name,
               'pool', pr.name || '/' || pl.name,
               'state', r.state,
               'priority', r.priority,
               'queuedAtMs', ql_private.epoch_ms(r.created_at),
               'notBeforeMs', ql_private.epoch_ms(coalesce(r.due_at, a.not_before)),
               'attempts', a.attempt_no,
               'updatedAtMs', ql_private.epoch_ms(r.updated_at))
               ORDER BY o.ord), '[]'::jsonb)
      INTO v_runs
      FROM unnest(coalesce(v_ids, '{}')) WITH ORDINALITY AS o(id, ord)
      JOIN ql_private.runs r ON r.id = o.id
      JOIN ql_private.tasks t ON t.id = r.task_id
      JOIN ql_private.projects pr ON pr.id = r.project_id
      JOIN ql_private.pools pl ON pl.id = r.pool_id
      LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id
     WHERE o.ord <= p_limit;
    RETURN jsonb_build_object(
        'runs', v_runs,
        'next', CASE WHEN cardinality(v_ids) > p_limit THEN v_seqs[p_limit]::text END);
END
$$;
REVOKE ALL ON FUNCTION ql.list_runs(text, text[], integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.list_runs(text, text[], integer, text) TO ql_readonly, ql_runtime;
