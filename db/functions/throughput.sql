-- ql.throughput(p_minutes integer DEFAULT 15) -> jsonb
--
-- Purpose: the console's throughput chart (SPEC §10): per minute of the last
--   p_minutes minutes (the current, partial minute last), the runs dispatched
--   (leases claimed: one lease row per dispatch, its claimed_at), succeeded and
--   failed (terminal runs by finished_at): {minutes: [{minuteMs, dispatched,
--   succeeded, failed, estimated}], fromMs, capped: {dispatched, finished},
--   cap}. Every minute of the window is listed, zeros included, so the chart's
--   x axis is fixed.
--   Bounded per minute: each series reads at most `cap` (1000) rows of each
--   minute, oldest first. A minute that holds more is extrapolated from the
--   rate of its first `cap` rows: count = cap x (minute's length, up to now) /
--   (time from the minute's start to its cap-th row); its `estimated` is true
--   and `capped` says which series had such a minute (the page marks the
--   figures ≈). Why: a busy window (100,000+ dispatches in 15 minutes) read
--   whole cost hundreds of milliseconds, past the page's 100 ms; rows read now
--   stay <= 2 x p_minutes x cap however busy the window. The rows of a busy
--   minute are not all-visible yet, so no index-only scan would save the
--   heap visits; reading fewer rows does.
-- Cost: per minute, one range of run_leases_claimed (claimed_at, migration
--   0011) and one of runs_terminal_finished (finished_at, terminal runs), each
--   stopping after cap rows.
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
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_cap constant integer := 1000;
    v_now timestamptz := clock_timestamp();
    v_from timestamptz;
    v_minutes jsonb;
    v_capped jsonb;
BEGIN
    IF p_minutes IS NULL OR p_minutes NOT BETWEEN 1 AND 60 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'minutes',
            MESSAGE = 'minutes must be between 1 and 60';
    END IF;
    v_from := date_trunc('minute', v_now) - (p_minutes - 1) * interval '1 minute';

    WITH minute AS (
        SELECT v_from + g * interval '1 minute' AS starts,
               v_from + (g + 1) * interval '1 minute' AS ends,
               -- the span a full minute's rate is taken over (the current one: up to now)
               extract(epoch FROM least(v_from + (g + 1) * interval '1 minute', v_now)
                                  - (v_from + g * interval '1 minute')) AS span_s
          FROM generate_series(0, p_minutes - 1) g
    ), counted AS (
        SELECT m.starts, m.span_s, d.n AS d_n, d.last_at AS d_last,
               f.n AS f_n, f.succeeded, f.failed, f.last_at AS f_last
          FROM minute m
         CROSS JOIN LATERAL (
               SELECT count(*) AS n, max(l.claimed_at) AS last_at
                 FROM (SELECT ll.claimed_at FROM ql_private.run_leases ll
                        WHERE ll.claimed_at >= m.starts AND ll.claimed_at < m.ends
                        ORDER BY ll.claimed_at
                        LIMIT v_cap) l) d
         CROSS JOIN LATERAL (
               SELECT count(*) AS n, count(*) FILTER (WHERE r.state = 'succeeded') AS succeeded,
                      count(*) FILTER (WHERE r.state = 'failed') AS failed,
                      max(r.finished_at) AS last_at
                 FROM (SELECT rr.finished_at, rr.state FROM ql_private.runs rr
                        WHERE rr.state IN ('succeeded', 'failed', 'cancelled')
                          AND rr.finished_at >= m.starts AND rr.finished_at < m.ends
                        ORDER BY rr.finished_at
                        LIMIT v_cap) r) f
    ), scaled AS (
        -- scale = how many rows the minute holds per row read (1 when not capped)
        SELECT c.*,
               CASE WHEN c.d_n < v_cap THEN 1.0
                    ELSE c.span_s / greatest(extract(epoch FROM c.d_last - c.starts), 0.001)
               END AS d_scale,
               CASE WHEN c.f_n < v_cap THEN 1.0
                    ELSE c.span_s / greatest(extract(epoch FROM c.f_last - c.starts), 0.001)
               END AS f_scale
          FROM counted c
    )
    SELECT jsonb_agg(jsonb_build_object(
               'minuteMs', ql_private.epoch_ms(x.starts),
               'dispatched', round(x.d_n * greatest(x.d_scale, 1.0))::bigint,
               'succeeded', round(x.succeeded * greatest(x.f_scale, 1.0))::bigint,
               'failed', round(x.failed * greatest(x.f_scale, 1.0))::bigint,
               'estimated', x.d_n >= v_cap OR x.f_n >= v_cap)
               ORDER BY x.starts),
           jsonb_build_object('dispatched', bool_or(x.d_n >= v_cap),
                              'finished', bool_or(x.f_n >= v_cap))
      INTO v_minutes, v_capped
      FROM scaled x;

    RETURN jsonb_build_object(
        'minutes', v_minutes,
        'fromMs', ql_private.epoch_ms(v_from),
        'capped', v_capped,
        'cap', v_cap);
END
$$;
REVOKE ALL ON FUNCTION ql.throughput(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.throughput(integer) TO ql_readonly, ql_runtime;
