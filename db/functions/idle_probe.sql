-- ql.idle_probe() -> jsonb
--
-- Purpose: the database answer an ingress replica forms its idle view from
--   (service/idle_view.py). In ONE statement (one snapshot):
--     * the head of the candidate keyset (runs_candidate_keyset, at most 65
--       ready queued runs in key order, each probed for its current attempt by
--       primary key): is any of them dispatchable now (attempt claimed,
--       remote_worker, not_before passed), and the earliest future not_before
--       among them (the time-based wake-up: no NOTIFY marks a backoff ending);
--     * the scheduled runs (runs_due, SPEC §9.2: delayed enqueues and retries in
--       backoff): one index probe for a run already due (a candidate until the
--       sweeper promotes it), one for the earliest future due_at — the wake-up
--       the idle view sleeps until, however many runs are scheduled;
--     * whether any live unstarted lease exists (run_leases_unstarted_expiry):
--       a worker whose pull response was lost replays its offer id and must get
--       that offer back (SPEC 3.3 recover-first), and expired unstarted offers
--       are candidates too, so while one exists no pull may be answered idle
--       without the database.
--   Returns {"idle": bool, "reason": null|"candidate"|"unstarted_lease"|
--   "truncated", "nowMs": db clock, "wakeAtMs": earliest future not_before of
--   the head or due_at of a scheduled run, or null}. idle=true iff no queued run
--   of the head is dispatchable, no scheduled run is due, the head is
--   not truncated (more than 64 queued runs: too many to prove idle in bounded
--   time, so the answer is "not idle" and pulls go to the database), and no live
--   unstarted lease exists.
-- Inputs: none.
-- Fences: none (it answers for every worker of the replica at once).
-- Cost: bounded (<= 65 index entries + 65 primary-key probes + three partial
--   index probes), independent of queue depth, scheduled runs and history.
-- Writes: none (read-only: zero WAL).
-- Locks: none.
-- Idempotency: read-only.
-- Errors: none.
-- Caller: ql_worker_ingress (the replica's idle view, a few calls a second per
--   replica).
CREATE OR REPLACE FUNCTION ql.idle_probe()
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_head_limit constant integer := 64;
    v_now timestamptz := clock_timestamp();
    v_head integer;
    v_dispatchable boolean;
    v_wake timestamptz;
    v_unstarted boolean;
BEGIN
    WITH head AS MATERIALIZED (
        SELECT r.current_attempt_id
          FROM ql_private.runs r
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NULL
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT v_head_limit + 1
    ), att AS MATERIALIZED (
        SELECT a.not_before
          FROM head h
         CROSS JOIN LATERAL (
               SELECT aa.not_before FROM ql_private.attempts aa
                WHERE aa.id = h.current_attempt_id AND aa.state = 'claimed'
                  AND aa.executor = 'remote_worker'
                LIMIT 1) a
    )
    SELECT (SELECT count(*) FROM head)::integer,
           EXISTS (SELECT 1 FROM att WHERE att.not_before <= v_now)
           OR EXISTS (SELECT 1 FROM ql_private.runs d
                       WHERE d.state = 'queued' AND d.runtime_owned AND NOT d.cancel_requested
                         AND d.due_at IS NOT NULL AND d.due_at <= v_now),
           least((SELECT min(att.not_before) FROM att WHERE att.not_before > v_now),
                 (SELECT min(d.due_at) FROM ql_private.runs d
                   WHERE d.state = 'queued' AND d.runtime_owned AND NOT d.cancel_requested
                     AND d.due_at IS NOT NULL AND d.due_at > v_now)),
           EXISTS (SELECT 1 FROM ql_private.run_leases l
                    WHERE l.released_at IS NULL AND l.started_at IS NULL)
      INTO v_head, v_dispatchable, v_wake, v_unstarted;
    RETURN jsonb_build_object(
        'idle', NOT v_dispatchable AND v_head <= v_head_limit AND NOT v_unstarted,
        'reason', CASE WHEN v_dispatchable THEN 'candidate'
                       WHEN v_head > v_head_limit THEN 'truncated'
                       WHEN v_unstarted THEN 'unstarted_lease' END,
        'nowMs', ql_private.epoch_ms(v_now),
        'wakeAtMs', CASE WHEN v_wake IS NOT NULL THEN ql_private.epoch_ms(v_wake) END);
END
$$;
REVOKE ALL ON FUNCTION ql.idle_probe() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.idle_probe() TO ql_worker_ingress;
