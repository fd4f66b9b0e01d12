-- ql.ack_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
--              p_offer_id, p_token_digest, p_lease_version, p_phase,
--              p_reason DEFAULT NULL) -> jsonb
--
-- Purpose: the lease ACKs of SPEC §5 /v1/leases/ack and §7, each one atomic
--   transaction fenced by offer id + token digest + worker/session/generation
--   + the lease version the worker last saw (the lease row fixes lease
--   generation; every change bumps lease_version by one, the release by
--   start_failed included):
--   * starting      unstarted, unexpired live lease, attempt claimed ->
--                   lease started_at = now, expires_at = now + the lease's
--                   TTL pinned at claim (run_leases.lease_ttl_seconds),
--                   lease_version + 1; attempt -> starting; run -> starting;
--                   one `run.starting` event.
--   * running       started lease, attempt starting -> attempt running, run
--                   running, lease_version + 1; one `run.running` event.
--   * start_failed  unstarted or starting (not running) -> attempt failed with
--                   reason (default `start_failed`), finished_at; lease released
--                   `start_failed`, lease_version + 1; one
--                   `attempt.failed` event; then ql_private.apply_retry (one of
--                   `run.retry_scheduled` / `run.failed` / `run.cancelled`).
-- Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
--   p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
--   p_token_digest (SHA-256 of the lease token), p_lease_version (the version
--   of the last lease@v1 the worker received, >= 1), p_phase (starting |
--   running | start_failed), p_reason (a reason code, only with start_failed).
-- Fences (ql_private.lease_prelude, which also answers replays and conflicts):
--   the credential (ql_private.authenticate, action `lease.ack`), then
--   ql_private.lease_open: offer id, worker, constant-time token digest,
--   session/generation, lease live and unexpired, attempt, revision, then the
--   lease version (ql_private.lease_open: the current version applies the ACK).
-- Returns {"status":"ok","lease":<lease@v1 projection>} after a change (its
--   leaseVersion = p_lease_version + 1),
--   {"status":"idempotent","lease":…} for an exact replay (writes nothing): the
--   same ACK repeated after a lost answer, i.e. p_lease_version = current - 1
--   and the current version was made by this phase (start_failed: with the
--   same reason); the answer is the current lease, exactly what was lost;
--   {"status":"conflict","category":…} (ql_private.lease_verdict: offer_foreign —
--   also for an unknown offer id, token_mismatch, session_replaced,
--   lease_expired, lease_terminal, attempt_changed, revision_drift; and
--   stale_lease_version: any other version);
--   or the denial envelope (ql_private.authenticate).
-- Writes: as above (lease, attempt, run, one event, the retry policy's writes);
--   nothing for a replay, a conflict or an illegal transition; one
--   security_audit row when denied.
-- Locks: a first unlocked read answers replays, conflicts and illegal
--   transitions without any lock or write. A change then locks attempt, run and
--   lease in the order of ql_private.lease_prelude / lease_open (`attempt_run_lease`, the order of
--   claims and ql.cancel_run, so none of them can deadlock with it) and re-checks
--   every fence on the locked rows by clock_timestamp(). The sweeper never waits
--   for these locks (SKIP LOCKED); a lease it already holds is seen released.
-- Idempotency: exact replay as above; anything else is a conflict or QL020.
-- Errors: QL001 malformed ids/digest, generation NULL or < 1, lease version
--   NULL or < 1, unknown phase,
--   malformed reason, or a reason with phase starting/running;
--   QL020 illegal transition at the current version (running before starting,
--   starting after starting, start_failed after running) — nothing is written.
-- Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
--   so a plan a pooled connection made while the lease tables were small (a
--   sequential scan of run_leases) does not stay with it as they grow.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.ack_lease(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_lease_version bigint,
    p_phase text,
    p_reason text DEFAULT NULL
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
    IF p_phase IS NULL OR p_phase NOT IN ('starting', 'running', 'start_failed') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'phase must be starting, running or start_failed';
    END IF;
    IF p_phase <> 'start_failed' AND v_reason IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'reason is only accepted with start_failed';
    END IF;
    v_reason := CASE WHEN p_phase = 'start_failed' THEN coalesce(v_reason, 'start_failed') END;

    -- Pass 1 authenticates and decides on an unlocked read; pass 2 (only when a
    -- change is due) locks the rows it changes and decides again on them
    -- (ql_private.lease_prelude). A replay is the ACK that made the current
    -- version; a start failure also with the same reason (another reason is not
    -- the change that was made: lease_terminal).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_prelude(
            p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
            v_offer_id, v_token_digest, p_lease_version, 'lease.ack', p_phase,
            CASE v_pass WHEN 2 THEN 'attempt_run_lease' END, v_lease, p_reason => v_reason);
        IF v_state.answer IS NOT NULL THEN
            RETURN v_state.answer;
        END IF;
        v_lease := v_state.lease;
        v_attempt := v_state.attempt;
        v_run := v_state.run;

        -- Live, unexpired, fenced, current version: claimed and unstarted, or
        -- started and starting|running.
        IF p_phase = 'starting' AND v_lease.started_at IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = format('illegal_transition: starting ACK while the attempt is %s',
                                 v_attempt.state);
        ELSIF p_phase = 'running' AND v_lease.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: running ACK before the starting ACK';
        ELSIF p_phase = 'running' AND v_attempt.state = 'running' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: running ACK while the attempt is running';
        ELSIF p_phase = 'start_failed' AND v_attempt.state = 'running' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: start_failed after running (complete as failed)';
        END IF;
    END LOOP;

    v_now := clock_timestamp();
    IF p_phase = 'starting' THEN
        UPDATE ql_private.run_leases rl
           SET started_at = v_now, expires_at = v_now + make_interval(secs => v_state.ttl),
               lease_version = rl.lease_version + 1, updated_at = v_now
         WHERE rl.id = v_lease.id
        RETURNING rl.* INTO v_lease;
        UPDATE ql_private.attempts aa SET state = 'starting', updated_at = v_now
         WHERE aa.id = v_attempt.id;
        UPDATE ql_private.runs rr SET state = 'starting', updated_at = v_now
         WHERE rr.id = v_lease.run_id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.starting', v_lease.run_id, v_attempt.id, jsonb_build_object(
            'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
            'offerId', v_lease.offer_id, 'workerId', v_lease.worker_id,
            'sessionId', v_lease.session_id, 'sessionGeneration', v_lease.session_generation,
            'leaseGeneration', v_lease.lease_generation));
    ELSIF p_phase = 'running' THEN
        UPDATE ql_private.run_leases rl
           SET lease_version = rl.lease_version + 1, updated_at = v_now
         WHERE rl.id = v_lease.id
        RETURNING rl.* INTO v_lease;
        UPDATE ql_private.attempts aa SET state = 'running', updated_at = v_now
         WHERE aa.id = v_attempt.id;
        UPDATE ql_private.runs rr SET state = 'running', updated_at = v_now
         WHERE rr.id = v_lease.run_id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.running', v_lease.run_id, v_attempt.id, jsonb_build_object(
            'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
            'offerId', v_lease.offer_id, 'leaseGeneration', v_lease.lease_generation));
    ELSE
        UPDATE ql_private.run_leases rl
           SET released_at = v_now, release_reason = 'start_failed',
               lease_version = rl.lease_version + 1, updated_at = v_now
         WHERE rl.id = v_lease.id;
        UPDATE ql_private.attempts aa
           SET state = 'failed', reason = v_reason, updated_at = v_now, finished_at = v_now
         WHERE aa.id = v_attempt.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('attempt.failed', v_lease.run_id, v_attempt.id, jsonb_build_object(
            'attemptId', v_attempt.id, 'attemptNo', v_attempt.attempt_no,
            'offerId', v_lease.offer_id, 'leaseGeneration', v_lease.lease_generation,
            'phase', 'start', 'reason', v_reason));
        PERFORM ql_private.apply_retry(v_lease.run_id, v_attempt.id, v_reason);
        -- The retry policy may have changed the run: answer the rows as stored.
        RETURN jsonb_build_object('status', 'ok',
                                  'lease', ql_private.lease_projection(v_lease.id));
    END IF;
    -- The lease as just updated, its attempt in the phase it was moved to, the
    -- run's cancel flag as read under its lock (nothing else can change it
    -- before this commits): the lease_projection answer without reading again.
    RETURN jsonb_build_object('status', 'ok', 'lease',
        ql_private.lease_answer(v_lease, p_phase, v_run.cancel_requested));
END
$$;
REVOKE ALL ON FUNCTION ql.ack_lease(text, bytea, text, text, bigint, text, bytea, bigint, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.ack_lease(text, bytea, text, text, bigint, text, bytea, bigint, text, text)
    TO ql_worker_ingress;
