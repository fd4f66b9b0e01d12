-- ql.sweep_leases(batch integer DEFAULT 500) -> jsonb
--
-- Purpose: lease expiry (SPEC §7), one bounded batch per call, stateless and
--   safe on every replica at once. Takes up to `batch` live leases whose
--   expires_at <= clock_timestamp() (index run_leases_live_expiry, oldest first)
--   with FOR UPDATE SKIP LOCKED, so concurrent sweepers split the work and never
--   wait for each other or for a worker's call; the row lock re-checks the
--   expiry on the newest row version, so a lease a heartbeat just extended is
--   not taken. For each lease it then locks the attempt (FOR UPDATE SKIP LOCKED)
--   and the run (FOR NO KEY UPDATE SKIP LOCKED); when either is busy (a claim,
--   an ACK or a cancel holds it) the lease is left for the next pass (`skipped`).
--   The sweeper never waits for a lock, so it cannot take part in a deadlock.
--   * unstarted (never ACKed): lease released `expired`; the attempt stays
--     `claimed`; a `dispatching` run goes back to `queued` (decision: the run
--     state says "an offer is outstanding" only while one is; the run is a
--     candidate either way, and a later claim takes lease_generation + 1). No
--     event (a claim superseding an expired offer writes none either). A
--     cancel-requested run (not reachable through ql.cancel_run, handled for
--     safety) is cancelled instead: attempt + run cancelled, `run.cancelled`.
--   * started: attempt -> `lost` (reason `lease_expired`, finished_at), lease
--     released `lost`, one `attempt.lost` event, then ql_private.apply_retry:
--     a new attempt (`run.retry_scheduled`), `run.failed` when attempts are
--     exhausted, or `run.cancelled` when the run is cancel-requested.
-- Returns {"expired", "lost", "retried", "failed", "cancelled", "skipped",
--   "more"}: counts of this batch; `more` = the batch was full (call again now).
-- Caller: ql_runtime (`qinglong runtime sweep`).
-- Idempotency: a released lease is never taken again; each lost attempt is
--   retried at most once (attempt lock + UNIQUE (run_id, attempt_no)).
-- SQLSTATEs: QL001 batch NULL or < 1; QL002 batch > 5000.
CREATE OR REPLACE FUNCTION ql.sweep_leases(batch integer DEFAULT 500)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_batch constant integer := 5000;
    n integer := sweep_leases.batch;
    cutoff timestamptz;
    now_ts timestamptz;
    l ql_private.run_leases;
    a ql_private.attempts;
    r ql_private.runs;
    outcome text;
    found_n integer := 0;
    expired_n integer := 0;
    lost_n integer := 0;
    retried_n integer := 0;
    failed_n integer := 0;
    cancelled_n integer := 0;
    skipped_n integer := 0;
BEGIN
    IF n IS NULL OR n < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'batch must be >= 1';
    END IF;
    IF n > max_batch THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = format('batch must be <= %s', max_batch);
    END IF;
    -- A plain value (not clock_timestamp() in the query) so the partial index
    -- bounds the scan; the lock re-check compares newer row versions with it.
    cutoff := clock_timestamp();
    FOR l IN
        SELECT * FROM ql_private.run_leases rl
         WHERE rl.released_at IS NULL AND rl.expires_at <= cutoff
         ORDER BY rl.expires_at
         LIMIT n
           FOR UPDATE SKIP LOCKED
    LOOP
        found_n := found_n + 1;
        SELECT * INTO a FROM ql_private.attempts aa WHERE aa.id = l.attempt_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            skipped_n := skipped_n + 1;
            CONTINUE;
        END IF;
        SELECT * INTO r FROM ql_private.runs rr WHERE rr.id = l.run_id
           FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            skipped_n := skipped_n + 1;
            CONTINUE;
        END IF;
        now_ts := clock_timestamp();

        IF l.started_at IS NULL THEN
            UPDATE ql_private.run_leases rl
               SET released_at = now_ts, release_reason = 'expired', updated_at = now_ts
             WHERE rl.id = l.id;
            expired_n := expired_n + 1;
            IF r.current_attempt_id = a.id AND a.state = 'claimed'
               AND r.state IN ('queued', 'dispatching') THEN
                IF r.cancel_requested THEN
                    UPDATE ql_private.attempts aa
                       SET state = 'cancelled', reason = 'cancelled', updated_at = now_ts,
                           finished_at = now_ts
                     WHERE aa.id = a.id;
                    UPDATE ql_private.runs rr
                       SET state = 'cancelled', finished_at = now_ts, updated_at = now_ts
                     WHERE rr.id = r.id;
                    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
                    VALUES ('run.cancelled', r.id, a.id, jsonb_build_object(
                        'attemptId', a.id, 'offerId', l.offer_id, 'reason', 'lease_expired'));
                    cancelled_n := cancelled_n + 1;
                ELSIF r.state = 'dispatching' THEN
                    UPDATE ql_private.runs rr SET state = 'queued', updated_at = now_ts
                     WHERE rr.id = r.id;
                END IF;
            END IF;
        ELSE
            UPDATE ql_private.run_leases rl
               SET released_at = now_ts, release_reason = 'lost', updated_at = now_ts
             WHERE rl.id = l.id;
            IF a.state IN ('starting', 'running') THEN
                UPDATE ql_private.attempts aa
                   SET state = 'lost', reason = 'lease_expired', updated_at = now_ts,
                       finished_at = now_ts
                 WHERE aa.id = a.id;
                INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
                VALUES ('attempt.lost', l.run_id, a.id, jsonb_build_object(
                    'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
                    'workerId', l.worker_id, 'sessionId', l.session_id,
                    'leaseGeneration', l.lease_generation, 'leaseVersion', l.lease_version,
                    'reason', 'lease_expired'));
                lost_n := lost_n + 1;
                IF r.current_attempt_id = a.id
                   AND r.state NOT IN ('succeeded', 'failed', 'cancelled') THEN
                    outcome := ql_private.apply_retry(r.id, a.id, 'lease_expired');
                    IF outcome = 'retried' THEN
                        retried_n := retried_n + 1;
                    ELSIF outcome = 'failed' THEN
                        failed_n := failed_n + 1;
                    ELSE
                        cancelled_n := cancelled_n + 1;
                    END IF;
                END IF;
            END IF;
        END IF;
    END LOOP;
    RETURN jsonb_build_object(
        'expired', expired_n, 'lost', lost_n, 'retried', retried_n, 'failed', failed_n,
        'cancelled', cancelled_n, 'skipped', skipped_n,
        'more', found_n >= n AND found_n > skipped_n);
END
$$;
REVOKE ALL ON FUNCTION ql.sweep_leases(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.sweep_leases(integer) TO ql_runtime;
COMMENT ON FUNCTION ql.sweep_leases(integer) IS
'Lease expiry, one bounded batch (1..5000, default 500) of live leases past expires_at, FOR UPDATE SKIP LOCKED (attempt/run locks SKIP LOCKED too: never waits, safe on many replicas). Unstarted: released expired, run dispatching -> queued (attempt stays claimed). Started: attempt lost, lease released lost, attempt.lost, retry policy (run.retry_scheduled | run.failed | run.cancelled when cancel requested). Returns {expired, lost, retried, failed, cancelled, skipped, more}. Caller: ql_runtime. QL001 batch < 1, QL002 batch > 5000.';
