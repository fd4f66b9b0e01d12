-- ql.ack_lease(credential_id, secret_digest, worker_id, session_id, generation,
--              offer_id, token_digest, phase, reason DEFAULT NULL) -> jsonb
--
-- Purpose: the lease ACKs of SPEC §5 /v1/leases/ack and §7, each one atomic
--   transaction fenced by offer id + token digest + worker/session/generation
--   (the lease row fixes lease generation; every change bumps lease_version):
--   * starting      unstarted, unexpired live lease, attempt claimed ->
--                   lease started_at = now, expires_at = now + tasks.lease_ttl_seconds,
--                   lease_version + 1; attempt -> starting; run -> starting;
--                   one `run.starting` event.
--   * running       started lease, attempt starting -> attempt running, run
--                   running, lease_version + 1; one `run.running` event.
--   * start_failed  unstarted or starting (not running) -> attempt failed with
--                   reason (default `start_failed`), finished_at; lease released
--                   `start_failed` (release does not bump lease_version); one
--                   `attempt.failed` event; then ql_private.apply_retry (one of
--                   `run.retry_scheduled` / `run.failed` / `run.cancelled`).
-- Returns {"status":"ok","lease":<lease@v1 projection>} after a change,
--   {"status":"idempotent","lease":…} for an exact replay (writes nothing):
--   starting again while the attempt is starting, running again while running,
--   start_failed again with the same reason after the lease was released by it;
--   {"status":"conflict","category":…} (ql_private.lease_fence: offer_foreign —
--   also for an unknown offer id, token_mismatch, session_replaced,
--   lease_expired, lease_terminal, attempt_changed, revision_drift);
--   or the denial envelope (ql_private.authenticate, action `lease.ack`).
-- Caller: ql_worker_ingress.
-- Locks: a first unlocked read answers replays, conflicts and illegal
--   transitions without any lock or write. A change then locks, in the order of
--   claims and ql.cancel_run (so none of them can deadlock with it): the attempt
--   FOR UPDATE, the run FOR NO KEY UPDATE, the lease FOR UPDATE, and re-checks
--   every fence on the locked rows by clock_timestamp(). The sweeper never waits
--   for these locks (SKIP LOCKED); a lease it already holds is seen released.
-- Idempotency: exact replay as above; anything else is a conflict or QL020.
-- SQLSTATEs: QL001 malformed ids/digest, generation NULL or < 1, unknown phase,
--   malformed reason, or a reason with phase starting/running;
--   QL020 illegal transition (running before starting, starting after running,
--   start_failed after running) — nothing is written.
CREATE OR REPLACE FUNCTION ql.ack_lease(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    session_id text,
    generation bigint,
    offer_id text,
    token_digest bytea,
    phase text,
    reason text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid := ql_private.parse_uuid(ack_lease.worker_id, 'workerId');
    sid uuid := ql_private.parse_uuid(ack_lease.session_id, 'sessionId');
    oid_ uuid := ql_private.parse_uuid(ack_lease.offer_id, 'offerId');
    tok bytea := ql_private.require_digest(ack_lease.token_digest, 'tokenDigest');
    gen bigint := ack_lease.generation;
    v_phase text := ack_lease.phase;
    v_reason text := ql_private.require_reason(ack_lease.reason, 'reason');
    denied jsonb;
    v record;
    category text;
    l ql_private.run_leases;
    a ql_private.attempts;
    ttl integer;
    now_ts timestamptz;
BEGIN
    IF gen IS NULL OR gen < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF v_phase IS NULL OR v_phase NOT IN ('starting', 'running', 'start_failed') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'phase must be starting, running or start_failed';
    END IF;
    IF v_phase <> 'start_failed' AND v_reason IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'reason is only accepted with start_failed';
    END IF;
    v_reason := CASE WHEN v_phase = 'start_failed' THEN coalesce(v_reason, 'start_failed') END;

    denied := ql_private.authenticate(ack_lease.credential_id, ack_lease.secret_digest, wid,
                                      'lease.ack');
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
        category := v.category;
        IF category = 'lease_terminal' THEN
            IF v_phase = 'start_failed' AND l.release_reason = 'start_failed'
               AND a.state = 'failed' AND a.reason IS NOT DISTINCT FROM v_reason THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(l.id));
            END IF;
            RETURN jsonb_build_object('status', 'conflict', 'category', category);
        ELSIF category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', category);
        END IF;

        -- Live, unexpired, fenced: claimed and unstarted, or started and starting|running.
        IF v_phase = 'starting' AND l.started_at IS NOT NULL THEN
            IF a.state = 'starting' THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(l.id));
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = format('illegal_transition: starting ACK while the attempt is %s', a.state);
        ELSIF v_phase = 'running' AND l.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: running ACK before the starting ACK';
        ELSIF v_phase = 'running' AND a.state = 'running' THEN
            RETURN jsonb_build_object('status', 'idempotent',
                                      'lease', ql_private.lease_projection(l.id));
        ELSIF v_phase = 'start_failed' AND a.state = 'running' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: start_failed after running (complete as failed)';
        END IF;
    END LOOP;

    now_ts := clock_timestamp();
    IF v_phase = 'starting' THEN
        SELECT t.lease_ttl_seconds INTO ttl
          FROM ql_private.runs rr JOIN ql_private.tasks t ON t.id = rr.task_id
         WHERE rr.id = l.run_id;
        UPDATE ql_private.run_leases rl
           SET started_at = now_ts, expires_at = now_ts + make_interval(secs => ttl),
               lease_version = rl.lease_version + 1, updated_at = now_ts
         WHERE rl.id = l.id;
        UPDATE ql_private.attempts aa SET state = 'starting', updated_at = now_ts
         WHERE aa.id = a.id;
        UPDATE ql_private.runs rr SET state = 'starting', updated_at = now_ts
         WHERE rr.id = l.run_id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.starting', l.run_id, a.id, jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
            'workerId', l.worker_id, 'sessionId', l.session_id,
            'sessionGeneration', l.session_generation, 'leaseGeneration', l.lease_generation));
    ELSIF v_phase = 'running' THEN
        UPDATE ql_private.run_leases rl
           SET lease_version = rl.lease_version + 1, updated_at = now_ts
         WHERE rl.id = l.id;
        UPDATE ql_private.attempts aa SET state = 'running', updated_at = now_ts
         WHERE aa.id = a.id;
        UPDATE ql_private.runs rr SET state = 'running', updated_at = now_ts
         WHERE rr.id = l.run_id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.running', l.run_id, a.id, jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
            'leaseGeneration', l.lease_generation));
    ELSE
        UPDATE ql_private.run_leases rl
           SET released_at = now_ts, release_reason = 'start_failed', updated_at = now_ts
         WHERE rl.id = l.id;
        UPDATE ql_private.attempts aa
           SET state = 'failed', reason = v_reason, updated_at = now_ts, finished_at = now_ts
         WHERE aa.id = a.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('attempt.failed', l.run_id, a.id, jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'offerId', l.offer_id,
            'leaseGeneration', l.lease_generation, 'phase', 'start', 'reason', v_reason));
        PERFORM ql_private.apply_retry(l.run_id, a.id, v_reason);
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'lease', ql_private.lease_projection(l.id));
END
$$;
REVOKE ALL ON FUNCTION ql.ack_lease(text, bytea, text, text, bigint, text, bytea, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.ack_lease(text, bytea, text, text, bigint, text, bytea, text, text)
    TO ql_worker_ingress;
COMMENT ON FUNCTION ql.ack_lease(text, bytea, text, text, bigint, text, bytea, text, text) IS
'Lease ACK (SPEC 7), one fenced transaction: starting (unstarted unexpired lease: started_at, expires_at = now + task lease TTL, version+1, attempt+run starting, run.starting), running (after starting: attempt+run running, version+1, run.running), start_failed (unstarted or starting: attempt failed with reason, lease released start_failed, attempt.failed, retry policy). {status: ok|idempotent, lease: lease@v1} | {status: conflict, category} | denied. Caller: ql_worker_ingress. Locks (changes only): attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE. Exact replays write nothing. QL001 bad input, QL020 illegal transition.';
