-- ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer,
--                              p_after text) -> jsonb {runs, next}
--
-- Purpose: the §9.4 list document of ql.list_runs for every task of one project
--   (`GET /v1/runs` of the producer API without a task, SPEC §13.4): the same
--   row fields (runId, taskId, project, taskName, pool, state, priority,
--   queuedAtMs, notBeforeMs, attempts, updatedAtMs), order (queue_seq DESC),
--   cursor and bounds; tests/sql/producer_list_runs.sql pins it equal to
--   ql.list_runs' page where one project holds every run.
-- Cost: one backward range scan of runs_project_state_seq (project_id, state,
--   queue_seq) per state, each stopping after p_limit + 1 rows, merged; then
--   one primary-key probe per listed run. No count, no OFFSET.
-- Inputs: p_project_id (from ql_private.producer_token); p_states (NULL or
--   empty = all), p_limit 1..1000, p_after (a previous page's next) as
--   ql.list_runs.
-- Writes: none (STABLE). Locks: none.
-- Errors (as ql.list_runs, COLUMN = wire field): QL001 state, after; QL006 limit.
-- Caller: ql.producer_list_runs.
CREATE OR REPLACE FUNCTION ql_private.project_runs_page(
    p_project_id uuid, p_states text[], p_limit integer, p_after text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_all_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                          'succeeded', 'failed', 'cancelled'];
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

    SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
           array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
      INTO v_ids, v_seqs
      FROM (SELECT r.id, r.queue_seq
              FROM unnest(v_states) AS st(state)
             CROSS JOIN LATERAL (
                   SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                    WHERE rr.project_id = p_project_id AND rr.state = st.state
                      AND rr.queue_seq < v_after
                    ORDER BY rr.queue_seq DESC
                    LIMIT p_limit + 1) r
             ORDER BY r.queue_seq DESC
             LIMIT p_limit + 1) x;

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
REVOKE ALL ON FUNCTION ql_private.project_runs_page(uuid, text[], integer, text) FROM PUBLIC;
