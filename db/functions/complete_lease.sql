-- ql.complete_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                   p_generation, p_offer_id, p_token_digest, p_lease_version,
--                   p_outcome,
--                   p_exit_code DEFAULT NULL, p_reason DEFAULT NULL,
--                   p_result DEFAULT NULL) -> jsonb
--
-- Purpose: the completion of a STARTED lease (SPEC §5 /v1/leases/complete, §7),
--   one atomic transaction fenced by offer id + token digest +
--   worker/session/generation + the lease version the worker last saw
--   (ql_private.lease_open; a lease past expires_at belongs to the sweeper and
--   answers lease_expired). Attempt starting|running:
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
--   The completion bumps lease_version by one like every other change (SPEC §7:
--   the answer carries version + 1), so its repetition is recognized by version.
--   The optional result (SPEC §9.3: {exitCode?, durationMs, outputTail,
--   outputBytes}, ql_private.validate_result) is stored on the attempt with the
--   completion (attempts.result); ql.show_run shows it.
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
--   p_token_digest (SHA-256 of the lease token), p_lease_version (the version
--   of the last lease@v1 the worker received, >= 1), p_outcome (succeeded | failed |
--   cancelled), p_exit_code (0 or NULL with succeeded), p_reason (a reason code;
--   not with succeeded), p_result (NULL or the result object; checked before
--   anything else is read, so a bad one never reaches the lease).
-- Fences (ql_private.lease_prelude, which also answers replays and conflicts):
--   the credential (ql_private.authenticate, action `lease.complete`), then
--   ql_private.lease_open (offer, worker, constant-time token digest,
--   session/generation, live unexpired lease, attempt, revision, lease version).
-- Returns {"status":"ok","lease":<lease@v1 projection>} |
--   {"status":"idempotent","lease":…} for an exact replay: p_lease_version is
--   the version the completion consumed (current - 1) and the lease was
--   released by a completion with the same outcome, exit code, reason and
--   result (writes nothing; answers the current lease, what the lost answer
--   carried) | {"status":"conflict","category":…} (lease_verdict categories; a
--   different completion of an already completed lease, or one at another
--   version, is `lease_terminal`; a live lease at another version is
--   `stale_lease_version`) | the denial envelope.
-- Writes: lease (released), attempt, run or the retry policy's writes, one event;
--   nothing for a replay, a conflict or an illegal transition; one
--   security_audit row when denied.
-- Locks: an unlocked first read answers replays, conflicts and QL020 without a
--   lock; a change locks attempt, run and lease in the order of
--   ql_private.lease_prelude / lease_open (`attempt_run_lease`, the order of claims and
--   ql.cancel_run) and re-checks.
-- Idempotency: exact replay as above (the worker journals the completion with
--   its result before the first send, so its repetition carries the same bytes).
-- Errors: QL001 malformed ids/digest, generation NULL or < 1, lease version NULL
--   or < 1, unknown outcome,
--   malformed reason, a reason with outcome succeeded, or succeeded with a
--   non-zero exit code, a malformed result (COLUMN 'result'); QL020 the lease is not started (complete before the
--   starting ACK), or outcome cancelled without a cancel request — nothing is
--   written.
-- Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
--   so a plan a pooled connection made while the lease tables were small (a
--   sequential scan of run_leases) does not stay with it as they grow.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.complete_lease(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_lease_version bigint,
    p_outcome text,
    p_exit_code integer DEFAULT NULL,
    p_reason text DEFAULT NULL,
    p_result jsonb DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_reason text := ql_private.require_reason(p_reason, 'reason');
    v_result jsonb := ql_private.validate_result(p_result);
    v_release text;
    v_state record;
    v_lease ql_private.run_leases;
    v_attempt ql_private.attempts;
    v_run ql_private.runs;
    v_now timestamptz;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'outcome must be succeeded, failed or cancelled';
    END IF;
    IF p_outcome = 'succeeded' AND v_reason IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'reason is not accepted with succeeded';
    END IF;
    IF p_outcome = 'succeeded' AND p_exit_code IS NOT NULL AND p_exit_code <> 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'a succeeded outcome cannot carry a non-zero exit code';
    END IF;
    v_reason := CASE p_outcome WHEN 'failed' THEN coalesce(v_reason, 'failed')
                               WHEN 'cancelled' THEN coalesce(v_reason, 'cancelled') END;
    v_release := CASE p_outcome WHEN 'cancelled' THEN 'cancelled' ELSE 'completed' END;

    -- Pass 1 authenticates and decides on an unlocked read; pass 2 (only when a
    -- change is due) locks the rows it changes and decides again on them
    -- (ql_private.lease_prelude). A replay is the completion that made the
    -- current version, the same one only if it stored exactly what this request
    -- asks for (else lease_terminal).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_prelude(
            p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
            v_offer_id, v_token_digest, p_lease_version, 'lease.complete', 'complete',
            CASE v_pass WHEN 2 THEN 'attempt_run_lease' END, v_lease,
            p_outcome => p_outcome, p_exit_code => p_exit_code, p_reason => v_reason,
            p_result => v_result);
        IF v_state.answer IS NOT NULL THEN
            RETURN v_state.answer;
        END IF;
        v_lease := v_state.lease;
        v_attempt := v_state.attempt;
        v_run := v_state.run;
        IF v_lease.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: completion before the starting ACK';
        END IF;
        IF p_outcome = 'cancelled' AND NOT v_run.cancel_requested THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: outcome cancelled without a cancel request';
        END IF;
    END LOOP;

    v_now := clock_timestamp();
    UPDATE ql_private.run_leases rl
       SET released_at = v_now, release_reason = v_release,
           lease_version = rl.lease_version + 1, updated_at = v_now
     WHERE rl.id = v_lease.id
    RETURNING rl.* INTO v_lease;
    UPDATE ql_private.attempts aa
       SET state = p_outcome, exit_code = p_exit_code, reason = v_reason, updated_at = v_now,
           finished_at = v_now, result = v_result
     WHERE aa.id = v_attempt.id;
    IF p_outcome = 'failed' THEN
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('attempt.failed', v_lease.run_id, v_attempt.id,
                jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
            'offerId', v_lease.offer_id, 'leaseGeneration', v_lease.lease_generation,
            'phase', 'run', 'exitCode', p_exit_code, 'reason', v_reason)));
        PERFORM ql_private.apply_retry(v_lease.run_id, v_attempt.id, v_reason);
        -- The retry policy may have changed the run: answer the rows as stored.
        RETURN jsonb_build_object('status', 'ok',
                                  'lease', ql_private.lease_projection(v_lease.id));
    END IF;
    UPDATE ql_private.runs rr
       SET state = p_outcome, finished_at = v_now, updated_at = v_now
     WHERE rr.id = v_lease.run_id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.' || p_outcome, v_lease.run_id, v_attempt.id,
            jsonb_strip_nulls(jsonb_build_object(
        'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
        'offerId', v_lease.offer_id, 'leaseGeneration', v_lease.lease_generation,
        'exitCode', p_exit_code, 'reason', v_reason)));
    -- The lease as just released, its attempt in the outcome it was moved to,
    -- the run's cancel flag as read under its lock (nothing else can change it
    -- before this commits): the lease_projection answer without reading again.
    RETURN jsonb_build_object('status', 'ok', 'lease',
        ql_private.lease_answer(v_lease, p_outcome, v_run.cancel_requested));
END
$$;
REVOKE ALL ON FUNCTION ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, bigint, text, integer, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, bigint, text, integer, text, jsonb) TO ql_worker_ingress;
