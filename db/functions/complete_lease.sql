-- ql.complete_lease(credential_id, secret_digest, worker_id, session_id, generation,
--                   offer_id, token_digest, outcome, exit_code DEFAULT NULL,
--                   reason DEFAULT NULL) -> jsonb
--
-- Purpose: the completion of a STARTED lease (SPEC §5 /v1/leases/complete, §7),
--   one atomic transaction fenced by offer id + token digest +
--   worker/session/generation (ql_private.lease_fence; a lease past expires_at
--   belongs to the sweeper and answers lease_expired). Attempt starting|running:
--   * succeeded  attempt succeeded (exit_code, finished_at); run succeeded
--                (finished_at); lease released `completed`; one `run.succeeded`.
--   * failed     attempt failed (exit_code, reason default `failed`); lease
--                released `completed`; one `attempt.failed`; then the retry
--                policy (ql_private.apply_retry): one `run.retry_scheduled` (new
--                attempt, run queued), `run.failed` or — cancel requested —
--                `run.cancelled`.
--   * cancelled  only when the run is cancel-requested (the worker stopped it
--                after learning so from its heartbeat): attempt cancelled
--                (reason default `cancelled`), run cancelled, lease released
--                `cancelled`; one `run.cancelled`.
--   Releasing does not bump lease_version (it counts changes of a live lease).
-- Returns {"status":"ok","lease":<lease@v1 projection>} |
--   {"status":"idempotent","lease":…} for an exact replay: the lease was released
--   by a completion with the same outcome, exit code and reason (writes nothing)
--   | {"status":"conflict","category":…} (lease_fence categories; a different
--   completion of an already completed lease is `lease_terminal`) | the denial
--   envelope (action `lease.complete`).
-- Caller: ql_worker_ingress.
-- Locks: an unlocked first read answers replays, conflicts and QL020 without a
--   lock; a change locks the attempt FOR UPDATE, the run FOR NO KEY UPDATE, then
--   the lease FOR UPDATE (the order of claims and ql.cancel_run) and re-checks.
-- Idempotency: exact replay as above.
-- SQLSTATEs: QL001 malformed ids/digest, generation NULL or < 1, unknown outcome,
--   malformed reason, a reason with outcome succeeded, or succeeded with a
--   non-zero exit code; QL020 the lease is not started (complete before the
--   starting ACK), or outcome cancelled without a cancel request — nothing is
--   written.
CREATE OR REPLACE FUNCTION ql.complete_lease(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    session_id text,
    generation bigint,
    offer_id text,
    token_digest bytea,
    outcome text,
    exit_code integer DEFAULT NULL,
    reason text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid := ql_private.parse_uuid(complete_lease.worker_id, 'workerId');
    sid uuid := ql_private.parse_uuid(complete_lease.session_id, 'sessionId');
    oid_ uuid := ql_private.parse_uuid(complete_lease.offer_id, 'offerId');
    tok bytea := ql_private.require_digest(complete_lease.token_digest, 'tokenDigest');
    gen bigint := complete_lease.generation;
    v_outcome text := complete_lease.outcome;
    v_exit integer := complete_lease.exit_code;
    v_reason text := ql_private.require_reason(complete_lease.reason, 'reason');
    v_release text;
    denied jsonb;
    v record;
    category text;
    l ql_private.run_leases;
    a ql_private.attempts;
    r ql_private.runs;
    now_ts timestamptz;
BEGIN
    IF gen IS NULL OR gen < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF v_outcome IS NULL OR v_outcome NOT IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'outcome must be succeeded, failed or cancelled';
    END IF;
    IF v_outcome = 'succeeded' AND v_reason IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'reason is not accepted with succeeded';
    END IF;
    IF v_outcome = 'succeeded' AND v_exit IS NOT NULL AND v_exit <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'a succeeded outcome cannot carry a non-zero exit code';
    END IF;
    v_reason := CASE v_outcome WHEN 'failed' THEN coalesce(v_reason, 'failed')
                               WHEN 'cancelled' THEN coalesce(v_reason, 'cancelled') END;
    v_release := CASE v_outcome WHEN 'cancelled' THEN 'cancelled' ELSE 'completed' END;

    denied := ql_private.authenticate(complete_lease.credential_id,
                                      complete_lease.secret_digest, wid, 'lease.complete');
    IF denied IS NOT NULL THEN
        RETURN denied;
    END IF;

    -- Pass 1 reads without locks; pass 2 (only when a change is due) locks and
    -- re-reads. Each read is one statement (ql_private.lease_state: one snapshot).
    FOR pass IN 1 .. 2 LOOP
        IF pass = 2 THEN
            PERFORM 1 FROM ql_private.attempts aa WHERE aa.id = l.attempt_id FOR UPDATE;
            PERFORM 1 FROM ql_private.runs rr WHERE rr.id = l.run_id FOR NO KEY UPDATE;
            PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = l.id FOR UPDATE;
        END IF;
        SELECT * INTO v FROM ql_private.lease_state(oid_, wid, sid, gen, tok);
        IF NOT FOUND THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', 'offer_foreign');
        END IF;
        l := v.lease;
        a := v.attempt;
        r := v.run;
        category := v.category;
        IF category = 'lease_terminal' THEN
            IF l.release_reason = v_release AND a.state = v_outcome
               AND a.exit_code IS NOT DISTINCT FROM v_exit
               AND a.reason IS NOT DISTINCT FROM v_reason THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(l.id));
            END IF;
            RETURN jsonb_build_object('status', 'conflict', 'category', category);
        ELSIF category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', category);
        END IF;
        IF l.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: completion before the starting ACK';
        END IF;
        IF v_outcome = 'cancelled' AND NOT r.cancel_requested THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: outcome cancelled without a cancel request';
        END IF;
    END LOOP;

    now_ts := clock_timestamp();
    UPDATE ql_private.run_leases rl
       SET released_at = now_ts, release_reason = v_release, updated_at = now_ts
     WHERE rl.id = l.id;
    UPDATE ql_private.attempts aa
       SET state = v_outcome, exit_code = v_exit, reason = v_reason, updated_at = now_ts,
           finished_at = now_ts
     WHERE aa.id = a.id;
    IF v_outcome = 'failed' THEN
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('attempt.failed', l.run_id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
            'leaseGeneration', l.lease_generation, 'phase', 'run', 'exitCode', v_exit,
            'reason', v_reason)));
        PERFORM ql_private.apply_retry(l.run_id, a.id, v_reason);
    ELSE
        UPDATE ql_private.runs rr
           SET state = v_outcome, finished_at = now_ts, updated_at = now_ts
         WHERE rr.id = l.run_id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.' || v_outcome, l.run_id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
            'leaseGeneration', l.lease_generation, 'exitCode', v_exit, 'reason', v_reason)));
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'lease', ql_private.lease_projection(l.id));
END
$$;
REVOKE ALL ON FUNCTION ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text) IS
'Complete a started, unexpired lease (SPEC 7) in one fenced transaction: succeeded (attempt+run succeeded, run.succeeded), failed (attempt failed, attempt.failed, retry policy: run.retry_scheduled | run.failed | run.cancelled), cancelled (only when cancel requested: attempt+run cancelled, run.cancelled); lease released completed|cancelled. {status: ok|idempotent, lease: lease@v1} | {status: conflict, category} | denied. Caller: ql_worker_ingress. Locks (changes only): attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE. Exact replay writes nothing. QL001 bad input, QL020 not started / cancelled without request.';
