-- ql.run_state_counts() -> jsonb
--
-- Purpose: the console overview's "runs by state" (SPEC §10): {states:
--   [{state, runs, capped, estimate}], cap}, one entry per run state in
--   lifecycle order (queued, dispatching, starting, running, succeeded, failed,
--   cancelled). `runs` is exact up to `cap` (1000); past it `capped` is true
--   and `estimate` is the planner's count for that state (the state's
--   most-common-value frequency in pg_stats times pg_class.reltuples of runs,
--   kept fresh by the queue tables' autovacuum settings; null when ANALYZE has
--   no frequency for it). A console page must render in <= 100 ms with
--   1,000,000 runs stored, so nothing here counts a whole state; the cap is
--   1000 (as ql.queue_depth's), not 10000: in a busy window the newest rows
--   are not all-visible, and counting 10000 of them (heap visits) was the
--   overview's largest read in the busy-window bench.
-- Cost: seven index-only range scans of runs_state_seq (state, queue_seq),
--   each stopping after cap + 1 entries, plus two catalog probes when capped.
-- Inputs: none.
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: none.
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.run_state_counts()
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_cap constant integer := 1000;
    v_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                      'succeeded', 'failed', 'cancelled'];
    v_rows jsonb;
BEGIN
    WITH counted AS (
        SELECT st.state, st.ord,
               -- ORDER BY in index order keeps the planner on the index: a
               -- LIMIT alone lets it pick a sequential scan that expects the
               -- state's rows spread evenly, while the newest states (queued,
               -- running) sit at the table's end.
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.state = st.state
                                       ORDER BY r.state, r.queue_seq
                                       LIMIT v_cap + 1) x) AS runs
          FROM unnest(v_states) WITH ORDINALITY AS st(state, ord)
    ), stats AS (
        -- pg_stats' most_common_vals is anyarray: read it through its text form.
        SELECT v.state, v.freq
          FROM pg_catalog.pg_stats s
         CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs)
               AS v(state, freq)
         WHERE s.schemaname = 'ql_private' AND s.tablename = 'runs' AND s.attname = 'state'
    )
    SELECT jsonb_agg(jsonb_build_object(
               'state', c.state,
               'runs', least(c.runs, v_cap),
               'capped', c.runs > v_cap,
               'estimate', CASE WHEN c.runs > v_cap THEN
                   (SELECT greatest((st.freq * cl.reltuples)::bigint, v_cap + 1)
                      FROM stats st, pg_catalog.pg_class cl
                     WHERE st.state = c.state
                       AND cl.oid = 'ql_private.runs'::pg_catalog.regclass) END)
               ORDER BY c.ord)
      INTO v_rows
      FROM counted c;
    RETURN jsonb_build_object('states', v_rows, 'cap', v_cap);
END
$$;
REVOKE ALL ON FUNCTION ql.run_state_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.run_state_counts() TO ql_readonly, ql_runtime;
