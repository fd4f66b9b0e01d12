-- ql.sweep_leases(p_batch integer DEFAULT 500) -> jsonb
--
-- Purpose: lease expiry (SPEC §7), one bounded batch per call, stateless and
--   safe on every replica at once. Takes up to `p_batch` live leases whose
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
--   Then it promotes scheduled runs that came due (SPEC §9.2): up to p_batch
--   queued runs with due_at <= now (index runs_due, oldest due first, FOR NO KEY
--   UPDATE SKIP LOCKED) get due_at := NULL, which puts them into the candidate
--   keysets; until then candidate_page reads them from runs_due (bounded).
-- Inputs: p_batch, 1..5000 leases (and up to as many promotions) per call
--   (default 500).
-- Fences: each lease re-checked on its locked row (still live, still expired);
--   each promoted run on its locked row (still queued, still due).
-- Returns {"expired", "lost", "retried", "failed", "cancelled", "skipped",
--   "promoted", "more"}: counts of this batch; `more` = a batch was full (call
--   again now).
-- Writes: per lease as above (lease, attempt, run, at most one event each, and
--   the retry policy's writes); runs.due_at of the promoted runs (no event).
-- Locks: the leases FOR UPDATE SKIP LOCKED, then per lease its attempt FOR
--   UPDATE SKIP LOCKED and its run FOR NO KEY UPDATE SKIP LOCKED (see above).
--   Lease first is against the lifecycle order attempt -> run -> lease
--   (docs/LIFECYCLE.md "Locks") and allowed only because no lock here is
--   waited for: a function that never waits cannot be part of a deadlock.
-- Idempotency: a released lease is never taken again; each lost attempt is
--   retried at most once (attempt lock + UNIQUE (run_id, attempt_no)).
-- Errors: QL001 batch NULL or < 1; QL002 batch > 5000.
-- Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime.
CREATE OR REPLACE FUNCTION ql.sweep_leases(p_batch integer DEFAULT 500)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max_batch constant integer := 5000;
    v_cutoff timestamptz;
    v_now timestamptz;
    v_lease ql_private.run_leases;
    v_attempt ql_private.attempts;
    v_run ql_private.runs;
    v_outcome text;
    v_found integer := 0;
    v_expired integer := 0;
    v_lost integer := 0;
    v_retried integer := 0;
    v_failed integer := 0;
    v_cancelled integer := 0;
    v_skipped integer := 0;
    v_promoted integer := 0;
BEGIN
    IF p_batch IS NULL OR p_batch < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'batch must be >= 1';
    END IF;
    IF p_batch > v_max_batch THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002',
            MESSAGE = format('batch must be <= %s', v_max_batch);
    END IF;
    -- A plain value (not clock_timestamp() in the query) so the partial index
    -- bounds the scan; the lock re-check compares newer row versions with it.
    v_cutoff := clock_timestamp();
    FOR v_lease IN
        SELECT * FROM ql_private.run_leases rl
         WHERE rl.released_at IS NULL AND rl.expires_at <= v_cutoff
         ORDER BY rl.expires_at
         LIMIT p_batch
           FOR UPDATE SKIP LOCKED
    LOOP
        v_found := v_found + 1;
        SELECT * INTO v_attempt FROM ql_private.attempts aa WHERE aa.id = v_lease.attempt_id
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            v_skipped := v_skipped + 1;
            CONTINUE;
        END IF;
        SELECT * INTO v_run FROM ql_private.runs rr WHERE rr.id = v_lease.run_id
           FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            v_skipped := v_skipped + 1;
            CONTINUE;
        END IF;
        v_now := clock_timestamp();

        IF v_lease.started_at IS NULL THEN
            UPDATE ql_private.run_leases rl
               SET released_at = v_now, release_reason = 'expired', updated_at = v_now
             WHERE rl.id = v_lease.id;
            v_expired := v_expired + 1;
            IF v_run.current_attempt_id = v_attempt.id AND v_attempt.state = 'claimed'
               AND v_run.state IN ('queued', 'dispatching') THEN
                IF v_run.cancel_requested THEN
                    UPDATE ql_private.attempts aa
                       SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
                           finished_at = v_now
                     WHERE aa.id = v_attempt.id;
                    UPDATE ql_private.runs rr
                       SET state = 'cancelled', finished_at = v_now, updated_at = v_now
                     WHERE rr.id = v_run.id;
                    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
                    VALUES ('run.cancelled', v_run.id, v_attempt.id, jsonb_build_object(
                        'attemptId', v_attempt.id, 'offerId', v_lease.offer_id,
                        'reason', 'lease_expired'));
                    v_cancelled := v_cancelled + 1;
                ELSIF v_run.state = 'dispatching' THEN
                    UPDATE ql_private.runs rr SET state = 'queued', updated_at = v_now
                     WHERE rr.id = v_run.id;
                END IF;
            END IF;
        ELSE
            UPDATE ql_private.run_leases rl
               SET released_at = v_now, release_reason = 'lost', updated_at = v_now
             WHERE rl.id = v_lease.id;
            IF v_attempt.state IN ('starting', 'running') THEN
                UPDATE ql_private.attempts aa
                   SET state = 'lost', reason = 'lease_expired', updated_at = v_now,
                       finished_at = v_now
                 WHERE aa.id = v_attempt.id;
                INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
                VALUES ('attempt.lost', v_lease.run_id, v_attempt.id, jsonb_build_object(
                    'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
                    'offerId', v_lease.offer_id, 'workerId', v_lease.worker_id,
                    'sessionId', v_lease.session_id, 'leaseGeneration', v_lease.lease_generation,
                    'leaseVersion', v_lease.lease_version, 'reason', 'lease_expired'));
                v_lost := v_lost + 1;
                IF v_run.current_attempt_id = v_attempt.id
                   AND v_run.state NOT IN ('succeeded', 'failed', 'cancelled') THEN
                    v_outcome := ql_private.apply_retry(v_run.id, v_attempt.id, 'lease_expired');
                    IF v_outcome = 'retried' THEN
                        v_retried := v_retried + 1;
                    ELSIF v_outcome = 'failed' THEN
                        v_failed := v_failed + 1;
                    ELSE
                        v_cancelled := v_cancelled + 1;
                    END IF;
                END IF;
            END IF;
        END IF;
    END LOOP;

    -- Scheduled runs that came due join the candidate keysets (SPEC §9.2): up to
    -- p_batch of them, oldest due first (runs_due), locked SKIP LOCKED so a
    -- claim or a cancel holding one is never waited for (the claim clears
    -- due_at itself; the next pass takes the rest). due_at is in the keysets'
    -- predicate, so the run is in runs_candidate_keyset / runs_class_keyset
    -- from here on; no NOTIFY (the idle view woke up at wakeAtMs already).
    v_now := clock_timestamp();
    WITH due AS (
        SELECT rr.id FROM ql_private.runs rr
         WHERE rr.state = 'queued' AND rr.runtime_owned AND NOT rr.cancel_requested
           AND rr.due_at IS NOT NULL AND rr.due_at <= v_now
         ORDER BY rr.due_at
         LIMIT p_batch
           FOR NO KEY UPDATE SKIP LOCKED
    )
    UPDATE ql_private.runs rr
       SET due_at = NULL
      FROM due
     WHERE rr.id = due.id AND rr.due_at <= v_now;
    GET DIAGNOSTICS v_promoted = ROW_COUNT;

    RETURN jsonb_build_object(
        'expired', v_expired, 'lost', v_lost, 'retried', v_retried, 'failed', v_failed,
        'cancelled', v_cancelled, 'skipped', v_skipped, 'promoted', v_promoted,
        'more', (v_found >= p_batch AND v_found > v_skipped) OR v_promoted >= p_batch);
END
$$;
REVOKE ALL ON FUNCTION ql.sweep_leases(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.sweep_leases(integer) TO ql_runtime, ql_sweeper;
