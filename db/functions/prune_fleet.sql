-- ql.prune_fleet(p_retain_s bigint, p_batch integer DEFAULT 1000,
--                p_dry_run boolean DEFAULT false) -> jsonb
--   {sessions, placementClasses, fleetEvents, more}
--
-- Purpose: retention of what the fleet leaves behind (SPEC §9.6, beside
--   ql.prune_runs and ql.prune_audit), one batch of each per call:
--   * worker sessions that ended longer than p_retain_s ago — closed ones by
--     closed_at (worker_sessions_closed, oldest first), and active or draining
--     ones whose session lease lapsed before the cutoff (their worker never came
--     back) — except a session with a live lease (never pruned; the delete
--     guard of migration 0017 refuses it too) and each worker's newest session
--     (its generation is where the next one counts on from, max + 1). Released
--     leases keep the pruned session's id as history;
--   * placement classes (migration 0006) nothing references: no queued run
--     (ready or scheduled, ql_private.waiting_classes), no run in flight
--     (dispatching, starting, running; runs_state_seq), and not the class of a
--     task's current revision (what the next enqueue uses). Unused classes go
--     at once, whatever their age: ql_private.placement_class_of creates a class
--     again on first use (an operator retry of a run whose class went included);
--   * events without a run (`worker.*`, `session.*`) older than the cutoff
--     (events_fleet, oldest first).
--   Callers loop, one transaction per batch, while `more` (a batch was full).
--   With p_dry_run the same batches are only counted: nothing deleted or locked.
-- Inputs: p_retain_s 0..3153600000 seconds (the run retention: `--retain-runs`),
--   p_batch 1..10000 rows of each kind (default 1000), p_dry_run (default false).
-- Fences: a session is picked on its locked row (still ended, still old, no live
--   lease, not its worker's newest); a class is re-checked unreferenced under
--   its lock, with a snapshot taken after the lock.
-- Writes: deletes of the batch's sessions, classes and fleet events; none in a
--   dry run.
-- Locks: sessions and classes FOR UPDATE SKIP LOCKED: a claim (which holds its
--   session row) or an enqueue (which holds its class row FOR KEY SHARE,
--   ql_private.placement_class_of) is skipped, never waited for; a lookup that
--   comes after the lock waits for this batch, finds the class gone and creates
--   it again. Fleet events FOR UPDATE SKIP LOCKED (concurrent pruners split them).
-- Idempotency: deleted rows are gone; the next call takes the next batch.
-- Errors: QL006 p_retain_s out of bounds (COLUMN retainRuns), p_batch out of
--   1..10000 (COLUMN batch); nothing changed on error.
-- Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime (`admin prune`).
CREATE OR REPLACE FUNCTION ql.prune_fleet(
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
    v_dry boolean := coalesce(p_dry_run, false);
    v_cutoff timestamptz;
    v_sessions bigint;
    v_classes bigint;
    v_events bigint;
    v_locked integer[];
    v_keep integer[];
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

    -- 1. Sessions that ended before the cutoff.
    IF v_dry THEN
        SELECT count(*) INTO v_sessions
          FROM (SELECT 1 FROM ql_private.worker_sessions s
                 WHERE ((s.state = 'closed' AND s.closed_at < v_cutoff)
                        OR (s.state IN ('active', 'draining') AND s.expires_at < v_cutoff))
                   AND EXISTS (SELECT 1 FROM ql_private.worker_sessions n
                                WHERE n.worker_id = s.worker_id AND n.generation > s.generation)
                   AND NOT EXISTS (SELECT 1 FROM ql_private.run_leases l
                                    WHERE l.session_id = s.session_id AND l.released_at IS NULL)
                 LIMIT p_batch) x;
    ELSE
        WITH batch AS MATERIALIZED (
            SELECT s.session_id FROM ql_private.worker_sessions s
             WHERE ((s.state = 'closed' AND s.closed_at < v_cutoff)
                    OR (s.state IN ('active', 'draining') AND s.expires_at < v_cutoff))
               AND EXISTS (SELECT 1 FROM ql_private.worker_sessions n
                            WHERE n.worker_id = s.worker_id AND n.generation > s.generation)
               AND NOT EXISTS (SELECT 1 FROM ql_private.run_leases l
                                WHERE l.session_id = s.session_id AND l.released_at IS NULL)
             LIMIT p_batch
               FOR UPDATE OF s SKIP LOCKED
        ), gone AS (
            DELETE FROM ql_private.worker_sessions s USING batch b
             WHERE s.session_id = b.session_id
            RETURNING 1
        )
        SELECT count(*) INTO v_sessions FROM gone;
    END IF;

    -- 2. Placement classes nothing references. The keep set: classes with
    --    queued runs (skip scans), with runs in flight, and those of the tasks'
    --    current revisions.
    v_keep := ARRAY(
        SELECT w.class_id FROM ql_private.waiting_classes('infinity') w(class_id)
        UNION
        SELECT r.placement_class FROM ql_private.runs r
         WHERE r.state IN ('dispatching', 'starting', 'running')
           AND r.placement_class IS NOT NULL
        UNION
        SELECT pc.id FROM ql_private.tasks t
          JOIN ql_private.execution_revisions er ON er.id = t.current_revision_id
          JOIN ql_private.placement_classes pc
            ON pc.required = coalesce(er.placement -> 'required',
                                      '{"executors": ["remote-worker"]}'::jsonb));
    IF v_dry THEN
        SELECT count(*) INTO v_classes
          FROM (SELECT 1 FROM ql_private.placement_classes pc
                 WHERE pc.id <> ALL (v_keep) LIMIT p_batch) x;
    ELSE
        v_locked := ARRAY(
            SELECT pc.id FROM ql_private.placement_classes pc
             WHERE pc.id <> ALL (v_keep)
             ORDER BY pc.id
             LIMIT p_batch
               FOR UPDATE SKIP LOCKED);
        -- Re-checked under the locks, in a statement whose snapshot is newer than
        -- them: runs an enqueue wrote before it released its class are seen.
        WITH gone AS (
            DELETE FROM ql_private.placement_classes pc
             WHERE pc.id = ANY (v_locked)
               AND pc.id NOT IN (
                   SELECT w.class_id FROM ql_private.waiting_classes('infinity') w(class_id)
                   UNION
                   SELECT r.placement_class FROM ql_private.runs r
                    WHERE r.state IN ('dispatching', 'starting', 'running')
                      AND r.placement_class IS NOT NULL
                   UNION
                   SELECT kc.id FROM ql_private.tasks t
                     JOIN ql_private.execution_revisions er ON er.id = t.current_revision_id
                     JOIN ql_private.placement_classes kc
                       ON kc.required = coalesce(er.placement -> 'required',
                                                 '{"executors": ["remote-worker"]}'::jsonb))
            RETURNING 1
        )
        SELECT count(*) INTO v_classes FROM gone;
    END IF;

    -- 3. worker.* / session.* events older than the cutoff.
    IF v_dry THEN
        SELECT count(*) INTO v_events
          FROM (SELECT 1 FROM ql_private.events e
                 WHERE e.run_id IS NULL AND e.created_at < v_cutoff
                   AND (e.type LIKE 'worker.%' OR e.type LIKE 'session.%')
                 ORDER BY e.created_at
                 LIMIT p_batch) x;
    ELSE
        WITH batch AS MATERIALIZED (
            SELECT e.id FROM ql_private.events e
             WHERE e.run_id IS NULL AND e.created_at < v_cutoff
               AND (e.type LIKE 'worker.%' OR e.type LIKE 'session.%')
             ORDER BY e.created_at
             LIMIT p_batch
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM ql_private.events e USING batch b WHERE e.id = b.id
            RETURNING 1
        )
        SELECT count(*) INTO v_events FROM gone;
    END IF;

    RETURN jsonb_build_object(
        'sessions', v_sessions, 'placementClasses', v_classes, 'fleetEvents', v_events,
        'more', v_sessions >= p_batch OR v_classes >= p_batch OR v_events >= p_batch);
END
$$;
REVOKE ALL ON FUNCTION ql.prune_fleet(bigint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.prune_fleet(bigint, integer, boolean) TO ql_runtime, ql_sweeper;
