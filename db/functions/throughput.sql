-- ql.throughput(p_minutes integer DEFAULT 15) -> jsonb
--
-- Purpose: the console's throughput chart (SPEC §10): per minute of the last
--   p_minutes minutes (the current, partial minute last), the runs dispatched
--   (leases claimed: one lease row per dispatch, its claimed_at), succeeded and
--   failed (terminal runs by finished_at): {minutes: [{minuteMs, dispatched,
--   succeeded, failed}], fromMs, capped: {dispatched, finished}, cap}. Every
--   minute of the window is listed, zeros included, so the chart's x axis is
--   fixed. Each series reads at most `cap` (100000) rows, oldest first; when a
--   window held more, `capped` says so and the minutes after the cap read short
--   (the page says "capped"): a page must stay <= 100 ms however busy the
--   window was.
-- Cost: one range of run_leases_claimed (claimed_at, migration 0011) and one
--   of runs_terminal_finished (finished_at, terminal runs), each from the
--   window's start, stopping after cap + 1 rows.
-- Inputs: p_minutes 1..60 (default 15).
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL006 minutes out of 1..60 (COLUMN minutes).
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.throughput(p_minutes integer DEFAULT 15)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_cap constant integer := 100000;
    v_from timestamptz;
    v_dispatched jsonb;
    v_finished jsonb;
    v_dispatched_n bigint;
    v_finished_n bigint;
    v_minutes jsonb;
BEGIN
    IF p_minutes IS NULL OR p_minutes NOT BETWEEN 1 AND 60 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'minutes',
            MESSAGE = 'minutes must be between 1 and 60';
    END IF;
    v_from := date_trunc('minute', clock_timestamp()) - (p_minutes - 1) * interval '1 minute';

    SELECT coalesce(jsonb_object_agg(x.minute, x.n), '{}'::jsonb), coalesce(sum(x.n), 0)
      INTO v_dispatched, v_dispatched_n
      FROM (SELECT ql_private.epoch_ms(date_trunc('minute', l.claimed_at))::text AS minute,
                   count(*) AS n
              FROM (SELECT ll.claimed_at FROM ql_private.run_leases ll
                     WHERE ll.claimed_at >= v_from
                     ORDER BY ll.claimed_at
                     LIMIT v_cap + 1) l
             GROUP BY 1) x;

    SELECT coalesce(jsonb_object_agg(x.minute, x.counts), '{}'::jsonb), coalesce(sum(x.n), 0)
      INTO v_finished, v_finished_n
      FROM (SELECT ql_private.epoch_ms(date_trunc('minute', r.finished_at))::text AS minute,
                   jsonb_build_object(
                       'succeeded', count(*) FILTER (WHERE r.state = 'succeeded'),
                       'failed', count(*) FILTER (WHERE r.state = 'failed')) AS counts,
                   count(*) AS n
              FROM (SELECT rr.finished_at, rr.state FROM ql_private.runs rr
                     WHERE rr.state IN ('succeeded', 'failed', 'cancelled')
                       AND rr.finished_at >= v_from
                     ORDER BY rr.finished_at
                     LIMIT v_cap + 1) r
             GROUP BY 1) x;

    SELECT jsonb_agg(jsonb_build_object(
               'minuteMs', m.ms,
               'dispatched', least(coalesce((v_dispatched ->> m.ms::text)::bigint, 0), v_cap),
               'succeeded', coalesce((v_finished -> m.ms::text ->> 'succeeded')::bigint, 0),
               'failed', coalesce((v_finished -> m.ms::text ->> 'failed')::bigint, 0))
               ORDER BY m.ms)
      INTO v_minutes
      FROM (SELECT ql_private.epoch_ms(v_from + g * interval '1 minute') AS ms
              FROM generate_series(0, p_minutes - 1) g) m;

    RETURN jsonb_build_object(
        'minutes', v_minutes,
        'fromMs', ql_private.epoch_ms(v_from),
        'capped', jsonb_build_object('dispatched', v_dispatched_n > v_cap,
                                     'finished', v_finished_n > v_cap),
        'cap', v_cap);
END
$$;
REVOKE ALL ON FUNCTION ql.throughput(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.throughput(integer) TO ql_readonly, ql_runtime;
COMMENT ON FUNCTION ql.throughput(integer) IS
'Throughput per minute for the console chart (SPEC 10): {minutes: [{minuteMs, dispatched, succeeded, failed}], fromMs, capped: {dispatched, finished}, cap}; dispatched = leases claimed (run_leases_claimed), succeeded/failed = terminal runs by finished_at (runs_terminal_finished); each series reads at most 100000 rows. Inputs: p_minutes 1..60 (default 15). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 minutes. Caller: ql_readonly, ql_runtime.';
