-- ql.prune_runs(p_retain_s bigint, p_batch integer DEFAULT 1000,
--               p_dry_run boolean DEFAULT false) -> jsonb
--   {runs, attempts, leases, events, more}
--
-- Purpose: retention of run history (SPEC §9.6), one batch per call: terminal
--   runs (succeeded, failed, cancelled) whose finished_at is older than now -
--   p_retain_s, oldest first, are deleted with their attempts, leases and
--   events; an idempotency key goes with its run row (its task may reuse it
--   afterwards). Live runs (queued, dispatching, starting, running) are never
--   touched, nor terminal runs without finished_at. Callers loop, one
--   transaction per batch, while `more` (the batch was full), so no
--   transaction is long (`qinglong runtime sweep --retain-runs`, `admin
--   prune`). With p_dry_run the same batch is only counted: nothing is deleted
--   and nothing locked.
-- Cost: index-driven: runs_terminal_finished (finished_at) over terminal runs
--   picks the batch; attempts by (run_id, attempt_no), leases by (attempt_id,
--   lease_generation), events by events_run (run_id, id). One statement deletes
--   all four sets (no foreign-key check needs a table scan: 0010).
-- Inputs: p_retain_s 0..3153600000 seconds (0 = everything terminal; the
--   upper bound, 100 years, keeps the interval arithmetic in range), p_batch
--   1..10000 runs (default 1000), p_dry_run (default false).
-- Fences: each run is picked on its locked row (still terminal, still old, no
--   attempt of it left unlocked).
-- Writes: deletes of the batch's runs, attempts, leases, events; none in a dry run.
-- Locks: in the one lifecycle order attempt -> run -> lease (docs/LIFECYCLE.md
--   "Locks"): every attempt of the batch's runs FOR UPDATE SKIP LOCKED, then
--   the runs FOR UPDATE SKIP LOCKED — a run any of whose attempts another
--   transaction holds (a retry, a cancel, a completion, each of which locks the
--   attempt and then waits for the run) is left for a later batch — then the
--   leases by the delete (a heartbeat holding one waits for nothing prune
--   holds). So pruning never waits on a claim or any writer of attempts or
--   runs, cannot close a deadlock with ql.retry_run / ql.cancel_run, and
--   concurrent pruners split the work. `more`: the batch was full before the
--   skips and something was pruned (rows held right now wait for the next
--   pass instead of spinning the caller's loop).
-- Idempotency: a deleted run is gone; the next call takes the next batch.
-- Errors: QL006 p_retain_s out of bounds (COLUMN retainRuns), p_batch out of
--   1..10000 (COLUMN batch); nothing changed on error.
-- Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime (`admin prune`).
CREATE OR REPLACE FUNCTION ql.prune_runs(
    p_retain_s bigint,
    p_batch integer DEFAULT 1000,
    p_dry_run boolean DEFAULT false
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_max_retain_s constant bigint := 3153600000;
    v_max_batch constant integer := 10000;
    v_cutoff timestamptz;
    v_cand uuid[];
    v_locked uuid[];
    v_ids uuid[];
    v_runs bigint := 0;
    v_attempts bigint := 0;
    v_leases bigint := 0;
    v_events bigint := 0;
BEGIN
    IF p_retain_s IS NULL OR p_retain_s NOT BETWEEN 0 AND v_max_retain_s THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retainRuns',
            MESSAGE = format('retainRuns must be between 0 and %s seconds', v_max_retain_s);
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND v_max_batch THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'batch',
            MESSAGE = format('batch must be between 1 and %s', v_max_batch);
    END IF;
    v_cutoff := clock_timestamp() - make_interval(secs => p_retain_s);

    IF coalesce(p_dry_run, false) THEN
        SELECT array_agg(x.id) INTO v_ids
          FROM (SELECT r.id FROM ql_private.runs r
                 WHERE r.state IN ('succeeded', 'failed', 'cancelled')
                   AND r.finished_at < v_cutoff
                 ORDER BY r.finished_at
                 LIMIT p_batch) x;
        v_ids := coalesce(v_ids, '{}');
        SELECT count(*) INTO v_attempts FROM ql_private.attempts a WHERE a.run_id = ANY (v_ids);
        SELECT count(*) INTO v_leases
          FROM ql_private.attempts a
          JOIN ql_private.run_leases l ON l.attempt_id = a.id
         WHERE a.run_id = ANY (v_ids);
        SELECT count(*) INTO v_events FROM ql_private.events e WHERE e.run_id = ANY (v_ids);
        RETURN jsonb_build_object('runs', cardinality(v_ids), 'attempts', v_attempts,
                                  'leases', v_leases, 'events', v_events,
                                  'more', cardinality(v_ids) >= p_batch);
    END IF;

    -- The batch, unlocked; then the lifecycle's lock order (docs/LIFECYCLE.md
    -- "Locks"): every attempt of those runs first, then the runs, both SKIP
    -- LOCKED. A run is pruned only when all its attempts are in hand: a retry,
    -- a cancel or a completion holding one of them (and waiting for the run)
    -- keeps its run out of this batch instead of closing a cycle with it.
    SELECT array_agg(x.id) INTO v_cand
      FROM (SELECT r.id FROM ql_private.runs r
             WHERE r.state IN ('succeeded', 'failed', 'cancelled')
               AND r.finished_at < v_cutoff
             ORDER BY r.finished_at
             LIMIT p_batch) x;
    v_cand := coalesce(v_cand, '{}');
    SELECT array_agg(x.id) INTO v_locked
      FROM (SELECT a.id FROM ql_private.attempts a
             WHERE a.run_id = ANY (v_cand)
               FOR UPDATE SKIP LOCKED) x;
    v_locked := coalesce(v_locked, '{}');
    -- Re-checked on the locked run row (still terminal, still old), and an
    -- attempt added since the lock above (committed by a retry that held the
    -- run's attempt before we looked) keeps the run out too.
    SELECT array_agg(x.id) INTO v_ids
      FROM (SELECT r.id FROM ql_private.runs r
             WHERE r.id = ANY (v_cand)
               AND r.state IN ('succeeded', 'failed', 'cancelled')
               AND r.finished_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM ql_private.attempts a
                                WHERE a.run_id = r.id AND a.id <> ALL (v_locked))
               FOR UPDATE SKIP LOCKED) x;
    v_ids := coalesce(v_ids, '{}');
    IF cardinality(v_ids) > 0 THEN
        WITH batch_attempts AS MATERIALIZED (
            SELECT a.id FROM ql_private.attempts a WHERE a.run_id = ANY (v_ids)
        ), gone_leases AS (
            DELETE FROM ql_private.run_leases l USING batch_attempts ba
             WHERE l.attempt_id = ba.id
            RETURNING 1
        ), gone_events AS (
            DELETE FROM ql_private.events e WHERE e.run_id = ANY (v_ids)
            RETURNING 1
        ), gone_attempts AS (
            DELETE FROM ql_private.attempts a USING batch_attempts ba
             WHERE a.id = ba.id
            RETURNING 1
        ), gone_runs AS (
            DELETE FROM ql_private.runs r WHERE r.id = ANY (v_ids)
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM gone_runs), (SELECT count(*) FROM gone_attempts),
               (SELECT count(*) FROM gone_leases), (SELECT count(*) FROM gone_events)
          INTO v_runs, v_attempts, v_leases, v_events;
    END IF;
    RETURN jsonb_build_object('runs', v_runs, 'attempts', v_attempts, 'leases', v_leases,
                              'events', v_events,
                              'more', cardinality(v_cand) >= p_batch AND v_runs > 0);
END
$$;
REVOKE ALL ON FUNCTION ql.prune_runs(bigint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.prune_runs(bigint, integer, boolean) TO ql_runtime, ql_sweeper;
