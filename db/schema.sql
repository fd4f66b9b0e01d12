--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: ql; Type: SCHEMA; Schema: -; Owner: ql_owner
--

CREATE SCHEMA ql;


ALTER SCHEMA ql OWNER TO ql_owner;

--
-- Name: ql_private; Type: SCHEMA; Schema: -; Owner: ql_owner
--

CREATE SCHEMA ql_private;


ALTER SCHEMA ql_private OWNER TO ql_owner;

--
-- Name: ack_lease(text, bytea, text, text, bigint, text, bytea, bigint, text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_reason text := ql_private.require_reason(p_reason, 'reason');
    v_denied jsonb;
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

    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'lease.ack');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    -- Pass 1 decides on an unlocked read; pass 2 (only when a change is due)
    -- locks the rows it changes and decides again on them (ql_private.lease_open).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_open(
            v_offer_id, v_worker_id, v_session_id, p_generation, v_token_digest,
            p_lease_version, p_phase, CASE v_pass WHEN 2 THEN 'attempt_run_lease' END,
            v_lease);
        v_lease := v_state.lease;
        v_attempt := v_state.attempt;
        v_run := v_state.run;
        IF v_state.category = 'replay' THEN
            -- The ACK that made the current version; a start failure also with
            -- the same reason (another reason is not the change that was made).
            IF p_phase <> 'start_failed' OR v_attempt.reason IS NOT DISTINCT FROM v_reason THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(v_lease.id));
            END IF;
            RETURN jsonb_build_object('status', 'conflict', 'category', 'lease_terminal');
        ELSIF v_state.category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', v_state.category);
        END IF;

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


ALTER FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) OWNER TO ql_owner;

--
-- Name: FUNCTION ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) IS 'Lease ACK (SPEC 7), one fenced transaction at the lease version the worker last saw: starting (unstarted unexpired lease: started_at, expires_at = now + the lease TTL pinned at claim, version+1, attempt+run starting, run.starting), running (after starting: attempt+run running, version+1, run.running), start_failed (unstarted or starting: attempt failed with reason, lease released start_failed, version+1, attempt.failed, retry policy). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest, p_lease_version, p_phase, p_reason (start_failed only). Fences: credential (lease.ack), then ql_private.lease_open (offer, worker, token digest, session/generation, live unexpired lease, attempt, revision, lease version). {status: ok|idempotent, lease: lease@v1} | {status: conflict, category (lease_verdict categories, stale_lease_version)} | denied; idempotent = the same ACK repeated after a lost answer (version = current - 1, current made by this phase, same reason). Writes: lease, attempt, run, one event, retry policy; exact replays write nothing. Locks (changes only, ql_private.lease_open attempt_run_lease): attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE. Errors: QL001 bad input (lease version NULL or < 1 included), QL020 illegal transition at the current version. Caller: ql_worker_ingress.';


--
-- Name: append_log(text, bytea, text, text, bigint, text, bytea, bigint, bigint, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_chunk_bytes constant integer := 65536;
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_bytes bytea;
    v_len integer;
    v_denied jsonb;
    v_state record;
    v_lease ql_private.run_leases;
    v_log ql_private.attempt_logs;
    v_stored bigint;
    v_truncated boolean;
    v_overlap integer;
    v_cut integer;
    v_now timestamptz;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    IF p_offset IS NULL OR p_offset < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'offset',
            MESSAGE = 'offset must be an integer >= 0';
    END IF;
    IF p_chunk IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'chunk', MESSAGE = 'chunk is required';
    END IF;
    v_bytes := convert_to(p_chunk, 'UTF8');
    v_len := octet_length(v_bytes);
    IF v_len > v_max_chunk_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'chunk',
            MESSAGE = format('chunk must be at most %s bytes in UTF-8', v_max_chunk_bytes);
    END IF;
    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'lease.log');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    -- Locked and fenced in one go: an append writes whenever it is accepted,
    -- so an unlocked first read would save nothing but on a conflict.
    v_state := ql_private.lease_open(
        v_offer_id, v_worker_id, v_session_id, p_generation, v_token_digest,
        p_lease_version, 'log', 'attempt_lease_share');
    v_lease := v_state.lease;
    IF v_state.category IS NOT NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', v_state.category);
    END IF;
    IF v_lease.started_at IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020',
            MESSAGE = 'illegal_transition: log chunk before the starting ACK';
    END IF;

    SELECT lg.* INTO v_log FROM ql_private.attempt_logs lg
     WHERE lg.attempt_id = v_lease.attempt_id FOR NO KEY UPDATE;
    IF NOT FOUND AND p_offset = 0 AND v_len > 0 THEN
        -- The first append creates the header (a concurrent first append waits
        -- here for this one, then finds and locks the header it made).
        INSERT INTO ql_private.attempt_logs (attempt_id, run_id, limit_bytes)
        VALUES (v_lease.attempt_id, v_lease.run_id, v_lease.log_limit_bytes)
        ON CONFLICT (attempt_id) DO NOTHING;
        SELECT lg.* INTO STRICT v_log FROM ql_private.attempt_logs lg
         WHERE lg.attempt_id = v_lease.attempt_id FOR NO KEY UPDATE;
    END IF;
    v_stored := coalesce(v_log.stored_bytes, 0);
    v_truncated := coalesce(v_log.truncated, false);

    IF p_offset > v_stored THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'log_offset',
                                  'storedBytes', v_stored);
    END IF;
    IF p_offset < v_stored THEN
        v_overlap := least(v_len::bigint, v_stored - p_offset)::integer;
        IF ql_private.log_bytes(v_lease.attempt_id, p_offset, p_offset + v_overlap)
               <> substring(v_bytes FROM 1 FOR v_overlap)
           OR (p_offset + v_len > v_stored AND NOT v_truncated) THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', 'log_offset',
                                      'storedBytes', v_stored);
        END IF;
        RETURN jsonb_build_object('status', 'idempotent', 'storedBytes', v_stored,
                                  'truncated', v_truncated);
    END IF;
    IF v_len = 0 THEN
        RETURN jsonb_build_object('status', 'idempotent', 'storedBytes', v_stored,
                                  'truncated', v_truncated);
    END IF;
    IF v_truncated THEN
        RETURN jsonb_build_object('status', 'ok', 'storedBytes', v_stored, 'truncated', true);
    END IF;

    -- p_offset = the stored length: append what fits under the cap.
    v_cut := v_len;
    IF v_stored + v_len > v_log.limit_bytes THEN
        v_cut := (v_log.limit_bytes - v_stored)::integer;
        -- Back to the first byte of the character the cap falls in (a UTF-8
        -- continuation byte is 10xxxxxx).
        WHILE v_cut > 0 AND (get_byte(v_bytes, v_cut) & 192) = 128 LOOP
            v_cut := v_cut - 1;
        END LOOP;
        v_truncated := true;
    END IF;
    v_now := clock_timestamp();
    IF v_cut > 0 THEN
        INSERT INTO ql_private.attempt_log_chunks (attempt_id, start_byte, content)
        VALUES (v_lease.attempt_id, v_stored, substring(v_bytes FROM 1 FOR v_cut));
    END IF;
    UPDATE ql_private.attempt_logs lg
       SET stored_bytes = v_stored + v_cut, truncated = v_truncated, updated_at = v_now
     WHERE lg.attempt_id = v_lease.attempt_id;
    RETURN jsonb_build_object('status', 'ok', 'storedBytes', v_stored + v_cut,
                              'truncated', v_truncated);
END
$$;


ALTER FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) OWNER TO ql_owner;

--
-- Name: FUNCTION append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) IS 'Append a chunk of a started lease''s command output to its attempt''s live log (SPEC 15.1, 15.2). Inputs: the lease proof (p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest, p_lease_version: the current version, a fence never bumped), p_offset (bytes) >= 0, p_chunk <= 65536 UTF-8 bytes. offset = stored length -> appended {status: ok, storedBytes, truncated}; a chunk repeating stored bytes -> {status: idempotent, ...} unchanged; else {status: conflict, category: log_offset, storedBytes}. Cap: the task''s logLimitBytes pinned on the lease at claim; a crossing chunk is cut at the last UTF-8 character boundary at or below it, the log marked truncated, later chunks dropped (truncated: true). Fences: credential (lease.log), ql_private.lease_open (lease_verdict categories, stale_lease_version), started lease. Writes: one chunk row + the log header per appended chunk; nothing otherwise (one security_audit row when denied). Locks: attempt FOR KEY SHARE -> lease FOR KEY SHARE -> log header FOR NO KEY UPDATE. Errors: QL001 bad input (COLUMN offset/chunk where they are wrong), QL002 chunk over 64 KiB (COLUMN chunk), QL020 not started. Caller: ql_worker_ingress.';


--
-- Name: authenticate_worker(text, bytea, text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_denied jsonb;
BEGIN
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, ql_private.parse_uuid(p_worker_id, 'workerId'),
        p_action);
    RETURN coalesce(v_denied, jsonb_build_object('status', 'ok'));
END
$$;


ALTER FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) OWNER TO ql_owner;

--
-- Name: FUNCTION authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) IS 'Worker credential check. Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id, p_action. Fences: the credential (ql_private.authenticate). Returns {"status":"ok"} or {"status":"denied","httpStatus","reason"}. Writes: nothing when allowed, one security_audit row when denied. Locks: none. Errors: QL001 malformed workerId/action. Caller: ql_worker_ingress.';


--
-- Name: cancel_run(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.cancel_run(p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
    v_attempt_id uuid;
    v_run ql_private.runs;
    v_attempt ql_private.attempts;
    v_locked record;
    v_live ql_private.run_leases;
    v_now timestamptz;
BEGIN
    v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
    v_run := v_locked.run;
    v_attempt := v_locked.attempt;
    IF v_run.id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'run not found';
    END IF;
    v_attempt_id := v_attempt.id;

    IF v_run.state IN ('succeeded', 'failed', 'cancelled') THEN
        RETURN jsonb_build_object('runId', v_run.id, 'state', v_run.state,
                                  'cancelRequested', v_run.cancel_requested);
    END IF;

    SELECT l.* INTO v_live FROM ql_private.run_leases l
     WHERE l.attempt_id = v_attempt.id AND l.released_at IS NULL;
    v_now := clock_timestamp();

    IF v_run.state IN ('queued', 'dispatching') AND v_live.started_at IS NULL THEN
        IF v_live.id IS NOT NULL THEN
            UPDATE ql_private.run_leases l
               SET released_at = v_now, release_reason = 'cancelled', updated_at = v_now
             WHERE l.id = v_live.id;
        END IF;
        IF v_attempt.id IS NOT NULL
           AND v_attempt.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
            UPDATE ql_private.attempts att
               SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
                   finished_at = v_now
             WHERE att.id = v_attempt.id;
        END IF;
        UPDATE ql_private.runs rr
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
         WHERE rr.id = v_run.id
        RETURNING rr.* INTO v_run;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancelled', v_run.id, v_attempt.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id,
            'offerId', v_live.offer_id,
            'leaseReleased', v_live.id IS NOT NULL,
            'actor', session_user)));
    ELSIF v_run.cancel_requested THEN
        NULL;  -- already requested: no second write, no second event
    ELSE
        UPDATE ql_private.runs rr
           SET cancel_requested = true, updated_at = v_now
         WHERE rr.id = v_run.id
        RETURNING rr.* INTO v_run;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancel_requested', v_run.id, v_attempt.id,
                jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id,
            'state', v_run.state,
            'offerId', v_live.offer_id,
            'actor', session_user)));
    END IF;
    RETURN jsonb_build_object('runId', v_run.id, 'state', v_run.state,
                              'cancelRequested', v_run.cancel_requested);
END
$$;


ALTER FUNCTION ql.cancel_run(p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION cancel_run(p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.cancel_run(p_run_id text) IS 'Cancel a run. Inputs: p_run_id. Queued/dispatching without a started lease -> cancelled (attempt cancelled, unstarted lease released, run.cancelled event); started -> cancel_requested + run.cancel_requested event (events name the actor: session_user); terminal or already requested -> unchanged, no writes. Returns {runId, state, cancelRequested}. Fences: none beyond the run state. Writes: run, current attempt, live lease, one event (none when terminal or already requested). Locks: attempt FOR UPDATE, then run FOR NO KEY UPDATE, then lease. Idempotent. Errors: QL001 malformed id, QL004 unknown run. Caller: ql_runtime.';


--
-- Name: cancel_runs(text, text, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer DEFAULT 5000) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '0'
    AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_max_wait_ms constant integer := 60000;
    v_deadline timestamptz;
    v_now timestamptz;
    v_count bigint;
    v_left uuid[];
    v_run_id uuid;
    v_locked record;
    v_run ql_private.runs;
    v_attempt ql_private.attempts;
    v_live ql_private.run_leases;
    v_not jsonb := '[]'::jsonb;
    v_reason text;
BEGIN
    IF p_state IS NULL OR p_state <> 'queued' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
            MESSAGE = 'state must be queued (the only state cancelled in bulk)';
    END IF;
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND v_max_wait_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'waitMs',
            MESSAGE = format('waitMs must be between 0 and %s', v_max_wait_ms);
    END IF;
    PERFORM 1 FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    v_deadline := clock_timestamp() + make_interval(secs => p_wait_ms / 1000.0);

    BEGIN
        PERFORM set_config('lock_timeout', greatest(p_wait_ms, 1) || 'ms', true);
        PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.cancel_runs:' || v_task_id, 0));
    EXCEPTION WHEN lock_not_available THEN
        -- Another bulk cancel of this task held it for the whole bound.
        SELECT coalesce(jsonb_agg(jsonb_build_object('runId', r.id, 'state', r.state,
                                                     'reason', 'locked') ORDER BY r.queue_seq),
                        '[]'::jsonb)
          INTO v_not
          FROM ql_private.runs r WHERE r.task_id = v_task_id AND r.state = 'queued';
        RETURN jsonb_build_object('cancelled', 0, 'notCancelled', v_not);
    END;

    -- Pass 1: everything lockable right now, in one statement (never waits).
    v_now := clock_timestamp();
    WITH queued AS MATERIALIZED (
        SELECT r.id, r.queue_seq FROM ql_private.runs r
         WHERE r.task_id = v_task_id AND r.state = 'queued'
    ), picked AS MATERIALIZED (
        SELECT r.id AS run_id, a.id AS attempt_id, a.state AS attempt_state
          FROM ql_private.runs r
          JOIN ql_private.attempts a ON a.id = r.current_attempt_id
         WHERE r.task_id = v_task_id AND r.state = 'queued'
         ORDER BY r.queue_seq
           FOR NO KEY UPDATE OF a, r SKIP LOCKED
    ), cancelled_attempts AS (
        UPDATE ql_private.attempts a
           SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
               finished_at = v_now
          FROM picked p
         WHERE a.id = p.attempt_id
           AND p.attempt_state NOT IN ('succeeded', 'failed', 'lost', 'cancelled')
    ), cancelled_runs AS (
        UPDATE ql_private.runs r
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
          FROM picked p
         WHERE r.id = p.run_id
    ), new_events AS (
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        SELECT 'run.cancelled', p.run_id, p.attempt_id, jsonb_strip_nulls(jsonb_build_object(
                   'attemptId', p.attempt_id, 'leaseReleased', false,
                   'actor', session_user, 'bulk', true)),
               v_now
          FROM picked p
    )
    SELECT (SELECT count(*) FROM picked),
           (SELECT array_agg(q.id ORDER BY q.queue_seq) FROM queued q
             WHERE NOT EXISTS (SELECT 1 FROM picked p WHERE p.run_id = q.id))
      INTO v_count, v_left;

    -- Pass 2: the runs another transaction held, waited for within the bound.
    FOREACH v_run_id IN ARRAY coalesce(v_left, '{}') LOOP
        v_reason := NULL;
        LOOP
            BEGIN
                PERFORM set_config('lock_timeout', greatest(1, ceil(1000 * extract(
                    epoch FROM v_deadline - clock_timestamp())))::bigint || 'ms', true);
                v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
                EXIT;
            EXCEPTION
                WHEN lock_not_available THEN
                    v_reason := 'locked';
                    EXIT;
                WHEN deadlock_detected THEN
                    IF clock_timestamp() >= v_deadline THEN
                        v_reason := 'locked';
                        EXIT;
                    END IF;
            END;
        END LOOP;
        IF v_reason IS NOT NULL THEN
            v_not := v_not || jsonb_build_object('runId', v_run_id, 'state',
                (SELECT r.state FROM ql_private.runs r WHERE r.id = v_run_id), 'reason', v_reason);
            CONTINUE;
        END IF;
        v_run := v_locked.run;
        v_attempt := v_locked.attempt;
        CONTINUE WHEN v_run.id IS NULL OR v_run.state = 'cancelled';
        v_live := NULL;
        SELECT l.* INTO v_live FROM ql_private.run_leases l
         WHERE l.attempt_id = v_attempt.id AND l.released_at IS NULL;
        IF v_run.state NOT IN ('queued', 'dispatching') OR v_live.started_at IS NOT NULL THEN
            v_not := v_not || jsonb_build_object('runId', v_run_id, 'state', v_run.state,
                'reason', CASE WHEN v_run.state IN ('succeeded', 'failed') THEN 'finished'
                               ELSE 'started' END);
            CONTINUE;
        END IF;
        v_now := clock_timestamp();
        IF v_live.id IS NOT NULL THEN
            UPDATE ql_private.run_leases l
               SET released_at = v_now, release_reason = 'cancelled', updated_at = v_now
             WHERE l.id = v_live.id;
        END IF;
        IF v_attempt.id IS NOT NULL
           AND v_attempt.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
            UPDATE ql_private.attempts a
               SET state = 'cancelled', reason = 'cancelled', updated_at = v_now,
                   finished_at = v_now
             WHERE a.id = v_attempt.id;
        END IF;
        UPDATE ql_private.runs r
           SET state = 'cancelled', cancel_requested = true, updated_at = v_now,
               finished_at = v_now
         WHERE r.id = v_run.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        VALUES ('run.cancelled', v_run.id, v_attempt.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', v_attempt.id, 'offerId', v_live.offer_id,
            'leaseReleased', v_live.id IS NOT NULL, 'actor', session_user, 'bulk', true)),
            v_now);
        v_count := v_count + 1;
    END LOOP;
    RETURN jsonb_build_object('cancelled', v_count, 'notCancelled', v_not);
END
$$;


ALTER FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer) OWNER TO ql_owner;

--
-- Name: FUNCTION cancel_runs(p_task_id text, p_state text, p_wait_ms integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer) IS 'Bulk cancel of a task''s queued runs (SPEC 9.5): every run queued when the call starts is cancelled when it returns (as ql.cancel_run cancels a queued run: run and current attempt cancelled, one run.cancelled event each naming the actor, bulk: true) or listed; returns {cancelled: N, notCancelled: [{runId, state, reason locked|started|finished}]}. Inputs: p_task_id, p_state (only queued), p_wait_ms 0..60000 (default 5000). Pass 1: attempt + run FOR NO KEY UPDATE SKIP LOCKED in one statement; pass 2: each run another transaction held, locked attempt -> run (lock_run_attempt) with lock_timeout = the time left of p_wait_ms, cancelled if still queued or claimed but not started (unstarted lease released cancelled). An advisory lock per task serializes bulk cancels of one task. Fences: task exists; runs re-checked on the locked rows. Writes: runs, attempts, unstarted leases, events; nothing for a listed run. Errors: QL001 taskId/state, QL006 waitMs (COLUMN), QL004 unknown task. Caller: ql_runtime.';


--
-- Name: close_session(text, bytea, text, text, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_denied jsonb;
    v_now timestamptz;
    v_session ql_private.worker_sessions;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, v_worker_id, 'session.close');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    SELECT * INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = v_session_id AND ws.worker_id = v_worker_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL010', MESSAGE = 'session_not_found';
    END IF;
    IF v_session.generation <> p_generation
       OR (v_session.state = 'closed' AND EXISTS (
               SELECT 1 FROM ql_private.worker_sessions newer
                WHERE newer.worker_id = v_worker_id
                  AND newer.generation > v_session.generation)) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    IF v_session.state = 'closed' THEN
        RETURN jsonb_build_object('status', 'ok',
                                  'session', ql_private.session_projection(v_session));
    END IF;

    v_now := clock_timestamp();
    PERFORM ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = v_now
     WHERE ws.session_id = v_session_id
    RETURNING ws.* INTO v_session;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$$;


ALTER FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) IS 'Close a session on the worker''s request (also when expired) and release its unstarted live leases (session_closed). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation. Fences: credential (session.close); session owned, exact generation, not replaced. Returns {"status":"ok","session":{...}} or denied. Writes: session state/closed_at and released leases (none when already closed), an audit row when denied. Locks: session row FOR UPDATE. Idempotent: an already closed, not replaced session returns ok and writes nothing. Errors: QL001, QL010 not found, QL011 generation differs or replaced. Caller: ql_worker_ingress.';


--
-- Name: complete_lease(text, bytea, text, text, bigint, text, bytea, bigint, text, integer, text, jsonb); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer DEFAULT NULL::integer, p_reason text DEFAULT NULL::text, p_result jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_reason text := ql_private.require_reason(p_reason, 'reason');
    v_result jsonb := ql_private.validate_result(p_result);
    v_release text;
    v_denied jsonb;
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

    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'lease.complete');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    -- Pass 1 decides on an unlocked read; pass 2 (only when a change is due)
    -- locks the rows it changes and decides again on them (ql_private.lease_open).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_open(
            v_offer_id, v_worker_id, v_session_id, p_generation, v_token_digest,
            p_lease_version, 'complete', CASE v_pass WHEN 2 THEN 'attempt_run_lease' END,
            v_lease);
        v_lease := v_state.lease;
        v_attempt := v_state.attempt;
        v_run := v_state.run;
        IF v_state.category = 'replay' THEN
            -- The completion that made the current version: the same one only if
            -- it stored exactly what this request asks for.
            IF v_lease.release_reason = v_release AND v_attempt.state = p_outcome
               AND v_attempt.exit_code IS NOT DISTINCT FROM p_exit_code
               AND v_attempt.reason IS NOT DISTINCT FROM v_reason
               AND v_attempt.result IS NOT DISTINCT FROM v_result THEN
                RETURN jsonb_build_object('status', 'idempotent',
                                          'lease', ql_private.lease_projection(v_lease.id));
            END IF;
            RETURN jsonb_build_object('status', 'conflict', 'category', 'lease_terminal');
        ELSIF v_state.category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', v_state.category);
        END IF;
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


ALTER FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) IS 'Complete a started, unexpired lease (SPEC 7) in one fenced transaction at the lease version the worker last saw (version+1): succeeded (attempt+run succeeded, run.succeeded), failed (attempt failed, attempt.failed, retry policy: run.retry_scheduled | run.failed | run.cancelled), cancelled (only when cancel requested: attempt+run cancelled, run.cancelled); lease released completed|cancelled. Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest, p_lease_version, p_outcome, p_exit_code, p_reason, p_result (NULL or {exitCode?, durationMs, outputTail <= 8 KiB UTF-8, outputBytes}, stored on the attempt). Fences: credential (lease.complete), then ql_private.lease_open (offer, worker, token digest, session/generation, live unexpired lease, attempt, revision, lease version). {status: ok|idempotent, lease: lease@v1} | {status: conflict, category (lease_verdict categories, stale_lease_version)} | denied; idempotent = the same completion repeated after a lost answer (version = current - 1, same outcome, exit code, reason and result). Writes: lease, attempt, run or retry policy, one event; exact replay writes nothing. Locks (changes only, ql_private.lease_open attempt_run_lease): attempt FOR UPDATE, run FOR NO KEY UPDATE, lease FOR UPDATE. Errors: QL001 bad input (lease version NULL or < 1 included; COLUMN result for a malformed result), QL020 not started / cancelled without request. Caller: ql_worker_ingress.';


--
-- Name: configure_task(text, integer, integer, integer, integer, boolean, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer DEFAULT NULL::integer, p_max_attempts integer DEFAULT NULL::integer, p_retry_base_ms integer DEFAULT NULL::integer, p_retry_cap_ms integer DEFAULT NULL::integer, p_enabled boolean DEFAULT NULL::boolean, p_log_limit_bytes integer DEFAULT NULL::integer) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
    v_base integer;
    v_cap integer;
BEGIN
    IF p_lease_ttl_s NOT BETWEEN 5 AND 86400 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'leaseTtlS',
            MESSAGE = 'leaseTtlS must be between 5 and 86400';
    END IF;
    IF p_max_attempts NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'maxAttempts',
            MESSAGE = 'maxAttempts must be between 1 and 100';
    END IF;
    IF p_retry_base_ms NOT BETWEEN 100 AND 3600000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryBaseMs',
            MESSAGE = 'retryBaseMs must be between 100 and 3600000';
    END IF;
    IF p_retry_cap_ms NOT BETWEEN 100 AND 86400000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryCapMs',
            MESSAGE = 'retryCapMs must be between retryBaseMs and 86400000';
    END IF;
    IF p_log_limit_bytes NOT BETWEEN 1024 AND 67108864 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'logLimitBytes',
            MESSAGE = 'logLimitBytes must be between 1024 and 67108864';
    END IF;

    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    v_base := coalesce(p_retry_base_ms, v_task.retry_base_ms);
    v_cap := coalesce(p_retry_cap_ms, v_task.retry_cap_ms);
    IF (p_retry_base_ms IS NOT NULL OR p_retry_cap_ms IS NOT NULL) AND v_cap < v_base THEN
        IF p_retry_cap_ms IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryCapMs',
                MESSAGE = format('retryCapMs must be between retryBaseMs (%s) and 86400000',
                                 v_base);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retryBaseMs',
            MESSAGE = format('retryBaseMs must be between 100 and retryCapMs (%s)', v_cap);
    END IF;

    IF (coalesce(p_lease_ttl_s, v_task.lease_ttl_seconds),
        coalesce(p_max_attempts, v_task.max_attempts), v_base, v_cap,
        coalesce(p_enabled, v_task.enabled),
        coalesce(p_log_limit_bytes, v_task.log_limit_bytes))
       IS DISTINCT FROM
       (v_task.lease_ttl_seconds, v_task.max_attempts, v_task.retry_base_ms,
        v_task.retry_cap_ms, v_task.enabled, v_task.log_limit_bytes) THEN
        UPDATE ql_private.tasks tk
           SET lease_ttl_seconds = coalesce(p_lease_ttl_s, tk.lease_ttl_seconds),
               max_attempts = coalesce(p_max_attempts, tk.max_attempts),
               retry_base_ms = v_base,
               retry_cap_ms = v_cap,
               enabled = coalesce(p_enabled, tk.enabled),
               log_limit_bytes = coalesce(p_log_limit_bytes, tk.log_limit_bytes)
         WHERE tk.id = v_task_id
        RETURNING tk.* INTO v_task;
    END IF;
    RETURN jsonb_build_object(
        'taskId', v_task.id, 'leaseTtlS', v_task.lease_ttl_seconds,
        'maxAttempts', v_task.max_attempts, 'retryBaseMs', v_task.retry_base_ms,
        'retryCapMs', v_task.retry_cap_ms, 'enabled', v_task.enabled,
        'logLimitBytes', v_task.log_limit_bytes);
END
$$;


ALTER FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer) OWNER TO ql_owner;

--
-- Name: FUNCTION configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer) IS 'Change a task''s run policy (SPEC 9.1); NULL = unchanged; returns {taskId, leaseTtlS, maxAttempts, retryBaseMs, retryCapMs, enabled, logLimitBytes}. Applies to attempts claimed afterwards (TTL and log cap pinned on the lease at claim, retry policy when an attempt ends). Inputs: p_task_id, p_lease_ttl_s 5..86400, p_max_attempts 1..100, p_retry_base_ms 100..3600000, p_retry_cap_ms retryBaseMs..86400000 (pair checked on the result), p_enabled, p_log_limit_bytes 1024..67108864. Fences: task exists. Writes: the task row when something changes; no event. Locks: task row FOR NO KEY UPDATE. Idempotent. Errors: QL001 malformed id, QL006 out of bounds (COLUMN = wire field), QL004 unknown task; nothing changed on error. Caller: ql_runtime.';


--
-- Name: confirm_credentials(text[], bytea[], text[]); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) RETURNS text[]
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_count integer := coalesce(cardinality(p_credential_ids), -1);
BEGIN
    IF v_count < 0 OR v_count > 1024
       OR v_count <> coalesce(cardinality(p_secret_digests), -1)
       OR v_count <> coalesce(cardinality(p_worker_ids), -1) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credential, digest and worker arrays must have the same length 0..1024';
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_credential_ids, p_secret_digests, p_worker_ids)
                      AS entry(credential_id, digest, worker_id)
                WHERE entry.credential_id IS NULL
                   OR entry.credential_id !~ '^[a-z0-9]{16}$'
                   OR entry.digest IS NULL OR octet_length(entry.digest) <> 32
                   OR entry.worker_id IS NULL
                   OR entry.worker_id
                      !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'every element must be a credential id, a 32-byte digest and a worker UUID';
    END IF;
    RETURN coalesce((
        SELECT array_agg(entry.credential_id ORDER BY entry.input_order)
          FROM unnest(p_credential_ids, p_secret_digests, p_worker_ids)
               WITH ORDINALITY AS entry(credential_id, digest, worker_id, input_order)
          JOIN ql_private.worker_credentials cred ON cred.credential_id = entry.credential_id
          JOIN ql_private.workers wk ON wk.id = cred.worker_id
         WHERE ql_private.digest_equal(entry.digest, cred.secret_digest)
           AND cred.revoked_at IS NULL
           AND (cred.expires_at IS NULL OR cred.expires_at > clock_timestamp())
           AND cred.worker_id = entry.worker_id::uuid
           AND wk.disabled_at IS NULL), ARRAY[]::text[]);
END
$_$;


ALTER FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) OWNER TO ql_owner;

--
-- Name: FUNCTION confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) IS 'Idle view cache re-confirmation: the given credential ids that would authenticate for their worker now (exists, digest matches in constant time, not revoked, not expired, same worker, worker not disabled). Inputs: equal-length arrays (<= 1024) of credential ids, SHA-256 digests, worker UUIDs. Fences: the credential facts of ql_private.authenticate. Writes: none. Locks: none. Errors: QL001 malformed arrays. Caller: ql_worker_ingress.';


--
-- Name: create_pool(text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.create_pool(p_project text, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_project_id uuid;
    v_pool ql_private.pools;
    v_created boolean := false;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z0-9][a-z0-9._-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'pool name must match ^[a-z0-9][a-z0-9._-]{0,62}$';
    END IF;
    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.pools AS pl (project_id, name) VALUES (v_project_id, p_name)
    ON CONFLICT (project_id, name) DO NOTHING
    RETURNING pl.* INTO v_pool;
    v_created := FOUND;
    IF NOT v_created THEN
        SELECT pl.* INTO STRICT v_pool FROM ql_private.pools pl
         WHERE pl.project_id = v_project_id AND pl.name = p_name;
    END IF;
    RETURN jsonb_build_object('poolId', v_pool.id, 'project', p_project, 'name', v_pool.name,
                              'created', v_created);
END
$_$;


ALTER FUNCTION ql.create_pool(p_project text, p_name text) OWNER TO ql_owner;

--
-- Name: FUNCTION create_pool(p_project text, p_name text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.create_pool(p_project text, p_name text) IS 'Create pool P/N (SPEC 13.1), the project (with its default pool) first when needed; returns {poolId, project, name, created}. Inputs: p_project, p_name (^[a-z0-9][a-z0-9._-]{0,62}$). Fences: names. Writes: project (first use), one pool; nothing when it exists. Locks: unique indexes only (ON CONFLICT DO NOTHING). Idempotent (created=false). Errors: QL001 bad project (COLUMN project) or name (COLUMN name). Caller: ql_runtime.';


--
-- Name: create_project_token(text, text, bytea, text[], bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_all_scopes constant text[] := ARRAY['enqueue', 'read', 'cancel', 'retry', 'log'];
    v_max_expires_s constant bigint := 315360000;
    v_project_id uuid;
    v_scopes text[];
    v_now timestamptz := clock_timestamp();
    v_token ql_private.project_tokens;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_token_id IS NULL OR p_token_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id must be 16 characters [a-z0-9]';
    END IF;
    IF p_token_digest IS NULL OR octet_length(p_token_digest) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenDigest',
            MESSAGE = 'token digest must be 32 bytes (SHA-256)';
    END IF;
    IF p_scopes IS NULL OR cardinality(p_scopes) = 0
       OR EXISTS (SELECT 1 FROM unnest(p_scopes) s WHERE s IS NULL OR s <> ALL (v_all_scopes)) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'scope',
            MESSAGE = 'scopes must be one or more of enqueue, read, cancel, retry, log';
    END IF;
    IF p_expires_in_s IS NOT NULL AND p_expires_in_s NOT BETWEEN 1 AND v_max_expires_s THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'expiresIn',
            MESSAGE = format('expires-in must be between 1 s and %s s', v_max_expires_s);
    END IF;
    v_scopes := ARRAY(SELECT DISTINCT s FROM unnest(p_scopes) s ORDER BY s);

    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.project_tokens AS t (
        id, project_id, token_digest, scopes, created_at, created_by, expires_at)
    VALUES (p_token_id, v_project_id, p_token_digest, v_scopes, v_now, session_user,
            v_now + make_interval(secs => p_expires_in_s))
    ON CONFLICT (id) DO NOTHING
    RETURNING t.* INTO v_token;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id already used';
    END IF;
    RETURN jsonb_build_object(
        'tokenId', v_token.id,
        'project', p_project,
        'scopes', to_jsonb(v_token.scopes),
        'createdAtMs', ql_private.epoch_ms(v_token.created_at),
        'expiresAtMs', ql_private.epoch_ms(v_token.expires_at));
END
$_$;


ALTER FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint) IS 'admin token create (SPEC 13.4): store a project token made by the CLI: only the SHA-256 digest of the whole token string; project created when missing. Returns {tokenId, project, scopes (sorted, distinct), createdAtMs, expiresAtMs (null = never)}, never the digest. Inputs: p_project, p_token_id [a-z0-9]{16}, p_token_digest (32 bytes), p_scopes (1..5 of enqueue/read/cancel/retry/log), p_expires_in_s (NULL or 1..315360000). Writes: one project_tokens row (created_by = session_user), the project on first use. Locks: unique indexes. Errors: QL001 project/tokenId/tokenDigest/scope (COLUMN), id reused (tokenId); QL006 expiresIn. Caller: ql_runtime.';


--
-- Name: delete_secret(text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.delete_secret(p_project text, p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_version integer;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_.-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'secret name must match ^[a-z][a-z0-9_.-]{0,63}$';
    END IF;
    DELETE FROM ql_private.secrets s
     USING ql_private.projects p
     WHERE p.name = p_project AND s.project_id = p.id AND s.name = p_name
    RETURNING s.version INTO v_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'name',
            MESSAGE = format('secret %s not found in project %s', p_name, p_project);
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.delete', 'allowed', 'secret_deleted', session_user,
            jsonb_build_object('project', p_project, 'name', p_name, 'version', v_version));
    RETURN jsonb_build_object('project', p_project, 'name', p_name, 'version', v_version,
                              'deleted', true);
END
$_$;


ALTER FUNCTION ql.delete_secret(p_project text, p_name text) OWNER TO ql_owner;

--
-- Name: FUNCTION delete_secret(p_project text, p_name text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.delete_secret(p_project text, p_name text) IS 'admin secret delete (SPEC 14.1): remove a secret; revisions naming it stay (their runs then answer secret_missing). Returns {project, name, version, deleted}. Inputs: p_project, p_name. Fences: the secret exists. Writes: deletes the row, one security_audit row (secret.delete, actor, detail {project, name, version}). Locks: the secret row. Errors: QL001 malformed (COLUMN project|name), QL004 not found (COLUMN name). Caller: ql_runtime.';


--
-- Name: disable_worker(text, boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_drain boolean := coalesce(p_drain, false);
    v_worker ql_private.workers;
    v_session ql_private.worker_sessions;
    v_drained record;
    v_now timestamptz;
    v_closed integer := 0;
    v_draining integer := 0;
    v_released integer := 0;
    v_changed boolean;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    v_now := clock_timestamp();
    v_changed := v_worker.disabled_at IS NULL;
    IF v_changed THEN
        UPDATE ql_private.workers w SET disabled_at = v_now WHERE w.id = v_worker_id;
    END IF;

    FOR v_session IN
        SELECT ws.* FROM ql_private.worker_sessions ws
         WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
         ORDER BY ws.generation
           FOR UPDATE
    LOOP
        IF v_drain AND v_session.state = 'active' THEN
            SELECT * INTO v_drained FROM ql_private.drain_session(v_session.session_id);
            v_released := v_released + v_drained.released;
            IF v_drained.state = 'closed' THEN
                v_closed := v_closed + 1;
            ELSE
                v_draining := v_draining + 1;
            END IF;
        ELSIF NOT v_drain THEN
            v_released := v_released
                + ql_private.release_unstarted_leases(ARRAY[v_session.session_id], 'session_closed');
            UPDATE ql_private.worker_sessions ws
               SET state = 'closed', closed_at = clock_timestamp()
             WHERE ws.session_id = v_session.session_id;
            v_closed := v_closed + 1;
        END IF;
    END LOOP;

    IF v_changed OR v_closed > 0 OR v_draining > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.disabled', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'drain', v_drain, 'sessionsClosed', v_closed,
            'sessionsDraining', v_draining, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;
    PERFORM pg_notify('ql_dispatch', 'c:' || c.credential_id)
       FROM ql_private.worker_credentials c WHERE c.worker_id = v_worker_id;
    RETURN jsonb_build_object('workerId', v_worker_id, 'disabled', true, 'drain', v_drain,
                              'sessionsClosed', v_closed, 'sessionsDraining', v_draining,
                              'leasesReleased', v_released);
END
$$;


ALTER FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION disable_worker(p_worker_id text, p_drain boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean) IS 'Disable a worker (SPEC 9.5): workers.disabled_at set, so every credential of it is refused (worker_disabled, 403, audited); without drain its open sessions are closed as close_session does (unstarted leases released session_closed, runs re-queued; started leases can no longer heartbeat or complete); with drain its active sessions drain instead (ql_private.drain_session: no new offers, unstarted leases released, started leases may still ACK running, heartbeat and complete — authenticate lets only those calls and session heartbeat/close through while a draining session is left — and the session closes with its last lease). One worker.disabled event naming the actor (session_user) when anything changed; NOTIFY c:<credentialId> per credential (and s:<workerId> by the session trigger). Returns {workerId, disabled: true, drain, sessionsClosed, sessionsDraining, leasesReleased}. Inputs: p_worker_id, p_drain (default false). Fences: worker exists. Locks: worker row FOR NO KEY UPDATE, sessions FOR UPDATE, attempt -> run -> lease; with drain FOR SHARE on live leases. Idempotent. Errors: QL001 malformed, QL004 unknown worker (COLUMN workerId). Caller: ql_runtime.';


--
-- Name: enable_worker(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.enable_worker(p_worker_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF v_worker.disabled_at IS NOT NULL THEN
        UPDATE ql_private.workers w SET disabled_at = NULL WHERE w.id = v_worker_id;
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.enabled', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'actor', session_user));
        PERFORM pg_notify('ql_dispatch', 'c:' || c.credential_id)
           FROM ql_private.worker_credentials c WHERE c.worker_id = v_worker_id;
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'disabled', false);
END
$$;


ALTER FUNCTION ql.enable_worker(p_worker_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION enable_worker(p_worker_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.enable_worker(p_worker_id text) IS 'Enable a disabled worker (SPEC 9.5): disabled_at := NULL, one worker.enabled event naming the actor (session_user), NOTIFY c:<credentialId> per credential; returns {workerId, disabled: false}. Inputs: p_worker_id. Fences: worker exists. Writes: worker row + event (none when already enabled). Locks: worker row FOR NO KEY UPDATE. Idempotent. Errors: QL001 malformed, QL004 unknown worker (COLUMN workerId). Caller: ql_runtime.';


--
-- Name: end_session(text, boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.end_session(p_session_id text, p_drain boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_drain boolean := coalesce(p_drain, false);
    v_session ql_private.worker_sessions;
    v_released integer := 0;
    v_running integer;
    v_state text;
    v_drained record;
BEGIN
    SELECT ws.* INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = v_session_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'sessionId',
            MESSAGE = 'session not found';
    END IF;
    v_state := v_session.state;
    IF v_drain AND v_session.state = 'active' THEN
        SELECT * INTO v_drained FROM ql_private.drain_session(v_session_id);
        v_released := v_drained.released;
        v_state := v_drained.state;
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('session.draining', v_session.worker_id, jsonb_build_object(
            'sessionId', v_session_id, 'workerId', v_session.worker_id,
            'generation', v_session.generation, 'leasesReleased', v_released,
            'leasesRunning', v_drained.running, 'state', v_state, 'drain', true,
            'actor', session_user));
    ELSIF NOT v_drain AND v_session.state <> 'closed' THEN
        v_released := ql_private.release_unstarted_leases(ARRAY[v_session_id], 'session_closed');
        UPDATE ql_private.worker_sessions ws
           SET state = 'closed', closed_at = clock_timestamp()
         WHERE ws.session_id = v_session_id;
        v_state := 'closed';
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('session.closed', v_session.worker_id, jsonb_build_object(
            'sessionId', v_session_id, 'workerId', v_session.worker_id,
            'generation', v_session.generation, 'leasesReleased', v_released,
            'drain', false, 'actor', session_user));
    END IF;
    SELECT count(*)::integer INTO v_running FROM ql_private.run_leases rl
     WHERE rl.session_id = v_session_id AND rl.released_at IS NULL;
    RETURN jsonb_build_object('sessionId', v_session_id, 'workerId', v_session.worker_id,
                              'state', v_state, 'drain', v_drain,
                              'leasesReleased', v_released, 'leasesRunning', v_running);
END
$$;


ALTER FUNCTION ql.end_session(p_session_id text, p_drain boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION end_session(p_session_id text, p_drain boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.end_session(p_session_id text, p_drain boolean) IS 'Operator close of a worker session (SPEC 9.5). Without drain, as close_session: unstarted leases released (session_closed, runs re-queued), state closed (started leases can no longer heartbeat or complete); one session.closed event naming the actor (session_user). With drain (active session, ql_private.drain_session): no new offers (409 session_draining), unstarted leases released, started leases may still ACK running, heartbeat and complete; closed when the last one ends (at once when none runs) or at expiry; one session.draining event naming the actor. NOTIFY s:<workerId> by trigger. Returns {sessionId, workerId, state: closed|draining, drain, leasesReleased, leasesRunning}. Inputs: p_session_id, p_drain (default false). Fences: session exists. Locks: session FOR UPDATE, then attempt -> run -> lease; with drain FOR SHARE on the live leases. Idempotent (closed, or draining with drain: no-op, leasesReleased 0). Errors: QL001 malformed, QL004 unknown session (COLUMN sessionId). Caller: ql_runtime.';


--
-- Name: enqueue_runs(text, integer, integer, bigint, bigint, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint DEFAULT NULL::bigint, p_delay_ms bigint DEFAULT NULL::bigint, p_key text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_max_count constant integer := 10000;
    v_max_ahead_ms constant bigint := 31536000000;  -- 365 days
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
    v_now timestamptz := clock_timestamp();
    v_due timestamptz;
    v_class_id integer;
    v_run_ids jsonb;
    v_run_id uuid;
BEGIN
    IF p_priority IS NULL OR p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'priority',
            MESSAGE = 'priority must be a smallint';
    END IF;
    IF p_count IS NULL OR p_count < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'count', MESSAGE = 'count must be >= 1';
    END IF;
    IF p_count > v_max_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'count',
            MESSAGE = format('count must be <= %s', v_max_count);
    END IF;
    IF p_delay_ms IS NOT NULL AND p_not_before_ms IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'delayMs',
            MESSAGE = 'give delayMs or notBeforeMs, not both';
    END IF;
    IF p_delay_ms IS NOT NULL AND p_delay_ms NOT BETWEEN 0 AND v_max_ahead_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'delayMs',
            MESSAGE = format('delayMs must be between 0 and %s', v_max_ahead_ms);
    END IF;
    IF p_not_before_ms IS NOT NULL
       AND p_not_before_ms NOT BETWEEN 0 AND ql_private.epoch_ms(v_now) + v_max_ahead_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'notBeforeMs',
            MESSAGE = format('notBeforeMs must be between 0 and %s (now + 1 year)',
                             ql_private.epoch_ms(v_now) + v_max_ahead_ms);
    END IF;
    IF p_key IS NOT NULL THEN
        IF char_length(p_key) NOT BETWEEN 1 AND 128
           OR p_key ~ '[\u0001-\u001f\u007f-\u009f\u2028\u2029]' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'key',
                MESSAGE = 'key must be 1 to 128 printable characters';
        END IF;
        IF p_count <> 1 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'key',
                MESSAGE = 'key requires count = 1';
        END IF;
    END IF;
    v_due := CASE
        WHEN p_delay_ms > 0 THEN v_now + make_interval(secs => p_delay_ms / 1000.0)
        WHEN p_not_before_ms IS NOT NULL
             AND to_timestamp(p_not_before_ms / 1000.0) > v_now
            THEN to_timestamp(p_not_before_ms / 1000.0)
    END;

    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT r.id INTO v_run_id FROM ql_private.runs r
         WHERE r.task_id = v_task_id AND r.idempotency_key = p_key;
        IF FOUND THEN
            RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id), 'existing', true);
        END IF;
    END IF;
    IF NOT v_task.enabled THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'taskId', MESSAGE = 'task is disabled';
    END IF;
    IF v_task.current_revision_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'taskId',
            MESSAGE = 'task has no published revision';
    END IF;

    v_class_id := ql_private.placement_class_of(v_task.current_revision_id);
    v_now := clock_timestamp();

    IF p_key IS NOT NULL THEN
        -- One run; ON CONFLICT waits for a concurrent insert of the same key and
        -- then inserts nothing (and neither the attempt nor the event, which are
        -- fed by RETURNING).
        LOOP
            WITH new_run AS (
                INSERT INTO ql_private.runs (
                    id, project_id, task_id, execution_revision_id, priority, state,
                    current_attempt_id, placement_class, due_at, idempotency_key,
                    created_at, updated_at, pool_id)
                VALUES (gen_random_uuid(), v_task.project_id, v_task.id,
                        v_task.current_revision_id, p_priority::smallint, 'queued',
                        gen_random_uuid(), v_class_id, v_due, p_key, v_now, v_now,
                        v_task.pool_id)
                ON CONFLICT (task_id, idempotency_key) WHERE idempotency_key IS NOT NULL
                DO NOTHING
                RETURNING id, current_attempt_id
            ), new_attempt AS (
                INSERT INTO ql_private.attempts (
                    id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
                    max_attempts, retry_base_ms, retry_cap_ms)
                SELECT nr.current_attempt_id, nr.id, 1, 'remote_worker', 'claimed',
                       coalesce(v_due, v_now), v_now, v_now,
                       v_task.max_attempts, v_task.retry_base_ms, v_task.retry_cap_ms
                  FROM new_run nr
            ), new_event AS (
                INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
                SELECT 'run.queued', nr.id, nr.current_attempt_id,
                       jsonb_strip_nulls(jsonb_build_object(
                           'taskId', v_task.id,
                           'executionRevisionId', v_task.current_revision_id,
                           'attemptId', nr.current_attempt_id,
                           'priority', p_priority,
                           'dueAtMs', ql_private.epoch_ms(v_due))),
                       v_now
                  FROM new_run nr
            )
            SELECT nr.id INTO v_run_id FROM new_run nr;
            IF FOUND THEN
                RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id),
                                          'existing', false);
            END IF;
            SELECT r.id INTO v_run_id FROM ql_private.runs r
             WHERE r.task_id = v_task_id AND r.idempotency_key = p_key;
            IF FOUND THEN
                RETURN jsonb_build_object('runIds', jsonb_build_array(v_run_id),
                                          'existing', true);
            END IF;
            -- The conflicting run was pruned in between: insert again.
        END LOOP;
    END IF;

    WITH planned AS MATERIALIZED (
        SELECT gen_random_uuid() AS run_id,
               gen_random_uuid() AS attempt_id,
               nextval('ql_private.run_queue_seq') AS seq
          FROM generate_series(1, p_count) AS g
         ORDER BY g
    ), new_runs AS (
        INSERT INTO ql_private.runs (
            id, project_id, task_id, execution_revision_id, priority, queue_seq, state,
            current_attempt_id, placement_class, due_at, created_at, updated_at, pool_id)
        SELECT p.run_id, v_task.project_id, v_task.id, v_task.current_revision_id,
               p_priority::smallint, p.seq, 'queued', p.attempt_id, v_class_id, v_due,
               v_now, v_now, v_task.pool_id
          FROM planned p
    ), new_attempts AS (
        INSERT INTO ql_private.attempts (
            id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
            max_attempts, retry_base_ms, retry_cap_ms)
        SELECT p.attempt_id, p.run_id, 1, 'remote_worker', 'claimed', coalesce(v_due, v_now),
               v_now, v_now, v_task.max_attempts, v_task.retry_base_ms, v_task.retry_cap_ms
          FROM planned p
    ), new_events AS (
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
        SELECT 'run.queued', p.run_id, p.attempt_id,
               jsonb_strip_nulls(jsonb_build_object(
                   'taskId', v_task.id,
                   'executionRevisionId', v_task.current_revision_id,
                   'attemptId', p.attempt_id,
                   'priority', p_priority,
                   'dueAtMs', ql_private.epoch_ms(v_due))),
               v_now
          FROM planned p
    )
    -- Data-modifying CTEs always run to completion, referenced or not.
    SELECT jsonb_agg(to_jsonb(p.run_id) ORDER BY p.seq) INTO v_run_ids FROM planned p;
    RETURN jsonb_build_object('runIds', v_run_ids, 'existing', false);
END
$$;


ALTER FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) OWNER TO ql_owner;

--
-- Name: FUNCTION enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) IS 'Queue p_count (1..10000) runs of an enabled task pinned to its current revision, each with attempt 1 (claimed, remote_worker) and one run.queued event; returns {runIds (queue order), existing}. Inputs: p_task_id, p_priority (smallint), p_count, p_not_before_ms (epoch ms, <= now + 1 year) or p_delay_ms (0..31536000000): a future time schedules the runs (due_at = not_before = that time, out of the candidate keysets until due; past = ready now); p_key (1..128 printable chars, count 1): idempotent per task while the run is retained, an existing key returns {runIds: [it], existing: true} and writes nothing (INSERT ON CONFLICT DO NOTHING: concurrent same-key calls queue one run). Fences: task exists, enabled, published. Writes: runs (carrying the task''s pool), attempts, events, at most one placement class. Locks: FK KEY SHARE; ON CONFLICT waits on a concurrent same-key insert. Errors (COLUMN = wire field): QL001 bad input/disabled/unpublished/key, QL002 count > 10000, QL006 delayMs/notBeforeMs out of bounds, QL004 unknown task. Caller: ql_runtime.';


--
-- Name: expiring_counts(bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.expiring_counts(p_within_s bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_found jsonb;
BEGIN
    IF p_within_s IS NULL OR p_within_s NOT BETWEEN 1 AND 31536000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'withinS',
            MESSAGE = 'withinS must be between 1 and 31536000';
    END IF;
    v_found := ql.expiring_identities(p_within_s, 1);
    RETURN jsonb_build_object('credentials', v_found -> 'credentialsTotal',
                              'certificates', v_found -> 'certificatesTotal');
END
$$;


ALTER FUNCTION ql.expiring_counts(p_within_s bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION expiring_counts(p_within_s bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.expiring_counts(p_within_s bigint) IS 'How many worker credentials and issued certificates expire within p_within_s (SPEC 16.3, /metrics): {credentials, certificates}, each <= 10000. Writes: nothing. Locks: none. Errors: QL006 out of bounds. Caller: ql_worker_ingress.';


--
-- Name: expiring_identities(bigint, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.expiring_identities(p_within_s bigint DEFAULT 1209600, p_limit integer DEFAULT 100) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_within_s bigint := coalesce(p_within_s, 1209600);
    v_limit integer := coalesce(p_limit, 100);
    v_now timestamptz := clock_timestamp();
    v_until timestamptz;
    v_credentials jsonb;
    v_certificates jsonb;
    v_credentials_total bigint;
    v_certificates_total bigint;
BEGIN
    IF v_within_s NOT BETWEEN 1 AND 31536000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'withinS',
            MESSAGE = 'withinS must be between 1 and 31536000';
    END IF;
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    v_until := v_now + make_interval(secs => v_within_s);
    WITH soon AS (
        SELECT c.credential_id, c.worker_id, c.expires_at
          FROM ql_private.worker_credentials c
         WHERE c.revoked_at IS NULL AND c.expires_at > v_now AND c.expires_at <= v_until
           AND NOT EXISTS (SELECT 1 FROM ql_private.worker_credentials s
                            WHERE s.rotated_from = c.credential_id AND s.revoked_at IS NULL)
         ORDER BY c.expires_at
         LIMIT 10000)
    SELECT (SELECT count(*) FROM soon),
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                         'credentialId', page.credential_id, 'workerId', page.worker_id,
                         'worker', w.name, 'expiresAtMs', ql_private.epoch_ms(page.expires_at))
                       ORDER BY page.expires_at, page.credential_id)
                       FROM (SELECT * FROM soon ORDER BY soon.expires_at LIMIT v_limit) page
                       JOIN ql_private.workers w ON w.id = page.worker_id), '[]'::jsonb)
      INTO v_credentials_total, v_credentials;
    WITH soon AS (
        SELECT c.serial, c.worker_id, c.not_after
          FROM ql_private.worker_certificates c
         WHERE c.revoked_at IS NULL AND c.not_after > v_now AND c.not_after <= v_until
           AND NOT EXISTS (SELECT 1 FROM ql_private.worker_certificates n
                            WHERE n.worker_id = c.worker_id AND n.revoked_at IS NULL
                              AND n.not_after > v_now AND n.issued_at > c.issued_at)
         ORDER BY c.not_after
         LIMIT 10000)
    SELECT (SELECT count(*) FROM soon),
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                         'serial', page.serial, 'workerId', page.worker_id, 'worker', w.name,
                         'notAfterMs', ql_private.epoch_ms(page.not_after))
                       ORDER BY page.not_after, page.serial)
                       FROM (SELECT * FROM soon ORDER BY soon.not_after LIMIT v_limit) page
                       JOIN ql_private.workers w ON w.id = page.worker_id), '[]'::jsonb)
      INTO v_certificates_total, v_certificates;
    RETURN jsonb_build_object(
        'withinS', v_within_s,
        'credentials', v_credentials,
        'certificates', v_certificates,
        'credentialsTotal', v_credentials_total,
        'certificatesTotal', v_certificates_total,
        'truncated', v_credentials_total > v_limit OR v_certificates_total > v_limit);
END
$$;


ALTER FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) OWNER TO ql_owner;

--
-- Name: FUNCTION expiring_identities(p_within_s bigint, p_limit integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) IS 'Worker credentials and certificates expiring within p_within_s (default 14 d, SPEC 16.3), soonest first, not revoked, not already replaced (a live successor credential; a live certificate of the worker issued later): {withinS, credentials: [{credentialId, workerId, worker, expiresAtMs}], certificates: [{serial, workerId, worker, notAfterMs}], credentialsTotal, certificatesTotal (<= 10000), truncated}. Inputs: p_within_s 1..31536000, p_limit 1..1000. Writes: nothing. Locks: none. Errors: QL006 out of bounds. Caller: ql_readonly, ql_runtime.';


--
-- Name: grant_pool(text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.grant_pool(p_worker_id text, p_pool text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
    v_pool ql_private.pools;
    v_granted boolean;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF p_pool = '*' THEN
        v_granted := NOT v_worker.all_pools;
        IF v_granted THEN
            UPDATE ql_private.workers w SET all_pools = true WHERE w.id = v_worker_id;
        END IF;
    ELSE
        v_pool := ql_private.pool_of(p_pool);
        INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id)
        VALUES (v_worker_id, v_pool.id)
        ON CONFLICT (worker_id, pool_id) DO NOTHING;
        v_granted := FOUND;
    END IF;
    IF v_granted THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.pool_granted', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'pool', p_pool, 'actor', session_user));
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'pool', p_pool, 'granted', v_granted);
END
$$;


ALTER FUNCTION ql.grant_pool(p_worker_id text, p_pool text) OWNER TO ql_owner;

--
-- Name: FUNCTION grant_pool(p_worker_id text, p_pool text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.grant_pool(p_worker_id text, p_pool text) IS 'Grant a worker pool P/N, or every pool present and future with ''*'' (SPEC 13.1); returns {workerId, pool, granted}. Inputs: p_worker_id, p_pool. Fences: worker and pool exist. Writes: one worker_pool_grants row or workers.all_pools, one worker.pool_granted event (workerId, pool, actor); nothing when held. Locks: worker row FOR NO KEY UPDATE. Idempotent. Errors: QL001 malformed (COLUMN workerId|pool), QL004 unknown worker or pool. Caller: ql_runtime.';


--
-- Name: heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_denied jsonb;
    v_state record;
    v_lease ql_private.run_leases;
    v_now timestamptz;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'lease.heartbeat');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    -- Pass 1 decides on an unlocked read; pass 2 (only when the heartbeat applies)
    -- locks the lease and decides again on it (ql_private.lease_open).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_open(
            v_offer_id, v_worker_id, v_session_id, p_generation, v_token_digest,
            p_lease_version, 'heartbeat', CASE v_pass WHEN 2 THEN 'lease' END,
            v_lease);
        v_lease := v_state.lease;
        IF v_state.category = 'replay' THEN
            RETURN jsonb_build_object('status', 'idempotent',
                                      'lease', ql_private.lease_projection(v_lease.id));
        ELSIF v_state.category IS NOT NULL THEN
            RETURN jsonb_build_object('status', 'conflict', 'category', v_state.category);
        END IF;
        IF v_lease.started_at IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL020',
                MESSAGE = 'illegal_transition: lease heartbeat before the starting ACK';
        END IF;
    END LOOP;

    v_now := clock_timestamp();
    UPDATE ql_private.run_leases rl
       SET expires_at = v_now + make_interval(secs => v_state.ttl),
           lease_version = rl.lease_version + 1,
           heartbeat_version = rl.lease_version + 1,
           heartbeat_at = v_now,
           updated_at = v_now
     WHERE rl.id = v_lease.id
    RETURNING rl.* INTO v_lease;
    -- The lease as just extended, with its attempt's state and the run's cancel
    -- flag as the locked read saw them (one snapshot, after the lease's lock).
    RETURN jsonb_build_object('status', 'ok', 'lease',
        ql_private.lease_answer(v_lease, (v_state.attempt).state, (v_state.run).cancel_requested));
END
$$;


ALTER FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) IS 'Extend a started, unexpired lease by the lease TTL pinned at its claim (version+1, heartbeat_at/heartbeat_version). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest, p_lease_version (required: the version the worker last saw). Fences: credential (lease.heartbeat), ql_private.lease_open (offer, worker, token digest, session/generation, live unexpired lease, lease version). {status: ok, lease: lease@v1 + cancelRequested} | idempotent (retry of the previous heartbeat: version = current-1 and current produced by a heartbeat; no write) | conflict (lease_verdict categories, lease_expired once expired, stale_lease_version) | denied. Writes: the lease row only. Locks: the lease row only (ql_private.lease_open lease). Errors: QL001 bad input (lease version NULL or < 1 included), QL020 not started. Caller: ql_worker_ingress.';


--
-- Name: heartbeat_session(text, bytea, text, text, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_denied jsonb;
    v_now timestamptz;
    v_session ql_private.worker_sessions;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, v_worker_id, 'session.heartbeat');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    v_now := clock_timestamp();
    UPDATE ql_private.worker_sessions ws
       SET expires_at = v_now + (SELECT session_ttl FROM ql_private.settings()),
           heartbeat_at = v_now
     WHERE ws.session_id = v_session_id AND ws.worker_id = v_worker_id
       AND ws.generation = p_generation AND ws.state IN ('active', 'draining')
       AND ws.expires_at > v_now
    RETURNING ws.* INTO v_session;
    IF NOT FOUND THEN
        -- Classify why (raises); reaching past it would mean the row changed
        -- between the two statements, which the fence then reports as it is now.
        v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    IF v_session.state = 'draining' THEN
        RETURN jsonb_build_object('status', 'ok', 'draining', true,
                                  'session', ql_private.session_projection(v_session));
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$$;


ALTER FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) IS 'Extend an active or draining, owned, exact-generation, unexpired session by the session TTL (a draining one: "draining": true in the envelope). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation. Fences: credential (session.heartbeat), session fence. Returns {"status":"ok","session":{...}} or denied. Writes: session expires_at/heartbeat_at, an audit row when denied. Locks: session row via UPDATE (NO KEY UPDATE). Idempotent. Errors: QL001, QL010 not found, QL011 replaced, QL013 closed, QL012 expired. Caller: ql_worker_ingress, ql.heartbeat_sessions.';


--
-- Name: heartbeat_sessions(jsonb); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.heartbeat_sessions(p_items jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_items constant integer := 64;
    v_count integer;
    v_results jsonb[];
    v_item record;
    v_one jsonb;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be a non-empty array';
    END IF;
    v_count := jsonb_array_length(p_items);
    IF v_count > v_max_items THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'at most 64 items';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_items) e WHERE jsonb_typeof(e) <> 'object') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be objects';
    END IF;
    v_results := array_fill(NULL::jsonb, ARRAY[v_count]);
    FOR v_item IN
        SELECT e.ord::integer AS ord, e.value AS item
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(value, ord)
         ORDER BY e.value ->> 'sessionId', e.ord
    LOOP
        BEGIN
            v_one := ql.heartbeat_session(
                v_item.item ->> 'credentialId',
                decode(v_item.item ->> 'secretDigest', 'hex'),
                v_item.item ->> 'workerId',
                v_item.item ->> 'sessionId',
                (v_item.item ->> 'generation')::bigint);
        EXCEPTION WHEN OTHERS THEN
            v_one := jsonb_build_object('status', 'error', 'sqlstate', SQLSTATE);
        END;
        v_results[v_item.ord] := v_one;
    END LOOP;
    RETURN to_jsonb(v_results);
END
$$;


ALTER FUNCTION ql.heartbeat_sessions(p_items jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION heartbeat_sessions(p_items jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.heartbeat_sessions(p_items jsonb) IS 'Batch of session heartbeats. Inputs: p_items, 1..64 [{credentialId, secretDigest hex, workerId, sessionId, generation}]. Returns an array (input order) of exactly what ql.heartbeat_session returns per item, or {status: error, sqlstate} for what it raised; each item in its own subtransaction (one failure affects no other item). Fences and Writes: those of ql.heartbeat_session per item. Locks: each session row (UPDATE), in sessionId order. Errors: QL001 not a non-empty array of objects, QL002 > 64 items. Caller: ql_worker_ingress.';


--
-- Name: idle_probe(); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.idle_probe() RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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


ALTER FUNCTION ql.idle_probe() OWNER TO ql_owner;

--
-- Name: FUNCTION idle_probe(); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.idle_probe() IS 'Idle view probe, one snapshot: {idle, reason candidate|truncated|unstarted_lease|null, nowMs, wakeAtMs}. idle = no dispatchable run among the first 64 ready queued (keyset head, not truncated), no scheduled run due (runs_due) and no live unstarted lease; wakeAtMs = earliest future not_before of the head or due_at of a scheduled run. Inputs: none. Fences: none. Bounded. Writes: none (zero WAL). Locks: none. Errors: none. Caller: ql_worker_ingress.';


--
-- Name: issue_credential(text, text, bytea, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint DEFAULT NULL::bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_secret_digest bytea := ql_private.require_digest(p_secret_digest, 'secretDigest');
    v_inserted text;
    v_expires_at timestamptz;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_credential_id IS NULL OR p_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    IF p_ttl_s IS NOT NULL AND p_ttl_s NOT BETWEEN 10 AND 315360000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'credentialTtlS',
            MESSAGE = 'credentialTtlS must be between 10 s and 3650 d';
    END IF;
    PERFORM 1 FROM ql_private.workers w WHERE w.id = v_worker_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_credentials AS c
           (credential_id, worker_id, secret_digest, created_at, ttl_s, expires_at)
    VALUES (p_credential_id, v_worker_id, v_secret_digest, v_now, p_ttl_s,
            v_now + make_interval(secs => p_ttl_s))
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING c.credential_id, c.expires_at INTO v_inserted, v_expires_at;
    IF v_inserted IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'credentialId already exists';
    END IF;
    RETURN jsonb_build_object('credentialId', v_inserted, 'workerId', v_worker_id,
                              'expiresAtMs', ql_private.epoch_ms(v_expires_at));
END
$_$;


ALTER FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint) IS 'Store a worker credential (id + SHA-256 of the secret, never the secret); returns {credentialId, workerId, expiresAtMs}. Inputs: p_worker_id, p_credential_id ^[a-z0-9]{16}$, p_secret_digest (32 bytes), p_ttl_s (10 s .. 3650 d, NULL = never expires). Fences: worker exists, id new. Writes: one worker_credentials row. Locks: worker row FOR KEY SHARE. Not idempotent. Errors: QL001 malformed/duplicate id or digest, QL006 ttl out of bounds, QL004 unknown worker. Caller: ql_runtime.';


--
-- Name: label_worker(text, jsonb, text[], boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb DEFAULT '{}'::jsonb, p_remove text[] DEFAULT '{}'::text[], p_self_labels boolean DEFAULT NULL::boolean) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_key_pattern constant text := '^[a-z0-9][a-z0-9._/-]{0,62}$';
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_labels jsonb := coalesce(p_labels, '{}'::jsonb);
    v_remove text[] := coalesce(p_remove, '{}'::text[]);
    v_worker ql_private.workers;
    v_key text;
    v_value jsonb;
    v_text text;
    v_granted text[] := '{}'::text[];
    v_removed text[];
    v_self_labels boolean;
    v_session ql_private.worker_sessions;
    v_drained record;
    v_draining integer := 0;
    v_released integer := 0;
    v_result jsonb;
BEGIN
    IF jsonb_typeof(v_labels) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
            MESSAGE = 'labels must be a JSON object';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(v_labels)) > 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
            MESSAGE = 'a worker has at most 32 granted labels';
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(v_labels) e ORDER BY e.key LOOP
        IF v_key !~ v_key_pattern THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels', MESSAGE = format(
                'labels: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
                quote_literal(left(regexp_replace(v_key, '[^ -~]', '?', 'g'), 64)));
        END IF;
        IF jsonb_typeof(v_value) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] must be a string', v_key);
        END IF;
        v_text := v_value #>> '{}';
        IF char_length(v_text) > 128 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] is longer than 128 characters', v_key);
        ELSIF v_text = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] must not be empty', v_key);
        ELSIF v_text ~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] contains a control or invisible character', v_key);
        END IF;
    END LOOP;
    SELECT r INTO v_key FROM unnest(v_remove) AS r
     WHERE r IS NULL OR r !~ v_key_pattern LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'remove', MESSAGE = format(
            'remove: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
            coalesce(quote_literal(left(regexp_replace(v_key, '[^ -~]', '?', 'g'), 64)), 'NULL'));
    END IF;
    SELECT r INTO v_key FROM unnest(v_remove) AS r WHERE v_labels ? r LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'remove',
            MESSAGE = format('remove: key %s is also granted in labels', quote_literal(v_key));
    END IF;

    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;

    IF (SELECT count(*) FROM (
            SELECT g.key FROM ql_private.worker_labels g
             WHERE g.worker_id = v_worker_id AND g.key <> ALL (v_remove)
            UNION
            SELECT k FROM jsonb_object_keys(v_labels) AS k) AS after_change) > 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
            MESSAGE = 'a worker has at most 32 granted labels';
    END IF;

    WITH gone AS (
        DELETE FROM ql_private.worker_labels g
         WHERE g.worker_id = v_worker_id AND g.key = ANY (v_remove)
        RETURNING g.key)
    SELECT coalesce(array_agg(gone.key ORDER BY gone.key), '{}'::text[]) INTO v_removed FROM gone;
    WITH put AS (
        INSERT INTO ql_private.worker_labels AS g (worker_id, key, value)
        SELECT v_worker_id, e.key, e.value FROM jsonb_each_text(v_labels) e
        ON CONFLICT (worker_id, key) DO UPDATE
           SET value = excluded.value, granted_at = clock_timestamp()
         WHERE g.value IS DISTINCT FROM excluded.value
        RETURNING g.key)
    SELECT coalesce(array_agg(put.key ORDER BY put.key), '{}'::text[]) INTO v_granted FROM put;
    v_self_labels := coalesce(p_self_labels, v_worker.self_labels);
    IF v_self_labels IS DISTINCT FROM v_worker.self_labels THEN
        UPDATE ql_private.workers w SET self_labels = v_self_labels WHERE w.id = v_worker_id;
    END IF;

    IF NOT v_self_labels THEN
        FOR v_session IN
            SELECT ws.* FROM ql_private.worker_sessions ws
             WHERE ws.worker_id = v_worker_id AND ws.state = 'active'
             ORDER BY ws.generation
               FOR UPDATE
        LOOP
            CONTINUE WHEN NOT EXISTS (
                SELECT 1 FROM jsonb_each_text(v_session.capabilities -> 'labels') d
                 WHERE NOT EXISTS (SELECT 1 FROM ql_private.worker_labels g
                                    WHERE g.worker_id = v_worker_id
                                      AND g.key = d.key AND g.value = d.value));
            SELECT * INTO v_drained FROM ql_private.drain_session(v_session.session_id);
            v_released := v_released + v_drained.released;
            v_draining := v_draining + 1;
        END LOOP;
    END IF;

    IF cardinality(v_granted) > 0 OR cardinality(v_removed) > 0
       OR v_self_labels IS DISTINCT FROM v_worker.self_labels OR v_draining > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.labels_changed', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'granted', to_jsonb(v_granted),
            'removed', to_jsonb(v_removed), 'selfLabels', v_self_labels,
            'sessionsDraining', v_draining, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;

    SELECT jsonb_build_object(
               'workerId', v_worker_id,
               'labels', coalesce(jsonb_object_agg(g.key, g.value), '{}'::jsonb),
               'selfLabels', v_self_labels,
               'sessionsDraining', v_draining,
               'leasesReleased', v_released)
      INTO v_result
      FROM ql_private.worker_labels g WHERE g.worker_id = v_worker_id;
    RETURN v_result;
END
$_$;


ALTER FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean) IS 'Record the labels an operator vouches for (SPEC 13.2): p_labels grants key -> value (a new value replaces the old), p_remove takes grants away, p_self_labels true/false/NULL (unchanged) accepts declared labels as they are. ql.open_session then accepts only granted labels (same key and value, byte for byte) unless self_labels. When self_labels is off after the change, each ACTIVE session whose declared labels are no longer all granted drains at once (ql_private.drain_session: no new offer, unstarted leases released session_closed, started runs may finish). One worker.labels_changed event (keys only, selfLabels, sessionsDraining, leasesReleased, actor) when anything changed. Returns {workerId, labels, selfLabels, sessionsDraining, leasesReleased}. Inputs: p_worker_id, p_labels (object, <= 32, capabilities label rules), p_remove (keys), p_self_labels. Fences: worker exists. Locks: worker row FOR NO KEY UPDATE (serializes with open_session), active sessions FOR UPDATE, drain_session''s locks. Idempotent. Errors: QL001 malformed (COLUMN workerId/labels/remove), QL002 value > 128 chars or > 32 labels (COLUMN labels), QL004 unknown worker; nothing changed on error. Caller: ql_runtime.';


--
-- Name: lease_secrets(text, bytea, text, text, bigint, text, bytea, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_denied jsonb;
    v_state record;
    v_lease ql_private.run_leases;
    v_project_id uuid;
    v_map jsonb;
    v_key ql_private.project_data_keys;
    v_secrets jsonb;
    v_found integer;
    v_names jsonb;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'lease.secrets');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    -- `heartbeat` as the change: the version must be the current one; a
    -- heartbeat's retry (answered `replay`) is no delivery either.
    v_state := ql_private.lease_open(v_offer_id, v_worker_id, v_session_id, p_generation,
                                     v_token_digest, p_lease_version, 'heartbeat');
    v_lease := v_state.lease;
    IF v_state.category = 'replay' THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'stale_lease_version');
    ELSIF v_state.category IS NOT NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', v_state.category);
    END IF;
    IF v_lease.started_at IS NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'not_started');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ql_private.workers w
                    WHERE w.id = v_lease.worker_id AND w.all_pools)
       AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                        WHERE g.worker_id = v_lease.worker_id
                          AND g.pool_id = (v_state.run).pool_id) THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'pool_revoked');
    END IF;

    SELECT tk.project_id, coalesce(er.spec -> 'secrets', '{}'::jsonb)
      INTO STRICT v_project_id, v_map
      FROM ql_private.execution_revisions er
      JOIN ql_private.tasks tk ON tk.id = er.task_id
     WHERE er.id = v_lease.execution_revision_id;
    SELECT k.* INTO v_key FROM ql_private.project_data_keys k WHERE k.project_id = v_project_id;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'env', m.key, 'name', s.name, 'version', s.version, 'keyId', s.key_id,
               'nonce', encode(s.nonce, 'hex'), 'ciphertext', encode(s.ciphertext, 'hex'))
               ORDER BY m.key COLLATE "C"), '[]'::jsonb),
           count(s.name)
      INTO v_secrets, v_found
      FROM jsonb_each_text(v_map) m
      LEFT JOIN ql_private.secrets s ON s.project_id = v_project_id AND s.name = m.value;
    IF v_found <> (SELECT count(*) FROM jsonb_object_keys(v_map)) THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'secret_missing');
    END IF;

    SELECT coalesce(jsonb_agg(x.name ORDER BY x.name COLLATE "C"), '[]'::jsonb) INTO v_names
      FROM (SELECT DISTINCT m.value AS name FROM jsonb_each_text(v_map) m) x;
    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason,
                                           detail)
    VALUES (p_credential_id, v_worker_id, 'lease.secrets', 'allowed', 'secrets_delivered',
            jsonb_build_object('runId', v_lease.run_id, 'offerId', v_lease.offer_id,
                               'names', v_names));
    RETURN jsonb_build_object(
        'status', 'ok', 'runId', v_lease.run_id, 'projectId', v_project_id,
        'dataKey', CASE WHEN v_key.project_id IS NOT NULL THEN jsonb_build_object(
            'keyId', v_key.key_id, 'kekId', v_key.kek_id,
            'nonce', encode(v_key.nonce, 'hex'),
            'wrappedKey', encode(v_key.wrapped_key, 'hex')) END,
        'secrets', v_secrets);
END
$$;


ALTER FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) IS 'The secrets of a started lease (SPEC 14.3): the run''s revision spec.secrets {ENV: name} answered as the project''s wrapped data key and each secret''s ciphertext (hex; the ingress decrypts with its KEK, never the database). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest, p_lease_version (exactly the current version; not changed). Fences: credential (lease.secrets), ql_private.lease_open (lease_verdict categories, stale_lease_version), then not_started, pool_revoked (the worker no longer holds the run''s pool), secret_missing. {status: ok, runId, projectId, dataKey {keyId, kekId, nonce, wrappedKey} | null, secrets [{env, name, version, keyId, nonce, ciphertext}]} | {status: conflict, category} | denied. Writes: one security_audit row per delivery (lease.secrets, secrets_delivered, detail {runId, offerId, names}: names only); nothing on a conflict; never the lease. Locks: none. Errors: QL001 bad input. Caller: ql_worker_ingress.';


--
-- Name: list_data_keys(); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.list_data_keys() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT jsonb_build_object('keys', coalesce(jsonb_agg(jsonb_build_object(
               'projectId', k.project_id, 'keyId', k.key_id, 'kekId', k.kek_id,
               'nonce', encode(k.nonce, 'hex'), 'wrappedKey', encode(k.wrapped_key, 'hex'))
               ORDER BY k.key_id), '[]'::jsonb))
      FROM ql_private.project_data_keys k
$$;


ALTER FUNCTION ql.list_data_keys() OWNER TO ql_owner;

--
-- Name: FUNCTION list_data_keys(); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.list_data_keys() IS 'admin secret rotate-kek (SPEC 14.1): {keys: [{projectId, keyId, kekId, nonce, wrappedKey}]} every project''s WRAPPED data key (hex), key id order. Inputs: none. Writes: none (STABLE). Locks: none. Errors: none. Caller: ql_runtime.';


--
-- Name: list_project_tokens(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.list_project_tokens(p_project text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_tokens jsonb;
BEGIN
    IF p_project IS NOT NULL AND p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'tokenId', x.id,
               'project', x.project,
               'scopes', to_jsonb(x.scopes),
               'state', CASE WHEN x.revoked_at IS NOT NULL THEN 'revoked'
                             WHEN x.expires_at <= v_now THEN 'expired'
                             ELSE 'active' END,
               'createdAtMs', ql_private.epoch_ms(x.created_at),
               'createdBy', x.created_by,
               'expiresAtMs', ql_private.epoch_ms(x.expires_at),
               'revokedAtMs', ql_private.epoch_ms(x.revoked_at))
               ORDER BY x.created_at DESC, x.id), '[]'::jsonb)
      INTO v_tokens
      FROM (SELECT t.id, p.name AS project, t.scopes, t.created_at, t.created_by,
                   t.expires_at, t.revoked_at
              FROM ql_private.project_tokens t
              JOIN ql_private.projects p ON p.id = t.project_id
             WHERE p_project IS NULL OR p.name = p_project
             ORDER BY t.created_at DESC, t.id
             LIMIT 1000) x;
    RETURN jsonb_build_object('tokens', v_tokens);
END
$_$;


ALTER FUNCTION ql.list_project_tokens(p_project text) OWNER TO ql_owner;

--
-- Name: FUNCTION list_project_tokens(p_project text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.list_project_tokens(p_project text) IS 'admin token list (SPEC 13.4): {tokens: [{tokenId, project, scopes, state (active|expired|revoked), createdAtMs, createdBy, expiresAtMs, revokedAtMs}]} newest first, at most 1000; never a digest. Inputs: p_project (NULL = all). Writes: none (STABLE). Locks: none. Errors: QL001 malformed project. Caller: ql_runtime.';


--
-- Name: list_runs(text, text[], integer, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.list_runs(p_task_id text DEFAULT NULL::text, p_states text[] DEFAULT NULL::text[], p_limit integer DEFAULT 100, p_after text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $_$
DECLARE
    v_all_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                          'succeeded', 'failed', 'cancelled'];
    v_task_id uuid;
    v_states text[];
    v_after bigint := 9223372036854775807;
    v_ids uuid[];
    v_seqs bigint[];
    v_runs jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_task_id IS NOT NULL THEN
        v_task_id := ql_private.parse_uuid(p_task_id, 'taskId');
    END IF;
    IF p_after IS NOT NULL THEN
        IF p_after !~ '^[0-9]{1,19}$' OR p_after::numeric > 9223372036854775807 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'after',
                MESSAGE = 'after must be the cursor (next) of a previous page';
        END IF;
        v_after := p_after::bigint;
    END IF;
    IF p_states IS NULL OR cardinality(p_states) = 0 THEN
        v_states := v_all_states;
    ELSE
        IF EXISTS (SELECT 1 FROM unnest(p_states) s WHERE s IS NULL OR s <> ALL (v_all_states)) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
                MESSAGE = 'state must be one of queued, dispatching, starting, running, '
                          'succeeded, failed, cancelled';
        END IF;
        v_states := ARRAY(SELECT DISTINCT s FROM unnest(p_states) s);
    END IF;

    -- Two statements rather than `task_id = x OR x IS NULL`: each keeps its
    -- own index whatever plan the function caches.
    IF v_task_id IS NULL THEN
        SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
               array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
          INTO v_ids, v_seqs
          FROM (SELECT r.id, r.queue_seq
                  FROM unnest(v_states) AS st(state)
                 CROSS JOIN LATERAL (
                       SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                        WHERE rr.state = st.state AND rr.queue_seq < v_after
                        ORDER BY rr.queue_seq DESC
                        LIMIT p_limit + 1) r
                 ORDER BY r.queue_seq DESC
                 LIMIT p_limit + 1) x;
    ELSE
        SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
               array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
          INTO v_ids, v_seqs
          FROM (SELECT r.id, r.queue_seq
                  FROM unnest(v_states) AS st(state)
                 CROSS JOIN LATERAL (
                       SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                        WHERE rr.task_id = v_task_id AND rr.state = st.state
                          AND rr.queue_seq < v_after
                        ORDER BY rr.queue_seq DESC
                        LIMIT p_limit + 1) r
                 ORDER BY r.queue_seq DESC
                 LIMIT p_limit + 1) x;
    END IF;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'runId', r.id,
               'taskId', r.task_id,
               'project', pr.name,
               'taskName', t.name,
               'pool', pr.name || '/' || pl.name,
               'state', r.state,
               'priority', r.priority,
               'queuedAtMs', ql_private.epoch_ms(r.created_at),
               'notBeforeMs', ql_private.epoch_ms(coalesce(r.due_at, a.not_before)),
               'attempts', a.attempt_no,
               'updatedAtMs', ql_private.epoch_ms(r.updated_at))
               ORDER BY o.ord), '[]'::jsonb)
      INTO v_runs
      FROM unnest(coalesce(v_ids, '{}')) WITH ORDINALITY AS o(id, ord)
      JOIN ql_private.runs r ON r.id = o.id
      JOIN ql_private.tasks t ON t.id = r.task_id
      JOIN ql_private.projects pr ON pr.id = r.project_id
      JOIN ql_private.pools pl ON pl.id = r.pool_id
      LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id
     WHERE o.ord <= p_limit;
    RETURN jsonb_build_object(
        'runs', v_runs,
        'next', CASE WHEN cardinality(v_ids) > p_limit THEN v_seqs[p_limit]::text END);
END
$_$;


ALTER FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) OWNER TO ql_owner;

--
-- Name: FUNCTION list_runs(p_task_id text, p_states text[], p_limit integer, p_after text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) IS 'One keyset page of runs, newest first (SPEC 9.4): {runs: [{runId, taskId, project, taskName, pool (P/N), state, priority, queuedAtMs, notBeforeMs, attempts, updatedAtMs}], next (opaque cursor or null)}. Inputs: p_task_id (NULL = all), p_states (NULL/empty = all), p_limit 1..1000 (default 100), p_after (cursor). Index-driven: one backward range scan per state of runs_state_seq / runs_task_state_seq, each <= limit + 1 rows, merged; no count, no OFFSET. Fences: none. Writes: none (STABLE). Locks: none. Errors: QL001 taskId/state/after malformed, QL006 limit (COLUMN = wire field). Caller: ql_readonly, ql_runtime.';


--
-- Name: list_secrets(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.list_secrets(p_project text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_secrets jsonb;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', s.name, 'version', s.version,
               'createdAtMs', ql_private.epoch_ms(s.created_at),
               'updatedAtMs', ql_private.epoch_ms(s.updated_at))
               ORDER BY s.name COLLATE "C"), '[]'::jsonb)
      INTO v_secrets
      FROM ql_private.projects p
      JOIN ql_private.secrets s ON s.project_id = p.id
     WHERE p.name = p_project;
    RETURN jsonb_build_object('project', p_project, 'secrets', v_secrets);
END
$_$;


ALTER FUNCTION ql.list_secrets(p_project text) OWNER TO ql_owner;

--
-- Name: FUNCTION list_secrets(p_project text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.list_secrets(p_project text) IS 'admin secret list (SPEC 14.1): {project, secrets: [{name, version, createdAtMs, updatedAtMs}]} in name order; never a value, ciphertext or key. Inputs: p_project (unknown: empty list). Writes: none (STABLE). Locks: none. Errors: QL001 malformed project (COLUMN project). Caller: ql_runtime.';


--
-- Name: list_workers(integer, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.list_workers(p_limit integer DEFAULT 1000, p_after text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_credentials constant integer := 100;
    v_max_pools constant integer := 100;
    v_after uuid := '00000000-0000-0000-0000-000000000000';
    v_workers jsonb;
    v_count integer;
    v_last uuid;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_after IS NOT NULL THEN
        v_after := ql_private.parse_uuid(p_after, 'after');
    END IF;

    WITH page AS MATERIALIZED (
        SELECT w.id, w.name, w.disabled_at, w.self_labels, w.all_pools
          FROM ql_private.workers w
         WHERE w.id > v_after
         ORDER BY w.id
         LIMIT p_limit + 1
    ), listed AS (
        SELECT p.*, row_number() OVER (ORDER BY p.id) AS ord FROM page p
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'workerId', x.id,
               'name', x.name,
               'disabled', x.disabled_at IS NOT NULL,
               'allPools', x.all_pools,
               'pools', coalesce((
                   SELECT jsonb_agg(g.pool ORDER BY g.pool) FILTER (WHERE g.ord <= v_max_pools)
                     FROM (SELECT pr.name || '/' || pl.name AS pool,
                                  row_number() OVER (ORDER BY gg.pool_id) AS ord
                             FROM (SELECT wg.pool_id FROM ql_private.worker_pool_grants wg
                                    WHERE wg.worker_id = x.id
                                    ORDER BY wg.pool_id
                                    LIMIT v_max_pools + 1) gg
                             JOIN ql_private.pools pl ON pl.id = gg.pool_id
                             JOIN ql_private.projects pr ON pr.id = pl.project_id) g),
                   '[]'::jsonb),
               'poolsCapped', (SELECT count(*) > v_max_pools FROM (
                                   SELECT 1 FROM ql_private.worker_pool_grants wg
                                    WHERE wg.worker_id = x.id
                                    LIMIT v_max_pools + 1) c),
               'selfLabels', x.self_labels,
               'grantedLabels', coalesce((
                   SELECT jsonb_object_agg(g.key, g.value) FROM ql_private.worker_labels g
                    WHERE g.worker_id = x.id), '{}'::jsonb),
               'credentials', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'credentialId', c.credential_id,
                              'state', CASE WHEN c.revoked_at IS NOT NULL THEN 'revoked'
                                            WHEN c.expires_at <= clock_timestamp()
                                                THEN 'expired'
                                            ELSE 'active' END)
                              ORDER BY c.created_at, c.credential_id)
                     FROM (SELECT cc.credential_id, cc.revoked_at, cc.created_at, cc.expires_at
                             FROM ql_private.worker_credentials cc
                            WHERE cc.worker_id = x.id
                            ORDER BY cc.created_at DESC, cc.credential_id DESC
                            LIMIT v_max_credentials) c), '[]'::jsonb),
               'session', (
                   SELECT jsonb_build_object(
                              'sessionId', s.session_id,
                              'generation', s.generation,
                              'state', s.state,
                              'labels', coalesce(s.capabilities -> 'labels', '{}'::jsonb),
                              'slots', s.slots,
                              'liveLeases', (SELECT count(*) FROM ql_private.run_leases l
                                              WHERE l.session_id = s.session_id
                                                AND l.released_at IS NULL),
                              'lastSeenAtMs', ql_private.epoch_ms(s.heartbeat_at))
                     FROM ql_private.worker_sessions s
                    WHERE s.worker_id = x.id AND s.state IN ('active', 'draining')
                    ORDER BY s.state = 'active' DESC, s.generation DESC
                    LIMIT 1))
               ORDER BY x.id) FILTER (WHERE x.ord <= p_limit), '[]'::jsonb),
           count(*)::integer,
           (array_agg(x.id ORDER BY x.id) FILTER (WHERE x.ord = p_limit))[1]
      INTO v_workers, v_count, v_last
      FROM listed x;
    RETURN jsonb_build_object('workers', v_workers,
                              'next', CASE WHEN v_count > p_limit THEN v_last::text END);
END
$$;


ALTER FUNCTION ql.list_workers(p_limit integer, p_after text) OWNER TO ql_owner;

--
-- Name: FUNCTION list_workers(p_limit integer, p_after text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.list_workers(p_limit integer, p_after text) IS 'Workers in id order, one keyset page (SPEC 9.4): {workers: [{workerId, name, disabled, allPools, pools (P/N, sorted, <= 100), poolsCapped, selfLabels, grantedLabels, credentials: [{credentialId, state active|revoked|expired}] (newest 100), session: {sessionId, generation, state, labels, slots, liveLeases, lastSeenAtMs} | null (the active one, else a draining one)}], next (last worker id or null)}. Never a secret or digest. Inputs: p_limit 1..1000 (default 1000), p_after (worker id cursor). Bounded index reads per worker. Fences: none. Writes: none (STABLE). Locks: none. Errors: QL001 after malformed, QL006 limit (COLUMN = wire field). Caller: ql_readonly, ql_runtime.';


--
-- Name: live_sessions(integer, text[]); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.live_sessions(p_limit integer DEFAULT 200, p_worker_ids text[] DEFAULT NULL::text[]) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_rows jsonb;
    v_count integer;
    v_ids uuid[];
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_worker_ids IS NOT NULL THEN
        IF cardinality(p_worker_ids) > 1000 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'workerIds',
                MESSAGE = 'at most 1000 worker ids';
        END IF;
        v_ids := ARRAY(SELECT ql_private.parse_uuid(w, 'workerIds') FROM unnest(p_worker_ids) w);
    END IF;
    WITH listed AS (
        SELECT s.worker_id, w.name, w.disabled_at, s.session_id, s.generation, s.state,
               s.capabilities, s.slots, s.heartbeat_at, s.expires_at
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
         WHERE s.state IN ('active', 'draining')
           AND (v_ids IS NULL OR s.worker_id = ANY (v_ids))
         ORDER BY w.name, s.session_id
         LIMIT p_limit + 1
    )
    SELECT jsonb_agg(jsonb_build_object(
               'workerId', x.worker_id,
               'worker', x.name,
               'disabled', x.disabled_at IS NOT NULL,
               'sessionId', x.session_id,
               'generation', x.generation,
               'executors', coalesce(x.capabilities -> 'executors', '[]'::jsonb),
               'labels', coalesce(x.capabilities -> 'labels', '{}'::jsonb),
               'runtimes', coalesce(x.capabilities -> 'runtimes', '{}'::jsonb),
               'slots', x.slots,
               'draining', x.state = 'draining',
               'slotsUsed', u.used,
               'slotsFree', greatest(x.slots - u.used, 0),
               'lastSeenAtMs', ql_private.epoch_ms(x.heartbeat_at),
               'expiresAtMs', ql_private.epoch_ms(x.expires_at),
               'expired', x.expires_at <= v_now)
               ORDER BY x.name, x.session_id) FILTER (WHERE x.ord <= p_limit),
           count(*)
      INTO v_rows, v_count
      FROM (SELECT l.*, row_number() OVER (ORDER BY l.name, l.session_id) AS ord
              FROM listed l) x
     CROSS JOIN LATERAL (
           SELECT count(*)::integer AS used FROM ql_private.run_leases rl
            WHERE rl.session_id = x.session_id AND rl.released_at IS NULL
              AND (rl.started_at IS NOT NULL OR rl.expires_at > v_now)) u;
    RETURN jsonb_build_object('sessions', coalesce(v_rows, '[]'::jsonb),
                              'truncated', v_count > p_limit);
END
$$;


ALTER FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) OWNER TO ql_owner;

--
-- Name: FUNCTION live_sessions(p_limit integer, p_worker_ids text[]); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) IS 'Open (active or draining) worker sessions for the console (SPEC 10): {sessions: [{workerId, worker, disabled, sessionId, generation, executors, labels, runtimes, slots, draining, slotsUsed, slotsFree, lastSeenAtMs, expiresAtMs, expired}], truncated}, by worker name, at most p_limit; with p_worker_ids only the sessions of those workers; never a secret, digest or token. Inputs: p_limit 1..1000 (default 200), p_worker_ids (NULL = all, <= 1000 ids). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 limit / workerIds count, QL001 workerIds malformed. Caller: ql_readonly, ql_runtime.';


--
-- Name: open_session(text, bytea, text, bytea); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_max_capabilities_bytes constant integer := 16384;
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_denied jsonb;
    v_capabilities jsonb;
    v_capabilities_digest text;
    v_slots integer;
    v_now timestamptz;
    v_next_generation bigint;
    v_session ql_private.worker_sessions;
    v_self_labels boolean;
    v_ungranted text;
BEGIN
    v_denied := ql_private.authenticate(
        p_credential_id, p_secret_digest, v_worker_id, 'session.open');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;

    v_capabilities := ql_private.json_object_from_bytes(
        p_capabilities_canonical, v_max_capabilities_bytes, 'capabilities');
    PERFORM ql_private.validate_capabilities(v_capabilities);
    -- validate_capabilities owns the 1..256 rule; this only guards the cast.
    IF jsonb_typeof(v_capabilities -> 'slots') IS DISTINCT FROM 'number'
       OR (v_capabilities ->> 'slots') !~ '^[0-9]{1,3}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.slots must be an integer';
    END IF;
    v_slots := (v_capabilities ->> 'slots')::integer;
    v_capabilities_digest := 'sha256:' || encode(sha256(p_capabilities_canonical), 'hex');

    SELECT w.self_labels INTO v_self_labels
      FROM ql_private.workers w WHERE w.id = v_worker_id FOR NO KEY UPDATE;
    IF NOT v_self_labels THEN
        SELECT d.key INTO v_ungranted
          FROM jsonb_each_text(v_capabilities -> 'labels') d
         WHERE NOT EXISTS (SELECT 1 FROM ql_private.worker_labels g
                            WHERE g.worker_id = v_worker_id
                              AND g.key = d.key AND g.value = d.value)
         ORDER BY d.key COLLATE "C" LIMIT 1;
        IF v_ungranted IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL016', DETAIL = v_ungranted,
                MESSAGE = 'a declared label is not granted to this worker';
        END IF;
    END IF;

    v_now := clock_timestamp();
    PERFORM 1 FROM ql_private.worker_sessions ws
     WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
       FOR UPDATE;
    -- Release the replaced sessions' unstarted leases first (they reference the
    -- sessions by id), then close the sessions themselves.
    PERFORM ql_private.release_unstarted_leases(
        ARRAY(SELECT ws.session_id FROM ql_private.worker_sessions ws
               WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'),
        'session_replaced');
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = v_now
     WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed';

    SELECT coalesce(max(ws.generation), 0) + 1 INTO v_next_generation
      FROM ql_private.worker_sessions ws WHERE ws.worker_id = v_worker_id;
    v_now := clock_timestamp();
    INSERT INTO ql_private.worker_sessions AS ws (
        worker_id, generation, state, expires_at, capabilities, capabilities_canonical,
        capabilities_digest, slots, opened_at, heartbeat_at)
    VALUES (
        v_worker_id, v_next_generation, 'active',
        v_now + (SELECT session_ttl FROM ql_private.settings()),
        v_capabilities, p_capabilities_canonical, v_capabilities_digest, v_slots, v_now, v_now)
    RETURNING ws.* INTO v_session;

    RETURN jsonb_build_object('status', 'ok', 'session', ql_private.session_projection(v_session));
END
$_$;


ALTER FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) IS 'Open a new session for a worker: validate canonical capabilities (<=16 KiB UTF-8 JSON object, validate_capabilities), replace any open session (closed; its unstarted live leases released session_replaced) and insert a new session with generation max+1. Inputs: p_credential_id, p_secret_digest, p_worker_id, p_capabilities_canonical. Fences: credential (session.open), capabilities, granted labels. Returns {"status":"ok","session":{...}} or denied. Writes: new session, replaced sessions and their released leases, an audit row when denied. Locks: worker row FOR NO KEY UPDATE, open sessions FOR UPDATE. Not idempotent. Granted labels: unless the worker has self_labels, each declared label must be granted (ql.label_worker; same key and value, byte for byte), else QL016 label_not_granted with DETAIL = the key, nothing written. Errors: QL001/QL002/QL003/QL016. Caller: ql_worker_ingress.';


--
-- Name: prepare_task(text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.prepare_task(p_project text, p_task text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_name_pattern constant text := '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    v_project_id uuid;
    v_task_id uuid;
BEGIN
    IF p_project IS NULL OR p_project !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = format('project must match %s', v_name_pattern);
    END IF;
    IF p_task IS NULL OR p_task !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'task',
            MESSAGE = format('task must match %s', v_name_pattern);
    END IF;
    SELECT tk.id INTO v_task_id
      FROM ql_private.projects p
      JOIN ql_private.tasks tk ON tk.project_id = p.id AND tk.name = p_task
     WHERE p.name = p_project;
    IF FOUND THEN
        RETURN jsonb_build_object('taskId', v_task_id, 'created', false);
    END IF;
    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    -- pool_id NULL: the project's default pool (tasks_default_pool trigger).
    INSERT INTO ql_private.tasks (project_id, name) VALUES (v_project_id, p_task)
    ON CONFLICT (project_id, name) DO NOTHING
    RETURNING id INTO v_task_id;
    IF v_task_id IS NOT NULL THEN
        RETURN jsonb_build_object('taskId', v_task_id, 'created', true);
    END IF;
    SELECT tk.id INTO STRICT v_task_id FROM ql_private.tasks tk
     WHERE tk.project_id = v_project_id AND tk.name = p_task;
    RETURN jsonb_build_object('taskId', v_task_id, 'created', false);
END
$_$;


ALTER FUNCTION ql.prepare_task(p_project text, p_task text) OWNER TO ql_owner;

--
-- Name: FUNCTION prepare_task(p_project text, p_task text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.prepare_task(p_project text, p_task text) IS 'The id of task P/T for a signed publish (SPEC 16.1), creating the project (default pool) and the task without a revision when missing; call it and ql.publish_revision in one transaction. Returns {taskId, created}. Inputs: p_project, p_task. Fences: name patterns. Writes: project/task rows when missing, nothing otherwise. Locks: none (ON CONFLICT DO NOTHING + re-read). Errors: QL001 bad name (COLUMN project/task). Caller: ql_runtime.';


--
-- Name: producer_cancel_run(text, bytea, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'cancel');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    PERFORM ql.cancel_run(p_run_id => v_run_id::text);
    RETURN ql.show_run(p_run_id => v_run_id::text);
END
$$;


ALTER FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'POST /v1/runs/{id}/cancel (SPEC 13.4): token valid, unrevoked, unexpired, scope cancel; the run of the token''s project (foreign = unknown = QL004 runId); ql.cancel_run, then returns ql.show_run''s document. Writes: as cancel_run; nothing on error. Locks: as cancel_run. Errors: QL030, QL031, QL001/QL004 runId, then cancel_run''s. Caller: ql_producer.';


--
-- Name: producer_enqueue(text, bytea, text, integer, integer, bigint, bigint, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer DEFAULT 0, p_count integer DEFAULT 1, p_not_before_ms bigint DEFAULT NULL::bigint, p_delay_ms bigint DEFAULT NULL::bigint, p_key text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'enqueue');
    v_task_id uuid := ql_private.producer_task(v_project_id, p_task);
BEGIN
    RETURN ql.enqueue_runs(p_task_id => v_task_id::text, p_priority => p_priority,
                           p_count => p_count, p_not_before_ms => p_not_before_ms,
                           p_delay_ms => p_delay_ms, p_key => p_key);
END
$$;


ALTER FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) IS 'POST /v1/runs (SPEC 13.4): token (id + digest of the whole token) valid, unrevoked, unexpired, scope enqueue; task (id or "<project>/<name>") of the token''s project, else not_found; then ql.enqueue_runs. Returns {runIds, existing}. Writes: as enqueue_runs; nothing on error. Locks: as enqueue_runs. Errors: QL030 token_invalid, QL031 scope_missing, QL001/QL004 task, then enqueue_runs'' (QL001/QL002/QL006). Caller: ql_producer.';


--
-- Name: producer_list_runs(text, bytea, text, text[], integer, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[] DEFAULT NULL::text[], p_limit integer DEFAULT 100, p_after text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'read');
    v_task_id uuid;
BEGIN
    IF p_task IS NULL THEN
        RETURN ql_private.project_runs_page(v_project_id, p_states, p_limit, p_after);
    END IF;
    v_task_id := ql_private.producer_task(v_project_id, p_task);
    RETURN ql.list_runs(p_task_id => v_task_id::text, p_states => p_states,
                        p_limit => p_limit, p_after => p_after);
END
$$;


ALTER FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text) IS 'GET /v1/runs (SPEC 13.4): token valid, unrevoked, unexpired, scope read; one task (id or "<project>/<name>") of the token''s project (foreign = unknown = QL004 task), or without one every task of the project (ql_private.project_runs_page, index runs_project_state_seq); returns the ql.list_runs page {runs, next}. Writes: none. Locks: none. Errors: QL030, QL031, QL001/QL004 task, then list_runs'' (QL001 state/after, QL006 limit). Caller: ql_producer.';


--
-- Name: producer_retry_run(text, bytea, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'retry');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    PERFORM ql.retry_run(p_run_id => v_run_id::text);
    RETURN ql.show_run(p_run_id => v_run_id::text);
END
$$;


ALTER FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'POST /v1/runs/{id}/retry (SPEC 13.4): token valid, unrevoked, unexpired, scope retry; the run of the token''s project (foreign = unknown = QL004 runId); ql.retry_run, then returns ql.show_run''s document. Writes: as retry_run; nothing on error. Locks: as retry_run. Errors: QL030, QL031, QL001/QL004 runId, then retry_run''s. Caller: ql_producer.';


--
-- Name: producer_run_log(text, bytea, text, integer, bigint, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer DEFAULT NULL::integer, p_offset bigint DEFAULT 0, p_max_bytes integer DEFAULT 1048576) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'log');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    RETURN ql.run_log(p_run_id => v_run_id, p_attempt_no => p_attempt_no,
                      p_offset => p_offset, p_max_bytes => p_max_bytes);
END
$$;


ALTER FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer) IS 'GET /v1/runs/{id}/log (SPEC 13.4, 15.3): token valid, unrevoked, unexpired, scope log; the run of the token''s project (foreign = unknown = QL004 runId); returns ql.run_log''s document {runId, attemptNumber, offset, text, storedBytes, logBytes, truncated, complete, ended} (attempt NULL = the latest). Writes: none. Locks: none. Errors: QL030, QL031, QL001/QL004 runId, then ql.run_log''s. Caller: ql_producer.';


--
-- Name: producer_show_run(text, bytea, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_project_id uuid := ql_private.producer_token(p_token_id, p_token_digest, 'read');
    v_run_id uuid := ql_private.producer_run(v_project_id, p_run_id);
BEGIN
    RETURN ql.show_run(p_run_id => v_run_id::text);
END
$$;


ALTER FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'GET /v1/runs/{id} (SPEC 13.4): token valid, unrevoked, unexpired, scope read; the run of the token''s project (foreign = unknown = QL004 runId); returns ql.show_run''s document. Writes: none. Locks: none. Errors: QL030, QL031, QL001/QL004 runId. Caller: ql_producer.';


--
-- Name: project_data_key(text, text, text, bytea, bytea); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_project_id uuid;
    v_key ql_private.project_data_keys;
    v_created boolean;
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_key_id IS NULL OR p_key_id !~ '^[a-f0-9]{32}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keyId',
            MESSAGE = 'key id must be 32 lowercase hex digits';
    END IF;
    IF p_kek_id IS NULL OR p_kek_id !~ '^[a-z0-9][a-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'kekId',
            MESSAGE = 'KEK id must match ^[a-z0-9][a-z0-9._-]{0,63}$';
    END IF;
    IF p_nonce IS NULL OR octet_length(p_nonce) <> 12 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'nonce',
            MESSAGE = 'nonce must be 12 bytes';
    END IF;
    IF p_wrapped_key IS NULL OR octet_length(p_wrapped_key) <> 48 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'wrappedKey',
            MESSAGE = 'wrapped key must be 48 bytes (AES-256 key + GCM tag)';
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.project_data_keys k WHERE k.kek_id <> p_kek_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL041', COLUMN = 'kekId',
            MESSAGE = 'kek_mismatch: the stored data keys are wrapped by another key-encryption key';
    END IF;

    INSERT INTO ql_private.projects (name) VALUES (p_project) ON CONFLICT (name) DO NOTHING;
    SELECT p.id INTO STRICT v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    INSERT INTO ql_private.project_data_keys AS k (project_id, key_id, kek_id, nonce, wrapped_key)
    VALUES (v_project_id, p_key_id, p_kek_id, p_nonce, p_wrapped_key)
    ON CONFLICT (project_id) DO NOTHING
    RETURNING k.* INTO v_key;
    v_created := FOUND;
    IF NOT v_created THEN
        SELECT k.* INTO STRICT v_key FROM ql_private.project_data_keys k
         WHERE k.project_id = v_project_id;
    END IF;
    RETURN jsonb_build_object(
        'project', p_project, 'projectId', v_project_id, 'keyId', v_key.key_id,
        'kekId', v_key.kek_id, 'nonce', encode(v_key.nonce, 'hex'),
        'wrappedKey', encode(v_key.wrapped_key, 'hex'), 'created', v_created);
END
$_$;


ALTER FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) IS 'The wrapped data key of a project''s secrets (SPEC 14.1), installed on first use: the offered key (p_key_id, p_kek_id, p_nonce, p_wrapped_key: an AES-256 key wrapped by the caller''s KEK) is stored when the project has none, else discarded; the stored one is answered. Returns {project, projectId, keyId, kekId, nonce, wrappedKey (hex), created}. Inputs: p_project, p_key_id, p_kek_id, p_nonce, p_wrapped_key. Fences: one KEK at a time (another KEK wraps stored keys: QL041 kek_mismatch). Writes: project (first use), one project_data_keys row (first key). Locks: primary key only. Errors: QL001 malformed (COLUMN project|keyId|kekId|nonce|wrappedKey), QL041. Caller: ql_runtime.';


--
-- Name: prune_audit(bigint, integer, boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer DEFAULT 1000, p_dry_run boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_retain_s constant bigint := 3153600000;
    v_max_batch constant integer := 10000;
    v_cutoff timestamptz;
    v_keep bigint;
    v_count bigint;
    v_others bigint;
BEGIN
    IF p_retain_s IS NULL OR p_retain_s NOT BETWEEN 0 AND v_max_retain_s THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retainAudit',
            MESSAGE = format('retainAudit must be between 0 and %s seconds', v_max_retain_s);
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND v_max_batch THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'batch',
            MESSAGE = format('batch must be between 1 and %s', v_max_batch);
    END IF;
    v_cutoff := clock_timestamp() - make_interval(secs => p_retain_s);
    SELECT max(a.id) INTO v_keep FROM ql_private.security_audit a
     WHERE a.action = 'audit.pruned';

    IF coalesce(p_dry_run, false) THEN
        SELECT count(*) INTO v_count
          FROM (SELECT 1 FROM ql_private.security_audit a
                 WHERE a.occurred_at < v_cutoff AND a.id IS DISTINCT FROM v_keep
                 ORDER BY a.occurred_at
                 LIMIT p_batch) x;
    ELSE
        WITH batch AS MATERIALIZED (
            SELECT a.id FROM ql_private.security_audit a
             WHERE a.occurred_at < v_cutoff AND a.id IS DISTINCT FROM v_keep
             ORDER BY a.occurred_at
             LIMIT p_batch
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM ql_private.security_audit a USING batch b WHERE a.id = b.id
            RETURNING a.action
        )
        SELECT count(*), count(*) FILTER (WHERE g.action <> 'audit.pruned')
          INTO v_count, v_others FROM gone g;
        IF v_others > 0 THEN
            INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
            VALUES ('audit.pruned', 'allowed', 'retention', session_user::text,
                    jsonb_build_object('securityAudit', v_count, 'retainS', p_retain_s,
                                       'cutoffMs', ql_private.epoch_ms(v_cutoff),
                                       'batch', p_batch));
        END IF;
    END IF;
    RETURN jsonb_build_object('securityAudit', v_count, 'more', v_count >= p_batch);
END
$$;


ALTER FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'Retention of security_audit, one batch (SPEC 9.6): rows older than now - p_retain_s, oldest first (security_audit_time), deleted; returns {securityAudit, more}. Inputs: p_retain_s 0..3153600000, p_batch 1..10000 (default 1000), p_dry_run (count only). Locks: the batch FOR UPDATE SKIP LOCKED. A call that deleted rows other than audit.pruned ones leaves one audit.pruned row (outcome allowed, reason retention, actor = session_user, detail {securityAudit, retainS, cutoffMs, batch}); the newest audit.pruned row is never deleted. Errors: QL006 retainAudit/batch (COLUMN). Caller: ql_runtime (admin prune), ql_sweeper (runtime sweep; loop while more).';


--
-- Name: prune_fleet(bigint, integer, boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer DEFAULT 1000, p_dry_run boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
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


ALTER FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'Fleet retention, one batch of each kind (SPEC 9.6): sessions closed (or lapsed) before now - p_retain_s, never one with a live lease nor a worker''s newest; placement classes nothing references (no queued or in-flight run, not a task''s current revision''s); worker.*/session.* events older than the cutoff. Returns {sessions, placementClasses, fleetEvents, more}. Inputs: p_retain_s 0..3153600000 (the run retention), p_batch 1..10000 (default 1000), p_dry_run (count only). Locks: sessions, classes, events FOR UPDATE SKIP LOCKED (claims and enqueues are skipped, never waited for); classes re-checked under their locks. Errors: QL006 retainRuns/batch (COLUMN). Caller: ql_sweeper (runtime sweep), ql_runtime (admin prune); loop while more.';


--
-- Name: prune_runs(bigint, integer, boolean); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer DEFAULT 1000, p_dry_run boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
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


ALTER FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'Retention, one batch (SPEC 9.6): terminal runs (succeeded|failed|cancelled) finished more than p_retain_s ago, oldest first, deleted with their attempts, leases, events (and idempotency keys); returns {runs, attempts, leases, events, more}. Live runs never touched. Inputs: p_retain_s 0..3153600000 (0 = all terminal), p_batch 1..10000 (default 1000), p_dry_run (count only, no delete, no lock). Index-driven (runs_terminal_finished, attempts/leases/events by run). Locks: attempt -> run -> lease (the lifecycle order): the batch''s attempts, then runs, FOR UPDATE SKIP LOCKED (a run with an attempt held elsewhere is skipped; never waits on a claim, a retry or a cancel). Errors: QL006 retainRuns/batch (COLUMN). Caller: ql_sweeper (runtime sweep), ql_runtime (admin prune); loop while more, one transaction per batch.';


--
-- Name: publish_revision(text, text, bytea, text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text DEFAULT NULL::text, p_signature text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_max_content_bytes constant integer := 98304;
    v_name_pattern constant text := '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    v_doc jsonb;
    v_spec jsonb;
    v_digest text;
    v_project_id uuid;
    v_task ql_private.tasks;
    v_current ql_private.execution_revisions;
    v_current_row record;
    v_next_revision integer;
    v_revision ql_private.execution_revisions;
    v_pool ql_private.pools;
    v_kid text;
BEGIN
    IF p_project IS NULL OR p_project !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('project must match %s', v_name_pattern);
    END IF;
    IF p_task IS NULL OR p_task !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('task must match %s', v_name_pattern);
    END IF;

    IF p_pool IS NOT NULL AND (p_pool !~ '^[^/]+/[a-z0-9][a-z0-9._-]{0,62}$'
                               OR split_part(p_pool, '/', 1) <> p_project) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
            MESSAGE = 'pool must be a pool of the task''s project: PROJECT/NAME';
    END IF;

    v_kid := ql_private.signature_kid(p_signature);

    v_doc := ql_private.json_object_from_bytes(p_canonical, v_max_content_bytes, 'content');
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_doc) k
                WHERE k NOT IN ('kind', 'executor', 'spec', 'placement'))
       OR NOT v_doc ?& ARRAY['kind', 'executor', 'spec'] THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'content keys must be kind, executor, spec and optional placement';
    END IF;
    IF v_doc -> 'kind' IS DISTINCT FROM '"qinglong/command@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'kind must be qinglong/command@v1';
    END IF;
    IF v_doc -> 'executor' IS DISTINCT FROM '"remote_worker"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'executor must be remote_worker';
    END IF;

    v_spec := v_doc -> 'spec';
    IF jsonb_typeof(v_spec) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec must be an object';
    END IF;
    IF v_spec ? 'placement' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec must not contain placement (it is a top-level key)';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_spec) k
                WHERE k NOT IN ('schema', 'argv', 'env', 'secrets', 'cwd', 'timeoutS')) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec has an unknown key';
    END IF;
    IF v_spec -> 'schema' IS DISTINCT FROM '"qinglong/command@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.schema must be qinglong/command@v1';
    END IF;
    IF jsonb_typeof(v_spec -> 'argv') IS DISTINCT FROM 'array'
       OR jsonb_array_length(v_spec -> 'argv') = 0
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_spec -> 'argv') a
                   WHERE jsonb_typeof(a) <> 'string') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec.argv must be a non-empty array of strings';
    END IF;
    IF v_spec ? 'env' AND (jsonb_typeof(v_spec -> 'env') <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(v_spec -> 'env') e
                   WHERE jsonb_typeof(e.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.env must be an object of strings';
    END IF;
    IF v_spec ? 'secrets' THEN
        PERFORM ql_private.validate_secret_refs(p_project, v_spec);
    END IF;
    IF v_spec ? 'cwd' AND jsonb_typeof(v_spec -> 'cwd') <> 'string' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.cwd must be a string';
    END IF;
    -- A JSON integer: a number whose text has no fraction/exponent, 1 .. 2^31-1.
    IF jsonb_typeof(v_spec -> 'timeoutS') IS DISTINCT FROM 'number'
       OR (v_spec ->> 'timeoutS') !~ '^[1-9][0-9]{0,9}$'
       OR (v_spec ->> 'timeoutS')::bigint > 2147483647 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec.timeoutS must be a positive integer';
    END IF;
    IF v_doc ? 'placement' THEN
        PERFORM ql_private.validate_placement(v_doc -> 'placement');
    END IF;

    v_digest := 'sha256:' || encode(sha256(p_canonical), 'hex');

    -- Fast path: identical to the current revision, in the same pool -> no write
    -- of any kind.
    SELECT er.*, pl.name AS pool_name INTO v_current_row
      FROM ql_private.projects p
      JOIN ql_private.tasks tk ON tk.project_id = p.id AND tk.name = p_task
      JOIN ql_private.pools pl ON pl.id = tk.pool_id
      JOIN ql_private.execution_revisions er ON er.id = tk.current_revision_id
     WHERE p.name = p_project;
    IF FOUND AND v_current_row.content_digest = v_digest
       AND (p_signature IS NULL OR p_signature = v_current_row.signature_jws)
       AND (p_pool IS NULL OR p_pool = p_project || '/' || v_current_row.pool_name) THEN
        RETURN jsonb_build_object('taskId', v_current_row.task_id,
            'revisionId', v_current_row.id, 'revision', v_current_row.revision,
            'contentDigest', v_current_row.content_digest, 'created', false,
            'pool', p_project || '/' || v_current_row.pool_name,
            'signatureKid', v_current_row.signature_kid);
    END IF;

    -- Create project/task on first publish. DO NOTHING + re-read: a concurrent
    -- creator wins the insert and this session reads its committed row.
    SELECT p.id INTO v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    IF NOT FOUND THEN
        INSERT INTO ql_private.projects (name) VALUES (p_project)
        ON CONFLICT (name) DO NOTHING;
        SELECT p.id INTO v_project_id FROM ql_private.projects p
         WHERE p.name = p_project;
    END IF;
    IF p_pool IS NOT NULL THEN
        SELECT pl.* INTO v_pool FROM ql_private.pools pl
         WHERE pl.project_id = v_project_id AND pl.name = split_part(p_pool, '/', 2);
        IF NOT FOUND THEN
            -- Invalid input, like another project's pool: nothing to publish into.
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
                MESSAGE = 'pool does not exist in the task''s project (admin pool create)';
        END IF;
    END IF;
    SELECT tk.* INTO v_task FROM ql_private.tasks tk
     WHERE tk.project_id = v_project_id AND tk.name = p_task
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- pool_id NULL: the project's default pool (tasks_default_pool trigger).
        INSERT INTO ql_private.tasks (project_id, name, pool_id)
        VALUES (v_project_id, p_task, v_pool.id)
        ON CONFLICT (project_id, name) DO NOTHING;
        SELECT tk.* INTO v_task FROM ql_private.tasks tk
         WHERE tk.project_id = v_project_id AND tk.name = p_task
           FOR NO KEY UPDATE;
    END IF;
    IF v_pool.id IS NOT NULL AND v_task.pool_id <> v_pool.id THEN
        UPDATE ql_private.tasks tk SET pool_id = v_pool.id WHERE tk.id = v_task.id;
        v_task.pool_id := v_pool.id;
    END IF;
    SELECT pl.* INTO STRICT v_pool FROM ql_private.pools pl WHERE pl.id = v_task.pool_id;

    -- Re-check under the task lock: a concurrent publish may have just made
    -- this very content current.
    SELECT er.* INTO v_current
      FROM ql_private.execution_revisions er WHERE er.id = v_task.current_revision_id;
    IF FOUND AND v_current.content_digest = v_digest
       AND (p_signature IS NULL OR p_signature = v_current.signature_jws) THEN
        RETURN jsonb_build_object('taskId', v_current.task_id, 'revisionId', v_current.id,
            'revision', v_current.revision, 'contentDigest', v_current.content_digest,
            'created', false, 'pool', p_project || '/' || v_pool.name,
            'signatureKid', v_current.signature_kid);
    END IF;

    SELECT coalesce(max(er.revision), 0) + 1 INTO v_next_revision
      FROM ql_private.execution_revisions er WHERE er.task_id = v_task.id;
    INSERT INTO ql_private.execution_revisions AS er (
        task_id, revision, kind, executor, spec, placement, canonical, content_digest,
        signature_kid, signature_jws)
    VALUES (
        v_task.id, v_next_revision, v_doc ->> 'kind', v_doc ->> 'executor', v_spec,
        v_doc -> 'placement', p_canonical, v_digest, v_kid, p_signature)
    RETURNING er.* INTO v_revision;
    UPDATE ql_private.tasks tk SET current_revision_id = v_revision.id WHERE tk.id = v_task.id;
    RETURN jsonb_build_object('taskId', v_revision.task_id, 'revisionId', v_revision.id,
        'revision', v_revision.revision, 'contentDigest', v_revision.content_digest,
        'created', true, 'pool', p_project || '/' || v_pool.name,
        'signatureKid', v_revision.signature_kid);
END
$_$;


ALTER FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text) OWNER TO ql_owner;

--
-- Name: FUNCTION publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text) IS 'Publish canonical {executor, kind, placement?, spec} bytes (<=96 KiB) as the task''s next execution revision; digest computed in the database; project/task created on first publish. Pool (SPEC 13.1): p_pool P/N of the same project puts/moves the task there (another project''s or a missing pool refused: QL001 COLUMN pool); NULL keeps the task''s pool (new task: P/default). Identical to the current revision in the same pool -> that revision, created=false, no writes. Signature (SPEC 16.1): p_signature, a detached compact EdDSA JWS over the RFC 8785 bytes of {taskId, kind, executor, spec, placement?}, stored with the revision (kid from its protected header), not verified (the worker verifies); identical content is deduplicated only when p_signature is NULL or equal to the stored one, otherwise a new revision (revisions never change). Returns {taskId, revisionId, revision, contentDigest, created, pool, signatureKid}. Inputs: p_project, p_task, p_canonical, p_pool, p_signature. Fences: names, content shape, signature shape (QL001 COLUMN signature), spec.secrets naming existing secrets of the project and no env name in both env and secrets (QL001 COLUMN secrets). Writes: revision + task current revision (project/task on first publish). Locks: task row FOR NO KEY UPDATE (not on the identical fast path). Errors: QL001 shape, QL002 size, QL003 SemVer. Caller: ql_runtime.';


--
-- Name: pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_bounds record := ql_private.pull_bounds(p_bounds);
    v_result jsonb;
    v_read record;
    v_session ql_private.worker_sessions;
    v_live integer;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    v_result := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'offer.pull');
    IF v_result IS NOT NULL THEN
        RETURN v_result;
    END IF;
    -- Concurrent pulls of one offer id (a retry racing its own first request,
    -- whose ingress died mid-call) serialize here, so the later one always sees
    -- the earlier one's lease and replays it. An advisory lock writes no WAL.
    PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.offer:' || v_offer_id::text, 0));
    -- The read side in ONE statement, in one snapshot taken after the advisory
    -- lock: whether the offer id exists (a replay), this worker's session row,
    -- and its live leases (started, or unstarted and unexpired) — what were
    -- three statements in three function calls.
    SELECT EXISTS (SELECT 1 FROM ql_private.run_leases l WHERE l.offer_id = v_offer_id)
               AS replay,
           ws AS session,
           (SELECT count(*)::integer FROM ql_private.run_leases l
             WHERE l.session_id = ws.session_id AND l.released_at IS NULL
               AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp())) AS live
      INTO v_read
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws
        ON ws.session_id = v_session_id AND ws.worker_id = v_worker_id;
    IF v_read.replay THEN
        v_result := ql_private.recover_offer(v_worker_id, v_session_id, p_generation,
                                             v_offer_id, v_token_digest);
        IF v_result IS NOT NULL THEN
            RETURN v_result;
        END IF;
    END IF;
    v_session := v_read.session;
    v_live := v_read.live;
    IF v_session.session_id IS NULL OR v_session.generation <> p_generation
       OR v_session.state <> 'active' OR v_session.expires_at <= clock_timestamp() THEN
        -- A fence failed: ql_private.session_fence raises the precise error, in
        -- its order (a session that became valid in between is read again).
        v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
        v_live := ql_private.session_live_leases(v_session.session_id);
    END IF;
    IF v_session.capabilities_digest
       <> 'sha256:' || encode(sha256(v_session.capabilities_canonical), 'hex') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL014',
            MESSAGE = 'stored session capabilities do not match their digest';
    END IF;
    IF v_live >= v_session.slots THEN
        RETURN ql_private.idle_result('capacity_full', 0, 0, 0, 0,
            '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
    END IF;
    RETURN ql_private.scan_and_claim(v_session, v_offer_id, v_token_digest, v_bounds.pages,
                                     v_bounds.page_size, v_bounds.claim_attempts);
END
$$;


ALTER FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb) IS 'One pull = claim or recover (SPEC 3.3). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest (SHA-256 of the lease token), p_bounds (NULL = defaults). Fences: credential first (denial audited, {status: denied}); an existing offer id is replayed or refused ({status: idempotent|conflict}); session fences; every candidate fence re-checked on the locked rows. Bounded keyset scan + placement + atomic SKIP LOCKED claim ({status: offered|idle}). Writes: only a claim (lease, run dispatching, one run.dispatched event) or a denial; idle pulls and replays write nothing. Locks: advisory lock on the offer id, session row before the first claim, run + attempt SKIP LOCKED. Errors: QL001 malformed argument, QL002 bound above cap, QL010-QL015 session fences. Caller: ql_worker_ingress.';


--
-- Name: pull_offers(text, bytea, text, text, bigint, text[], bytea[], jsonb); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_bounds record := ql_private.pull_bounds(p_bounds);
    v_count integer := coalesce(cardinality(p_offer_ids), 0);
    v_offer_ids uuid[] := '{}';
    v_digests bytea[] := '{}';
    v_result jsonb;
    v_read record;
    v_session ql_private.worker_sessions;
    v_live integer;
    v_free integer;
    v_offers jsonb[] := '{}';        -- by request position (NULL: no offer for it)
    v_conflicts jsonb := '[]'::jsonb;
    v_recovered integer := 0;        -- offers replayed, not claimed (the ingress counts them)
    v_idle jsonb;
    v_new integer[] := '{}';
    v_i integer;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF v_count < 1 OR v_count > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'offers must hold 1 to 16 entries';
    END IF;
    IF coalesce(cardinality(p_token_digests), 0) <> v_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'tokenDigests must be indexed like offerIds';
    END IF;
    FOR v_i IN 1 .. v_count LOOP
        v_offer_ids := v_offer_ids || ql_private.parse_uuid(p_offer_ids[v_i], 'offerId');
        v_digests := v_digests || ql_private.require_digest(p_token_digests[v_i], 'tokenDigest');
    END LOOP;
    IF (SELECT count(DISTINCT o) FROM unnest(v_offer_ids) o) <> v_count THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'offer ids must be distinct';
    END IF;
    v_result := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'offer.pull');
    IF v_result IS NOT NULL THEN
        RETURN v_result;
    END IF;
    -- The single pull's lock per offer id (a retry racing its own first request
    -- waits for it), taken in one order so overlapping batches cannot deadlock.
    PERFORM pg_advisory_xact_lock(hashtextextended('qinglong.offer:' || o::text, 0))
       FROM unnest(v_offer_ids) o ORDER BY o;
    SELECT ARRAY(SELECT l.offer_id FROM ql_private.run_leases l
                  WHERE l.offer_id = ANY (v_offer_ids)) AS replays,
           ws AS session,
           (SELECT count(*)::integer FROM ql_private.run_leases l
             WHERE l.session_id = ws.session_id AND l.released_at IS NULL
               AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp())) AS live
      INTO v_read
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws
        ON ws.session_id = v_session_id AND ws.worker_id = v_worker_id;
    FOR v_i IN 1 .. v_count LOOP
        IF v_offer_ids[v_i] = ANY (v_read.replays) THEN
            v_result := ql_private.recover_offer(v_worker_id, v_session_id, p_generation,
                                                 v_offer_ids[v_i], v_digests[v_i]);
            IF v_result ->> 'status' = 'idempotent' THEN
                v_offers[v_i] := v_result -> 'offer';
                v_recovered := v_recovered + 1;
            ELSE
                v_conflicts := v_conflicts || jsonb_build_array(jsonb_build_object(
                    'offerId', v_offer_ids[v_i], 'category', v_result ->> 'category'));
            END IF;
        ELSE
            v_new := v_new || v_i;
        END IF;
    END LOOP;
    IF cardinality(v_new) > 0 THEN
        v_session := v_read.session;
        v_live := v_read.live;
        IF v_session.session_id IS NULL OR v_session.generation <> p_generation
           OR v_session.state <> 'active' OR v_session.expires_at <= clock_timestamp() THEN
            v_session := ql_private.session_fence(v_worker_id, v_session_id, p_generation, false);
            v_live := ql_private.session_live_leases(v_session.session_id);
        END IF;
        IF v_session.capabilities_digest
           <> 'sha256:' || encode(sha256(v_session.capabilities_canonical), 'hex') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL014',
                MESSAGE = 'stored session capabilities do not match their digest';
        END IF;
        v_free := v_session.slots - v_live;
        IF v_free <= 0 THEN
            v_idle := ql_private.idle_result('capacity_full', 0, 0, 0, 0,
                '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
        END IF;
        FOREACH v_i IN ARRAY v_new LOOP
            EXIT WHEN v_idle IS NOT NULL;
            IF v_free <= 0 THEN
                -- Every free slot was filled by this batch: the rest waits.
                v_idle := ql_private.idle_result('capacity_full', 0, 0, 0, 0,
                    '{"executor":0,"label":0,"runtime":0,"capacity":1}'::jsonb, false);
                EXIT;
            END IF;
            v_result := ql_private.scan_and_claim(v_session, v_offer_ids[v_i], v_digests[v_i],
                                                  v_bounds.pages, v_bounds.page_size,
                                                  v_bounds.claim_attempts);
            IF v_result ->> 'status' = 'offered' THEN
                v_offers[v_i] := v_result -> 'offer';
                v_free := v_free - 1;
            ELSE
                v_idle := v_result - 'status';
            END IF;
        END LOOP;
    END IF;
    RETURN jsonb_build_object('status', 'batch',
                              'offers', coalesce((SELECT jsonb_agg(o ORDER BY n)
                                                    FROM unnest(v_offers) WITH ORDINALITY AS u(o, n)
                                                   WHERE o IS NOT NULL), '[]'::jsonb),
                              'conflicts', v_conflicts, 'idle', v_idle,
                              'recovered', v_recovered);
END
$$;


ALTER FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb) IS 'Batched pull (SPEC 18.1): 1-16 (offer id, token digest) pairs of one session, each claimed or recovered by the rules of a single pull (SPEC 3.3). Inputs: p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation, p_offer_ids (distinct), p_token_digests (SHA-256 of each lease token, indexed alike), p_bounds (per claim; NULL = defaults). One credential check (denial audited, {status: denied}); advisory locks on the offer ids in id order; one read of replays + session + live leases; each existing id replayed or refused (recover_offer); for new ids the session fences once, then at most free-slots claims (scan_and_claim: session row locked and slots re-counted before each claim, candidate fences on the locked rows), the first idle answer ending the batch. Returns {status: batch, offers: [...], conflicts: [{offerId, category}], idle: null | {reason, stats, truncated}, recovered: number of offers replayed}. Writes: only claims or a denial; idle batches and replays write nothing. Locks: advisory locks on the offer ids, session row before a claim, run + attempt SKIP LOCKED. Errors: QL001 malformed argument, QL002 bound above cap, QL010-QL015 session fences. Caller: ql_worker_ingress.';


--
-- Name: queue_depth(); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.queue_depth() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_cap constant integer := 1000;
    v_priority_limit constant integer := 16;
    v_task_limit constant integer := 20;
    v_task_scan_cap constant integer := 1000;
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_priorities jsonb;
    v_scheduled jsonb;
    v_tasks jsonb;
    v_with_runs integer;
    v_tasks_capped boolean;
BEGIN
    -- The ready priorities (ql_private.ready_priorities: one index descent
    -- each); a priority's rows are a key range written as row comparisons (as
    -- status_snapshot and candidate_page do), so each count stays an index
    -- range scan.
    WITH listed AS (
        SELECT neg FROM ql_private.ready_priorities(v_priority_limit) AS neg
    ), per AS (
        SELECT -l.neg AS priority,
               (SELECT count(*) FROM (
                    SELECT 1 FROM ql_private.runs r
                     WHERE (-(r.priority::integer), r.queue_seq, r.id)
                           >= (l.neg, -9223372036854775808, v_nil)
                       AND (-(r.priority::integer), r.queue_seq, r.id)
                           < (l.neg + 1, -9223372036854775808, v_nil)
                       AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                       AND r.due_at IS NULL
                     ORDER BY -(r.priority::integer), r.queue_seq, r.id
                     LIMIT v_cap + 1) y) AS runs,
               -- Waiting since it became ready: greatest(created_at, its current
               -- attempt's not_before) (a retry, a promoted scheduled run).
               (SELECT greatest(r.created_at,
                                (SELECT a.not_before FROM ql_private.attempts a
                                  WHERE a.id = r.current_attempt_id))
                  FROM ql_private.runs r
                 WHERE (-(r.priority::integer), r.queue_seq, r.id)
                       >= (l.neg, -9223372036854775808, v_nil)
                   AND (-(r.priority::integer), r.queue_seq, r.id)
                       < (l.neg + 1, -9223372036854775808, v_nil)
                   AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1) AS oldest
          FROM listed l
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'priority', per.priority,
               'runs', least(per.runs, v_cap),
               'capped', per.runs > v_cap,
               'oldestWaitingAgeMs',
                   greatest(floor(extract(epoch FROM v_now - per.oldest) * 1000), 0)::bigint)
               ORDER BY per.priority DESC), '[]'::jsonb)
      INTO v_priorities
      FROM per;

    -- Scheduled runs: the cap + 1 due soonest (runs_due), their priorities.
    WITH soonest AS MATERIALIZED (
        SELECT r.priority, r.due_at FROM ql_private.runs r
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NOT NULL
         ORDER BY r.due_at
         LIMIT v_cap + 1
    ), per AS (
        SELECT s.priority, count(*) AS runs FROM soonest s GROUP BY s.priority
    )
    SELECT jsonb_build_object(
               'runs', least((SELECT count(*) FROM soonest), v_cap),
               'capped', (SELECT count(*) FROM soonest) > v_cap,
               'nextDueAtMs', ql_private.epoch_ms((SELECT min(s.due_at) FROM soonest s)),
               'byPriority', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                                 'priority', p.priority,
                                                 'runs', least(p.runs, v_cap))
                                             ORDER BY p.priority DESC)
                                         FROM per p), '[]'::jsonb))
      INTO v_scheduled;

    WITH depth AS (
        SELECT t.id, t.name, pr.name AS project, pr.name || '/' || pl.name AS pool,
               -- ORDER BY in index order: the planner stays on the index range.
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                       ORDER BY r.task_id, r.state, r.queue_seq
                                       LIMIT v_cap + 1) y) AS queued,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'dispatching'
                                       ORDER BY r.task_id, r.state, r.queue_seq
                                       LIMIT v_cap + 1) y) AS dispatching,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                         AND r.due_at IS NULL
                                       ORDER BY r.task_id, r.due_at
                                       LIMIT v_cap + 1) y) AS ready,
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.task_id = t.id AND r.state = 'queued'
                                         AND r.due_at IS NOT NULL
                                       ORDER BY r.task_id, r.due_at
                                       LIMIT v_cap + 1) y) AS scheduled
          FROM (SELECT tt.* FROM ql_private.tasks tt ORDER BY tt.id
                 LIMIT v_task_scan_cap) t
          JOIN ql_private.projects pr ON pr.id = t.project_id
          JOIN ql_private.pools pl ON pl.id = t.pool_id
    ), ranked AS (
        SELECT d.*, row_number() OVER (ORDER BY least(d.queued, v_cap) + least(d.dispatching, v_cap)
                                                DESC, d.project, d.name) AS rank
          FROM depth d
         WHERE d.queued + d.dispatching > 0
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'taskId', x.id, 'project', x.project, 'task', x.name, 'pool', x.pool,
               'queued', least(x.queued, v_cap),
               'ready', least(x.ready, v_cap), 'readyCapped', x.ready > v_cap,
               'scheduled', least(x.scheduled, v_cap), 'scheduledCapped', x.scheduled > v_cap,
               'dispatching', least(x.dispatching, v_cap),
               'capped', x.queued > v_cap OR x.dispatching > v_cap)
               ORDER BY x.rank) FILTER (WHERE x.rank <= v_task_limit), '[]'::jsonb),
           count(*)
      INTO v_tasks, v_with_runs
      FROM ranked x;

    v_tasks_capped := EXISTS (SELECT 1 FROM ql_private.tasks tt ORDER BY tt.id
                               OFFSET v_task_scan_cap LIMIT 1);
    RETURN jsonb_build_object('byPriority', v_priorities, 'scheduled', v_scheduled,
                              'byTask', v_tasks,
                              'tasksWithRuns', v_with_runs, 'cap', v_cap,
                              'tasksExamined', least(v_task_scan_cap, (SELECT count(*) FROM (
                                  SELECT 1 FROM ql_private.tasks tt
                                   LIMIT v_task_scan_cap) y)),
                              'tasksCapped', v_tasks_capped);
END
$$;


ALTER FUNCTION ql.queue_depth() OWNER TO ql_owner;

--
-- Name: FUNCTION queue_depth(); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.queue_depth() IS 'Queue depth for the console (SPEC 10): {byPriority: [{priority, runs, capped, oldestWaitingAgeMs}] (ready runs, <= 16 priorities by a loose index scan of runs_candidate_keyset), scheduled: {runs, capped, nextDueAtMs, byPriority: [{priority, runs}]} (scheduled runs not yet promoted: the 1000 + 1 due soonest of runs_due), byTask: [{taskId, project, task, pool (P/N), queued, ready, readyCapped, scheduled, scheduledCapped, dispatching, capped}] (20 deepest of the first 1000 tasks by id, runs_task_state_seq and runs_task_queued_due), tasksWithRuns, cap, tasksExamined, tasksCapped}; oldestWaitingAgeMs from greatest(created_at, current attempt not_before); every count stops at 1000. Inputs: none. Fences: none. Writes: none (STABLE). Locks: none. Errors: none. Caller: ql_readonly, ql_runtime.';


--
-- Name: recent_denials(integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.recent_denials(p_limit integer DEFAULT 20) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_scan_cap constant integer := 10000;
    v_window constant interval := interval '24 hours';
    v_rows jsonb;
    v_found integer;
    v_scanned integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 100';
    END IF;
    WITH recent AS (
        SELECT a.id, a.occurred_at, a.action, a.reason, a.worker_id, a.credential_id, a.outcome
          FROM ql_private.security_audit a
         WHERE a.occurred_at > clock_timestamp() - v_window
         ORDER BY a.occurred_at DESC
         LIMIT v_scan_cap
    ), denied AS (
        SELECT d.*, row_number() OVER (ORDER BY d.occurred_at DESC, d.id DESC) AS ord
          FROM recent d WHERE d.outcome = 'denied'
    )
    SELECT (SELECT jsonb_agg(jsonb_build_object(
                   'atMs', ql_private.epoch_ms(d.occurred_at),
                   'action', d.action,
                   'reason', d.reason,
                   'workerId', d.worker_id,
                   'credentialId', d.credential_id) ORDER BY d.ord)
              FROM denied d WHERE d.ord <= p_limit),
           (SELECT count(*) FROM denied),
           (SELECT count(*) FROM recent)
      INTO v_rows, v_found, v_scanned;
    RETURN jsonb_build_object(
        'denials', coalesce(v_rows, '[]'::jsonb),
        'windowS', extract(epoch FROM v_window)::integer,
        'scanned', v_scanned,
        'capped', v_scanned >= v_scan_cap AND v_found < p_limit);
END
$$;


ALTER FUNCTION ql.recent_denials(p_limit integer) OWNER TO ql_owner;

--
-- Name: FUNCTION recent_denials(p_limit integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.recent_denials(p_limit integer) IS 'Latest authentication denials for the console (SPEC 10): {denials: [{atMs, action, reason, workerId, credentialId}], windowS, scanned, capped}, newest first, of the last 24 h, reading at most 10000 audit rows (security_audit_time); no secret, digest or token exists there. Inputs: p_limit 1..100 (default 20). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 limit. Caller: ql_readonly, ql_runtime.';


--
-- Name: record_auth_denial(text, text, text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    IF p_action IS NULL OR p_action !~ '^[a-z][a-z0-9_.]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'action must match ^[a-z][a-z0-9_.]{0,63}$';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'reason must match ^[a-z][a-z0-9_]{0,63}$';
    END IF;
    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason)
    VALUES (
        CASE WHEN p_credential_id ~ '^[a-z0-9]{16}$' THEN p_credential_id END,
        CASE WHEN p_worker_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
             THEN p_worker_id::uuid END,
        p_action,
        'denied',
        p_reason);
END
$_$;


ALTER FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) OWNER TO ql_owner;

--
-- Name: FUNCTION record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) IS 'Store an ingress-decided denial (missing_credential, malformed_credential, identity_mismatch, ...) in security_audit. Inputs: p_credential_id (kept only if well-formed), p_worker_id (kept only if a canonical UUID), p_action, p_reason. Fences: none. Writes: one security_audit row. Locks: none. Not idempotent (each call is an audit fact). Errors: QL001 malformed action/reason. Caller: ql_worker_ingress.';


--
-- Name: record_certificate(text, text, bigint); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_serial text := ql_private.certificate_serial(p_serial);
    v_not_after timestamptz;
    v_existing ql_private.worker_certificates;
BEGIN
    IF p_not_after_ms IS NULL OR p_not_after_ms <= 0 OR p_not_after_ms > 253402300799999 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'notAfterMs',
            MESSAGE = 'notAfterMs must be a positive epoch millisecond before year 10000';
    END IF;
    v_not_after := to_timestamp(p_not_after_ms / 1000.0);
    PERFORM 1 FROM ql_private.workers w WHERE w.id = v_worker_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId',
            MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_certificates (serial, worker_id, not_after)
    VALUES (v_serial, v_worker_id, v_not_after)
    ON CONFLICT ON CONSTRAINT worker_certificates_pkey DO NOTHING;
    IF FOUND THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.certificate_issued', v_worker_id,
                jsonb_build_object('serial', v_serial,
                                   'notAfterMs', ql_private.epoch_ms(v_not_after),
                                   'actor', session_user));
    ELSE
        SELECT * INTO v_existing FROM ql_private.worker_certificates c
         WHERE c.serial = v_serial;
        IF v_existing.worker_id <> v_worker_id OR v_existing.not_after <> v_not_after THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
                MESSAGE = 'serial already recorded for another certificate';
        END IF;
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'serial', v_serial,
                              'notAfterMs', ql_private.epoch_ms(v_not_after));
END
$$;


ALTER FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) IS 'Record a worker client certificate the control plane issued (SPEC 16.3); returns {workerId, serial (canonical), notAfterMs}. Inputs: p_worker_id, p_serial (hex any case, colons optional), p_not_after_ms > 0. Fences: worker exists; serial new or the same certificate. Writes: a worker_certificates row and a worker.certificate_issued event (first time only). Locks: worker row FOR KEY SHARE. Idempotent for the same certificate. Errors: QL001 malformed or conflicting serial, QL004 unknown worker. Caller: ql_runtime.';


--
-- Name: register_worker(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.register_worker(p_name text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_worker_id uuid;
BEGIN
    -- Same pattern as the table CHECK, checked first so the caller gets QL001.
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    INSERT INTO ql_private.workers AS w (name) VALUES (p_name)
    RETURNING w.id INTO v_worker_id;
    RETURN jsonb_build_object('workerId', v_worker_id);
END
$_$;


ALTER FUNCTION ql.register_worker(p_name text) OWNER TO ql_owner;

--
-- Name: FUNCTION register_worker(p_name text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.register_worker(p_name text) IS 'Create a worker; returns {workerId}. Inputs: p_name. Fences: none. Writes: one workers row. Locks: none. Not idempotent. Errors: QL001 bad name. Caller: ql_runtime.';


--
-- Name: retry_run(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.retry_run(p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
    v_attempt_id uuid;
    v_run ql_private.runs;
    v_attempt ql_private.attempts;
    v_locked record;
    v_next_id uuid := gen_random_uuid();
    v_next_no integer;
    v_now timestamptz;
BEGIN
    v_locked := ql_private.lock_run_attempt(v_run_id);  -- attempt -> run
    v_run := v_locked.run;
    v_attempt := v_locked.attempt;
    IF v_run.id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    v_attempt_id := v_attempt.id;

    IF v_run.state NOT IN ('failed', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020', COLUMN = 'runId',
            MESSAGE = format('illegal_transition: a %s run cannot be retried '
                             '(only failed or cancelled runs)', v_run.state);
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.run_leases l
                WHERE l.attempt_id = v_attempt_id AND l.released_at IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020', COLUMN = 'runId',
            MESSAGE = 'illegal_transition: the run still holds a live lease';
    END IF;
    -- A disabled task refuses new work (SPEC §9.1), a retry's attempt included.
    IF NOT (SELECT tk.enabled FROM ql_private.tasks tk WHERE tk.id = v_run.task_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL022', COLUMN = 'taskId',
            MESSAGE = 'task_disabled: the run''s task is disabled (enable it to retry)';
    END IF;

    SELECT coalesce(max(a.attempt_no), 0) + 1 INTO v_next_no
      FROM ql_private.attempts a WHERE a.run_id = v_run_id;
    v_now := clock_timestamp();
    INSERT INTO ql_private.attempts (
        id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
        max_attempts, retry_base_ms, retry_cap_ms)
    SELECT v_next_id, v_run_id, v_next_no, coalesce(v_attempt.executor, 'remote_worker'),
           'claimed', v_now, v_now, v_now, tk.max_attempts, tk.retry_base_ms, tk.retry_cap_ms
      FROM ql_private.tasks tk WHERE tk.id = v_run.task_id;
    UPDATE ql_private.runs rr
       SET state = 'queued', current_attempt_id = v_next_id, cancel_requested = false,
           finished_at = NULL, due_at = NULL, updated_at = v_now,
           -- looked up again (not kept): ql.prune_fleet may have removed an
           -- unused class since the run ended; this re-creates it.
           placement_class = ql_private.placement_class_of(rr.execution_revision_id)
     WHERE rr.id = v_run_id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.retried', v_run_id, v_next_id, jsonb_strip_nulls(jsonb_build_object(
        'attemptId', v_next_id,
        'attemptNo', v_next_no,
        'previousAttemptId', v_attempt_id,
        'previousState', v_run.state,
        'actor', session_user)));
    RETURN jsonb_build_object('runId', v_run_id, 'attemptId', v_next_id,
                              'attemptNo', v_next_no, 'state', 'queued');
END
$$;


ALTER FUNCTION ql.retry_run(p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION retry_run(p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.retry_run(p_run_id text) IS 'Operator retry (SPEC 9.5): a failed or cancelled run gets a new claimed attempt (highest attempt_no + 1, not_before now) and is queued at once (cancel_requested reset, finished_at/due_at NULL), one run.retried event naming the actor (session_user); returns {runId, attemptId, attemptNo, state: queued}. Inputs: p_run_id. Fences: run failed|cancelled, no live lease, task enabled. Writes: attempt, run, event; nothing when refused. Locks: current attempt FOR UPDATE, then run FOR NO KEY UPDATE (lock_run_attempt, the lifecycle order). Errors: QL001 malformed, QL004 unknown run (COLUMN runId), QL020 illegal_transition, QL022 task_disabled (COLUMN taskId). Caller: ql_runtime.';


--
-- Name: revoke_certificate(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.revoke_certificate(p_serial text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_serial text := ql_private.certificate_serial(p_serial);
    v_revoked_at timestamptz;
    v_worker_id uuid;
    v_new boolean := true;
BEGIN
    INSERT INTO ql_private.certificate_revocations AS r (serial, revoked_by)
    VALUES (v_serial, left(session_user::text, 63))
    ON CONFLICT ON CONSTRAINT certificate_revocations_pkey DO NOTHING
    RETURNING r.revoked_at INTO v_revoked_at;
    IF v_revoked_at IS NULL THEN
        v_new := false;
        SELECT r.revoked_at INTO v_revoked_at FROM ql_private.certificate_revocations r
         WHERE r.serial = v_serial;
    END IF;
    UPDATE ql_private.worker_certificates c SET revoked_at = v_revoked_at
     WHERE c.serial = v_serial AND c.revoked_at IS NULL
    RETURNING c.worker_id INTO v_worker_id;
    IF v_worker_id IS NOT NULL THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.certificate_revoked', v_worker_id,
                jsonb_build_object('serial', v_serial, 'actor', session_user));
    ELSE
        SELECT c.worker_id INTO v_worker_id FROM ql_private.worker_certificates c
         WHERE c.serial = v_serial;
    END IF;
    IF v_new THEN
        PERFORM pg_notify('ql_certificates', v_serial);
    END IF;
    RETURN jsonb_build_object(
        'serial', v_serial,
        'workerId', v_worker_id,
        'revokedAtMs', ql_private.epoch_ms(v_revoked_at),
        'revoked', v_new);
END
$$;


ALTER FUNCTION ql.revoke_certificate(p_serial text) OWNER TO ql_owner;

--
-- Name: FUNCTION revoke_certificate(p_serial text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.revoke_certificate(p_serial text) IS 'Revoke a worker client certificate by serial (SPEC 16.3); returns {serial (canonical lowercase hex), workerId (null for a serial the control plane never issued), revokedAtMs, revoked (false: it already was)}. Inputs: p_serial, hex any case, colons optional. Fences: none. Writes (first time only): a certificate_revocations row, worker_certificates.revoked_at, a worker.certificate_revoked event for a known certificate, NOTIFY ql_certificates at commit. Locks: the revocation and certificate rows. Idempotent. Errors: QL001 (COLUMN serial) malformed. Caller: ql_runtime.';


--
-- Name: revoke_credential(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.revoke_credential(p_credential_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_revoked_at timestamptz;
BEGIN
    IF p_credential_id IS NULL OR p_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credentialId must match ^[a-z0-9]{16}$';
    END IF;
    UPDATE ql_private.worker_credentials c
       SET revoked_at = clock_timestamp()
     WHERE c.credential_id = p_credential_id AND c.revoked_at IS NULL
    RETURNING c.revoked_at INTO v_revoked_at;
    IF NOT FOUND THEN
        SELECT c.revoked_at INTO v_revoked_at FROM ql_private.worker_credentials c
         WHERE c.credential_id = p_credential_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'credential not found';
        END IF;
    END IF;
    RETURN jsonb_build_object(
        'credentialId', p_credential_id,
        'revokedAtMs', ql_private.epoch_ms(v_revoked_at));
END
$_$;


ALTER FUNCTION ql.revoke_credential(p_credential_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION revoke_credential(p_credential_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.revoke_credential(p_credential_id text) IS 'Revoke a worker credential; returns {credentialId, revokedAtMs}. Inputs: p_credential_id. Fences: credential exists. Writes: revoked_at the first time. Locks: the credential row. Idempotent (a second call returns the first revokedAtMs, writes nothing). Errors: QL001 malformed id, QL004 unknown. Caller: ql_runtime.';


--
-- Name: revoke_pool(text, text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_worker ql_private.workers;
    v_pool ql_private.pools;
    v_session_id uuid;
    v_revoked boolean;
    v_released integer := 0;
BEGIN
    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;
    IF p_pool = '*' THEN
        v_revoked := v_worker.all_pools;
        IF v_revoked THEN
            UPDATE ql_private.workers w SET all_pools = false WHERE w.id = v_worker_id;
        END IF;
    ELSE
        v_pool := ql_private.pool_of(p_pool);
        DELETE FROM ql_private.worker_pool_grants g
         WHERE g.worker_id = v_worker_id AND g.pool_id = v_pool.id;
        v_revoked := FOUND;
    END IF;
    FOR v_session_id IN
        SELECT ws.session_id FROM ql_private.worker_sessions ws
         WHERE ws.worker_id = v_worker_id AND ws.state <> 'closed'
         ORDER BY ws.generation
           FOR UPDATE
    LOOP
        v_released := v_released + ql_private.release_ungranted_leases(v_session_id);
    END LOOP;
    IF v_revoked OR v_released > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.pool_revoked', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'pool', p_pool, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'pool', p_pool, 'revoked', v_revoked,
                              'leasesReleased', v_released);
END
$$;


ALTER FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) OWNER TO ql_owner;

--
-- Name: FUNCTION revoke_pool(p_worker_id text, p_pool text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) IS 'Revoke a worker''s grant of pool P/N (or the all-pools grant, ''*''; SPEC 13.1): no new offer of the pool from the commit on; its unstarted leases of pools it no longer holds released at once (grant_revoked, runs re-queued); started ones may finish. Returns {workerId, pool, revoked, leasesReleased}. Inputs: p_worker_id, p_pool. Fences: worker and pool exist. Writes: grant row (or all_pools), released leases, runs -> queued, one worker.pool_revoked event (workerId, pool, leasesReleased, actor) when anything changed. Locks: worker row FOR NO KEY UPDATE, open sessions FOR UPDATE (waits for a claim in flight), attempt -> run -> lease per lease. Idempotent. Errors: QL001 malformed (COLUMN workerId|pool), QL004 unknown worker or pool. Caller: ql_runtime.';


--
-- Name: revoke_project_token(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.revoke_project_token(p_token_id text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_token ql_private.project_tokens;
    v_revoked boolean := false;
BEGIN
    IF p_token_id IS NULL OR p_token_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'tokenId',
            MESSAGE = 'token id must be 16 characters [a-z0-9]';
    END IF;
    UPDATE ql_private.project_tokens t SET revoked_at = clock_timestamp()
     WHERE t.id = p_token_id AND t.revoked_at IS NULL
    RETURNING t.* INTO v_token;
    v_revoked := FOUND;
    IF NOT v_revoked THEN
        SELECT t.* INTO v_token FROM ql_private.project_tokens t WHERE t.id = p_token_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'tokenId',
                MESSAGE = 'token not found';
        END IF;
    END IF;
    RETURN jsonb_build_object(
        'tokenId', v_token.id,
        'project', (SELECT p.name FROM ql_private.projects p WHERE p.id = v_token.project_id),
        'revokedAtMs', ql_private.epoch_ms(v_token.revoked_at),
        'revoked', v_revoked);
END
$_$;


ALTER FUNCTION ql.revoke_project_token(p_token_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION revoke_project_token(p_token_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.revoke_project_token(p_token_id text) IS 'admin token revoke (SPEC 13.4): set revoked_at (the token is refused from the next producer call on). Returns {tokenId, project, revokedAtMs, revoked (false when already revoked)}. Inputs: p_token_id. Writes: the token row (once). Locks: the token row. Idempotent. Errors: QL001 malformed, QL004 unknown (COLUMN tokenId). Caller: ql_runtime.';


--
-- Name: revoked_certificates(bigint, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_result jsonb;
BEGIN
    IF p_after_seq IS NULL OR p_after_seq < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'afterSeq',
            MESSAGE = 'afterSeq must be >= 0';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 10000';
    END IF;
    SELECT jsonb_build_object(
               'serials', coalesce(jsonb_agg(page.serial ORDER BY page.seq), '[]'::jsonb),
               'lastSeq', coalesce(max(page.seq), p_after_seq))
      INTO v_result
      FROM (SELECT r.serial, r.seq FROM ql_private.certificate_revocations r
             WHERE r.seq > p_after_seq ORDER BY r.seq LIMIT p_limit) page;
    RETURN v_result;
END
$$;


ALTER FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) OWNER TO ql_owner;

--
-- Name: FUNCTION revoked_certificates(p_after_seq bigint, p_limit integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) IS 'Revoked certificate serials after a sequence number, oldest first (SPEC 16.3): {serials, lastSeq} (lastSeq = p_after_seq when none). Inputs: p_after_seq >= 0, p_limit 1..10000. Writes: nothing. Locks: none. Errors: QL001 out-of-range arguments. Caller: ql_worker_ingress.';


--
-- Name: rewrap_data_keys(text, text, jsonb); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_kek_pattern constant text := '^[a-z0-9][a-z0-9._-]{0,63}$';
    v_stored integer;
    v_count integer;
BEGIN
    IF p_old_kek_id IS NULL OR p_old_kek_id !~ v_kek_pattern
       OR p_new_kek_id IS NULL OR p_new_kek_id !~ v_kek_pattern
       OR p_old_kek_id = p_new_kek_id THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'kekId',
            MESSAGE = 'KEK ids must match ^[a-z0-9][a-z0-9._-]{0,63}$ and differ';
    END IF;
    IF jsonb_typeof(p_keys) IS DISTINCT FROM 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_keys) e
                   WHERE jsonb_typeof(e) <> 'object'
                      OR (SELECT count(*) FROM jsonb_object_keys(e)) <> 3
                      OR coalesce(e ->> 'keyId', '') !~ '^[a-f0-9]{32}$'
                      OR coalesce(e ->> 'nonce', '') !~ '^[a-f0-9]{24}$'
                      OR coalesce(e ->> 'wrappedKey', '') !~ '^[a-f0-9]{96}$')
       OR (SELECT count(DISTINCT e ->> 'keyId') FROM jsonb_array_elements(p_keys) e)
          <> jsonb_array_length(p_keys) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keys',
            MESSAGE = 'keys must be [{keyId, nonce, wrappedKey}] (hex), each key once';
    END IF;

    PERFORM 1 FROM ql_private.project_data_keys k ORDER BY k.key_id FOR UPDATE;
    IF EXISTS (SELECT 1 FROM ql_private.project_data_keys k WHERE k.kek_id <> p_old_kek_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL041', COLUMN = 'kekId',
            MESSAGE = 'kek_mismatch: a stored data key is not wrapped by the old key-encryption key';
    END IF;
    SELECT count(*) INTO v_stored FROM ql_private.project_data_keys;
    UPDATE ql_private.project_data_keys k
       SET kek_id = p_new_kek_id, nonce = decode(e ->> 'nonce', 'hex'),
           wrapped_key = decode(e ->> 'wrappedKey', 'hex'), updated_at = clock_timestamp()
      FROM jsonb_array_elements(p_keys) e
     WHERE k.key_id = e ->> 'keyId';
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count <> v_stored OR v_count <> jsonb_array_length(p_keys) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL040', COLUMN = 'keys',
            MESSAGE = 'secret_conflict: the stored data keys changed since they were read';
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.rotate_kek', 'allowed', 'kek_rotated', session_user,
            jsonb_build_object('oldKekId', p_old_kek_id, 'kekId', p_new_kek_id,
                               'keys', v_count));
    RETURN jsonb_build_object('oldKekId', p_old_kek_id, 'kekId', p_new_kek_id,
                              'rewrapped', v_count);
END
$_$;


ALTER FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) IS 'admin secret rotate-kek (SPEC 14.1): replace the wrap of every project data key in one transaction (the data keys and ciphertexts stay). Inputs: p_old_kek_id, p_new_kek_id (differ), p_keys [{keyId, nonce, wrappedKey}] (hex), exactly the stored keys. Fences: every stored key wrapped by p_old_kek_id (else QL041 kek_mismatch), p_keys = the stored keys (else QL040 secret_conflict, nothing written). Returns {oldKekId, kekId, rewrapped}. Writes: every project_data_keys row, one security_audit row (secret.rotate_kek, actor). Locks: every project_data_keys row FOR UPDATE. Errors: QL001 malformed (COLUMN kekId|keys), QL040, QL041. Caller: ql_runtime.';


--
-- Name: rotate_credential(text, bytea, text, text, bytea); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_new_digest bytea := ql_private.require_digest(p_new_secret_digest, 'newSecretDigest');
    v_denied jsonb;
    v_old ql_private.worker_credentials;
    v_new ql_private.worker_credentials;
    v_now timestamptz;
BEGIN
    IF p_new_credential_id IS NULL OR p_new_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'newCredentialId',
            MESSAGE = 'newCredentialId must match ^[a-z0-9]{16}$';
    END IF;
    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'credential.rotate');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;
    SELECT * INTO v_old FROM ql_private.worker_credentials c
     WHERE c.credential_id = p_credential_id FOR UPDATE;
    v_now := clock_timestamp();
    IF v_old.revoked_at IS NOT NULL OR (v_old.expires_at IS NOT NULL AND v_old.expires_at <= v_now) THEN
        -- Revoked or retired while this call waited for the row lock: refuse it as
        -- authenticate would now (one audit row).
        RETURN ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                       'credential.rotate');
    END IF;
    UPDATE ql_private.worker_credentials c SET revoked_at = v_now
     WHERE c.rotated_from = p_credential_id AND c.first_used_at IS NULL
       AND c.revoked_at IS NULL;
    INSERT INTO ql_private.worker_credentials AS c
           (credential_id, worker_id, secret_digest, created_at, ttl_s, expires_at,
            rotated_from)
    VALUES (p_new_credential_id, v_worker_id, v_new_digest, v_now, v_old.ttl_s,
            v_now + make_interval(secs => v_old.ttl_s), p_credential_id)
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING * INTO v_new;
    IF v_new.credential_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'newCredentialId',
            MESSAGE = 'newCredentialId already exists';
    END IF;
    UPDATE ql_private.worker_credentials c
       SET expires_at = least(coalesce(c.expires_at, 'infinity'), v_now + interval '24 hours')
     WHERE c.credential_id = p_credential_id
    RETURNING * INTO v_old;
    INSERT INTO ql_private.events (type, worker_id, payload)
    VALUES ('worker.credential_rotated', v_worker_id,
            jsonb_build_object('credentialId', v_new.credential_id,
                               'previousCredentialId', p_credential_id));
    PERFORM pg_notify('ql_dispatch', 'c:' || p_credential_id);
    RETURN jsonb_build_object('status', 'ok', 'credential', jsonb_build_object(
        'workerId', v_worker_id,
        'credentialId', v_new.credential_id,
        'issuedAtMs', ql_private.epoch_ms(v_new.created_at),
        'expiresAtMs', ql_private.epoch_ms(v_new.expires_at),
        'previousCredentialId', p_credential_id,
        'previousExpiresAtMs', ql_private.epoch_ms(v_old.expires_at)));
END
$_$;


ALTER FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) IS 'A worker rotates its own credential (SPEC 16.2). Inputs: the presented credential (id, SHA-256 of the secret), the certificate''s worker, the new id and the SHA-256 of the new secret. Fences: ql_private.authenticate (credential.rotate). Returns {"status":"ok", credential: {workerId, credentialId, issuedAtMs, expiresAtMs, previousCredentialId, previousExpiresAtMs}} or the denial envelope. Writes: the new credential (same ttl, rotated_from), the old one expires at most 24 h from now (at once on the new one''s first use), an unused earlier successor revoked, a worker.credential_rotated event, NOTIFY c:<old>. Locks: the presented credential FOR UPDATE. Not idempotent (a retry revokes the unused successor). Errors: QL001 malformed input or existing new id. Caller: ql_worker_ingress.';


--
-- Name: run_log(uuid, integer, bigint, integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer DEFAULT NULL::integer, p_offset bigint DEFAULT 0, p_max_bytes integer DEFAULT 1048576) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_page constant integer := 16777216;
    v_attempt ql_private.attempts;
    v_log ql_private.attempt_logs;
    v_stored bigint;
    v_end bigint;
    v_bytes bytea;
    v_cut integer;
    v_log_bytes jsonb;
    v_ended boolean;
BEGIN
    IF p_run_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'runId', MESSAGE = 'runId is required';
    END IF;
    IF p_attempt_no < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'attempt',
            MESSAGE = 'attempt must be an integer >= 1';
    END IF;
    IF p_max_bytes IS NULL OR p_max_bytes NOT BETWEEN 4 AND v_max_page THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'maxBytes',
            MESSAGE = format('maxBytes must be between 4 and %s', v_max_page);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ql_private.runs r WHERE r.id = p_run_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    SELECT a.* INTO v_attempt FROM ql_private.attempts a
     WHERE a.run_id = p_run_id AND (p_attempt_no IS NULL OR a.attempt_no = p_attempt_no)
     ORDER BY a.attempt_no DESC LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'attempt',
            MESSAGE = 'the run has no such attempt';
    END IF;
    SELECT lg.* INTO v_log FROM ql_private.attempt_logs lg WHERE lg.attempt_id = v_attempt.id;
    v_stored := coalesce(v_log.stored_bytes, 0);
    IF p_offset IS NULL OR p_offset NOT BETWEEN 0 AND v_stored THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'offset',
            MESSAGE = format('offset must be between 0 and the stored length (%s)', v_stored);
    END IF;
    -- One byte past the page (when stored) tells whether the page ends inside
    -- a character: then it is cut back to that character's first byte.
    v_end := least(v_stored, p_offset + p_max_bytes + 1);
    v_bytes := ql_private.log_bytes(v_attempt.id, p_offset, v_end);
    IF octet_length(v_bytes) > 0 AND (get_byte(v_bytes, 0) & 192) = 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'offset',
            MESSAGE = 'offset is inside a character (not at a character boundary)';
    END IF;
    IF octet_length(v_bytes) > p_max_bytes THEN
        v_cut := p_max_bytes;
        WHILE v_cut > 0 AND (get_byte(v_bytes, v_cut) & 192) = 128 LOOP
            v_cut := v_cut - 1;
        END LOOP;
        v_bytes := substring(v_bytes FROM 1 FOR v_cut);
    END IF;
    v_log_bytes := v_attempt.result -> 'logBytes';
    IF jsonb_typeof(v_log_bytes) IS DISTINCT FROM 'number' THEN
        v_log_bytes := 'null'::jsonb;
    END IF;
    v_ended := v_attempt.state IN ('succeeded', 'failed', 'cancelled', 'lost');
    RETURN jsonb_build_object(
        'runId', p_run_id,
        'attemptNumber', v_attempt.attempt_no,
        'offset', p_offset,
        'text', convert_from(v_bytes, 'UTF8'),
        'storedBytes', v_stored,
        'logBytes', v_log_bytes,
        'truncated', coalesce(v_log.truncated, false),
        'complete', v_ended AND v_log_bytes <> 'null'::jsonb
                    AND v_stored = (v_log_bytes #>> '{}')::bigint,
        'ended', v_ended);
END
$$;


ALTER FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) OWNER TO ql_owner;

--
-- Name: FUNCTION run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) IS 'One page of an attempt''s live log (SPEC 15.3): {runId, attemptNumber (p_attempt_no, NULL = latest), offset, text (stored bytes from p_offset, at most p_max_bytes, whole UTF-8 characters), storedBytes, logBytes (result.logBytes of the completion; null while running or when not reported), truncated (cap reached, SPEC 15.2), complete (ended AND logBytes reported AND storedBytes = logBytes; a truncated log is not complete), ended (attempt succeeded|failed|cancelled|lost)}. Index-driven, one snapshot. Inputs: p_run_id, p_attempt_no >= 1 | NULL, p_offset 0..storedBytes at a character boundary, p_max_bytes 4..16777216. Writes: none. Locks: none. Errors: QL001 NULL run (COLUMN runId), QL004 unknown run (runId) or attempt (attempt), QL006 attempt < 1 (attempt), offset (offset), maxBytes (maxBytes). Caller: ql_readonly, ql_runtime, ql.producer_run_log.';


--
-- Name: run_state_counts(); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.run_state_counts() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_cap constant integer := 1000;
    v_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                      'succeeded', 'failed', 'cancelled'];
    v_rows jsonb;
BEGIN
    WITH counted AS (
        SELECT st.state, st.ord,
               -- ORDER BY in index order keeps the planner on the index: a
               -- LIMIT alone lets it pick a sequential scan that expects the
               -- state's rows spread evenly, while the newest states (queued,
               -- running) sit at the table's end.
               (SELECT count(*) FROM (SELECT 1 FROM ql_private.runs r
                                       WHERE r.state = st.state
                                       ORDER BY r.state, r.queue_seq
                                       LIMIT v_cap + 1) x) AS runs
          FROM unnest(v_states) WITH ORDINALITY AS st(state, ord)
    ), stats AS (
        -- pg_stats' most_common_vals is anyarray: read it through its text form.
        SELECT v.state, v.freq
          FROM pg_catalog.pg_stats s
         CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs)
               AS v(state, freq)
         WHERE s.schemaname = 'ql_private' AND s.tablename = 'runs' AND s.attname = 'state'
    )
    SELECT jsonb_agg(jsonb_build_object(
               'state', c.state,
               'runs', least(c.runs, v_cap),
               'capped', c.runs > v_cap,
               'estimate', CASE WHEN c.runs > v_cap THEN
                   (SELECT greatest((st.freq * cl.reltuples)::bigint, v_cap + 1)
                      FROM stats st, pg_catalog.pg_class cl
                     WHERE st.state = c.state
                       AND cl.oid = 'ql_private.runs'::pg_catalog.regclass) END)
               ORDER BY c.ord)
      INTO v_rows
      FROM counted c;
    RETURN jsonb_build_object('states', v_rows, 'cap', v_cap);
END
$$;


ALTER FUNCTION ql.run_state_counts() OWNER TO ql_owner;

--
-- Name: FUNCTION run_state_counts(); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.run_state_counts() IS 'Runs per state for the console (SPEC 10): {states: [{state, runs, capped, estimate}], cap}; exact up to 1000 per state (index-only scans of runs_state_seq stopping at cap + 1), past it the planner estimate (pg_stats frequency x reltuples). Inputs: none. Fences: none. Writes: none (STABLE). Locks: none. Errors: none. Caller: ql_readonly, ql_runtime.';


--
-- Name: set_secret(text, text, integer, text, bytea, bytea); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_key ql_private.project_data_keys;
    v_row ql_private.secrets;
    v_now timestamptz := clock_timestamp();
BEGIN
    IF p_project IS NULL OR p_project !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'project',
            MESSAGE = 'project must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_.-]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'name',
            MESSAGE = 'secret name must match ^[a-z][a-z0-9_.-]{0,63}$';
    END IF;
    IF p_version IS NULL OR p_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'version',
            MESSAGE = 'version must be an integer >= 1';
    END IF;
    IF p_nonce IS NULL OR octet_length(p_nonce) <> 12 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'nonce',
            MESSAGE = 'nonce must be 12 bytes';
    END IF;
    IF p_ciphertext IS NULL OR octet_length(p_ciphertext) NOT BETWEEN 8 + 16 AND 16384 + 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'value',
            MESSAGE = 'a secret value is 8 bytes to 16 KiB';
    END IF;
    SELECT k.* INTO v_key
      FROM ql_private.projects p
      JOIN ql_private.project_data_keys k ON k.project_id = p.id
     WHERE p.name = p_project;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'project',
            MESSAGE = 'the project has no data key (ql.project_data_key first)';
    END IF;
    IF p_key_id IS DISTINCT FROM v_key.key_id THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'keyId',
            MESSAGE = 'key id is not the project''s data key';
    END IF;

    INSERT INTO ql_private.secrets AS s (project_id, name, version, key_id, nonce, ciphertext,
                                         created_at, updated_at)
    VALUES (v_key.project_id, p_name, p_version, p_key_id, p_nonce, p_ciphertext, v_now, v_now)
    ON CONFLICT (project_id, name) DO UPDATE
       SET version = EXCLUDED.version, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
           ciphertext = EXCLUDED.ciphertext, updated_at = EXCLUDED.updated_at
     WHERE s.version = EXCLUDED.version - 1
    RETURNING s.* INTO v_row;
    -- No row: the stored version is not p_version - 1. A row created just now
    -- with p_version > 1: the secret did not exist (raising undoes the insert).
    IF NOT FOUND OR (v_row.created_at = v_now AND p_version <> 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL040', COLUMN = 'version',
            MESSAGE = 'secret_conflict: the secret changed since its version was read';
    END IF;
    INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
    VALUES ('secret.set', 'allowed', 'secret_set', session_user,
            jsonb_build_object('project', p_project, 'name', p_name, 'version', p_version));
    RETURN jsonb_build_object('project', p_project, 'name', v_row.name,
                              'version', v_row.version,
                              'createdAtMs', ql_private.epoch_ms(v_row.created_at),
                              'updatedAtMs', ql_private.epoch_ms(v_row.updated_at));
END
$_$;


ALTER FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) IS 'admin secret set (SPEC 14.1): store version p_version of a secret, encrypted by the caller under the project''s data key (AES-256-GCM, AAD project id/name/version/key id); the database never sees the value. Inputs: p_project, p_name (^[a-z][a-z0-9_.-]{0,63}$), p_version (1 for a new secret, else current + 1), p_key_id (the project''s data key), p_nonce (12 bytes), p_ciphertext (24..16400 bytes: 8 B - 16 KiB + tag). Fences: data key exists and is p_key_id; version is the next one. Returns {project, name, version, createdAtMs, updatedAtMs}. Writes: the secrets row, one security_audit row (secret.set, actor, detail {project, name, version}). Locks: the secret row. Errors: QL001 malformed, QL002 size (COLUMN value), QL004 no data key, QL040 secret_conflict (version moved). Caller: ql_runtime.';


--
-- Name: show_run(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.show_run(p_run_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_max_attempts constant integer := 200;
    v_max_events constant integer := 200;
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
    v_run ql_private.runs;
    v_current ql_private.attempts;
    v_attempts jsonb;
    v_events jsonb;
    v_project text;
    v_task_name text;
    v_pool text;
BEGIN
    SELECT r.* INTO v_run FROM ql_private.runs r WHERE r.id = v_run_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    SELECT a.* INTO v_current FROM ql_private.attempts a WHERE a.id = v_run.current_attempt_id;
    SELECT pr.name, t.name, pr.name || '/' || pl.name INTO v_project, v_task_name, v_pool
      FROM ql_private.tasks t, ql_private.projects pr, ql_private.pools pl
     WHERE t.id = v_run.task_id AND pr.id = v_run.project_id AND pl.id = v_run.pool_id;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'attemptId', a.id,
               'number', a.attempt_no,
               'state', a.state,
               'workerId', l.worker_id,
               'sessionId', l.session_id,
               'claimedAtMs', ql_private.epoch_ms(l.claimed_at),
               'startedAtMs', ql_private.epoch_ms(l.started_at),
               'finishedAtMs', ql_private.epoch_ms(a.finished_at),
               'exitCode', a.exit_code,
               'reason', a.reason,
               'result', a.result)
               ORDER BY a.attempt_no), '[]'::jsonb)
      INTO v_attempts
      FROM (SELECT aa.* FROM ql_private.attempts aa
             WHERE aa.run_id = v_run_id
             ORDER BY aa.attempt_no DESC
             LIMIT v_max_attempts) a
      LEFT JOIN LATERAL (
            SELECT ll.worker_id, ll.session_id, ll.claimed_at, ll.started_at
              FROM ql_private.run_leases ll
             WHERE ll.attempt_id = a.id
             ORDER BY ll.lease_generation DESC
             LIMIT 1) l ON true;

    SELECT coalesce(jsonb_agg(
               e.payload || jsonb_build_object(
                   'type', e.type,
                   'atMs', ql_private.epoch_ms(e.created_at),
                   'attemptId', coalesce(to_jsonb(e.attempt_id), e.payload -> 'attemptId'))
               ORDER BY e.id), '[]'::jsonb)
      INTO v_events
      FROM (SELECT ee.id, ee.type, ee.attempt_id, ee.payload, ee.created_at
              FROM ql_private.events ee
             WHERE ee.run_id = v_run_id
             ORDER BY ee.id DESC
             LIMIT v_max_events) e;

    RETURN jsonb_build_object(
        'run', jsonb_build_object(
            'runId', v_run.id,
            'taskId', v_run.task_id,
            'projectId', v_run.project_id,
            'project', v_project,
            'taskName', v_task_name,
            'pool', v_pool,
            'state', v_run.state,
            'priority', v_run.priority,
            'queuedAtMs', ql_private.epoch_ms(v_run.created_at),
            'notBeforeMs', ql_private.epoch_ms(coalesce(v_run.due_at, v_current.not_before)),
            'attempts', v_current.attempt_no,
            'updatedAtMs', ql_private.epoch_ms(v_run.updated_at),
            'finishedAtMs', ql_private.epoch_ms(v_run.finished_at),
            'cancelRequested', v_run.cancel_requested,
            'executionRevisionId', v_run.execution_revision_id,
            'key', v_run.idempotency_key),
        'attempts', v_attempts,
        'events', v_events);
END
$$;


ALTER FUNCTION ql.show_run(p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION show_run(p_run_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.show_run(p_run_id text) IS 'One run in detail (SPEC 9.4): {run: {runId, taskId, projectId, project, taskName, pool (P/N), state, priority, queuedAtMs, notBeforeMs, attempts, updatedAtMs, finishedAtMs, cancelRequested, executionRevisionId, key}, attempts: [{attemptId, number, state, workerId, sessionId, claimedAtMs, startedAtMs, finishedAtMs, exitCode, reason, result}] (number order, latest 200, worker/session of the latest lease), events: [{type, atMs, ...payload, attemptId}] (oldest first, latest 200)}. No token, secret or digest. Inputs: p_run_id. Fences: none. Writes: none (STABLE). Locks: none. Errors: QL001 malformed, QL004 unknown run (COLUMN runId). Caller: ql_readonly, ql_runtime.';


--
-- Name: status_snapshot(); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.status_snapshot() RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $$
DECLARE
    v_total_cap constant integer := 100000;
    v_group_cap constant integer := 10000;
    v_priority_limit constant integer := 64;
    v_task_limit constant integer := 50;
    v_session_limit constant integer := 50;
    v_denial_cap constant integer := 100000;
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_runs bigint;
    v_estimate bigint;
    v_priorities jsonb;
    v_oldest timestamptz;
    v_tasks jsonb;
    v_task_rest jsonb;
    v_sessions jsonb;
    v_session_totals jsonb;
    v_leases jsonb;
    v_denials jsonb;
BEGIN
    -- Counts stop at a cap: an index scan in key order with LIMIT cap + 1 (the
    -- ORDER BY keeps the planner on the index instead of a bitmap scan of a
    -- whole priority range). Past the cap the planner's count of the partial
    -- index (kept fresh by the queue tables' autovacuum, 0002) is the estimate.
    SELECT count(*) INTO v_runs
      FROM (SELECT 1 FROM ql_private.runs r
             WHERE r.state IN ('queued', 'dispatching') AND r.runtime_owned
               AND NOT r.cancel_requested
             ORDER BY -(r.priority::integer), r.queue_seq, r.id
             LIMIT v_total_cap + 1) x;
    IF v_runs > v_total_cap THEN
        SELECT greatest(c.reltuples::bigint, v_total_cap + 1) INTO v_estimate
          FROM pg_catalog.pg_class c
         WHERE c.oid = 'ql_private.runs_candidate_keyset'::pg_catalog.regclass;
    END IF;

    -- Loose index scan: one descent of runs_candidate_keyset per distinct priority.
    -- A priority's rows are a key range written as row comparisons (as in
    -- candidate_page): an equality on the expression would be estimated at 0.5 %
    -- of the table and planned as a bitmap scan of the whole priority.
    WITH RECURSIVE prio(neg) AS (
        SELECT (SELECT -(r.priority::integer)
                  FROM ql_private.runs r
                 WHERE r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
        UNION ALL
        SELECT (SELECT -(r.priority::integer)
                  FROM ql_private.runs r
                 WHERE -(r.priority::integer) > p.neg
                   AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
          FROM prio p
         WHERE p.neg IS NOT NULL
    ), per AS (
        SELECT -p.neg AS priority,
               (SELECT count(*)
                  FROM (SELECT 1 FROM ql_private.runs r
                         WHERE (-(r.priority::integer), r.queue_seq, r.id)
                               >= (p.neg, -9223372036854775808, v_nil)
                           AND (-(r.priority::integer), r.queue_seq, r.id)
                               < (p.neg + 1, -9223372036854775808, v_nil)
                           AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                           AND NOT r.cancel_requested
                         ORDER BY -(r.priority::integer), r.queue_seq, r.id
                         LIMIT v_group_cap + 1) y) AS runs,
               (SELECT r.created_at FROM ql_private.runs r
                 WHERE (-(r.priority::integer), r.queue_seq, r.id)
                       >= (p.neg, -9223372036854775808, v_nil)
                   AND (-(r.priority::integer), r.queue_seq, r.id)
                       < (p.neg + 1, -9223372036854775808, v_nil)
                   AND r.state IN ('queued', 'dispatching') AND r.runtime_owned
                   AND NOT r.cancel_requested AND r.state = 'queued'
                   -- A run scheduled for later is not waiting (yet).
                   AND (r.due_at IS NULL OR r.due_at <= v_now)
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1) AS oldest
          FROM prio p
         WHERE p.neg IS NOT NULL
         LIMIT v_priority_limit
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'priority', per.priority, 'runs', least(per.runs, v_group_cap),
               'capped', per.runs > v_group_cap,
               'oldestWaitingAgeMs', CASE WHEN per.oldest IS NOT NULL THEN
                   floor(extract(epoch FROM v_now - per.oldest) * 1000)::bigint END)
               ORDER BY per.priority DESC), '[]'::jsonb),
           min(per.oldest)
      INTO v_priorities, v_oldest
      FROM per;

    WITH depth AS (
        SELECT t.id, t.name, pr.name AS project, c.runs
          FROM ql_private.tasks t
          JOIN ql_private.projects pr ON pr.id = t.project_id
         CROSS JOIN LATERAL (
               SELECT count(*) AS runs
                 FROM (SELECT 1 FROM ql_private.runs r
                        WHERE r.task_id = t.id AND r.state IN ('queued', 'dispatching')
                        LIMIT v_group_cap + 1) y) c
         WHERE c.runs > 0
    ), ranked AS (
        SELECT d.*, row_number() OVER (ORDER BY d.runs DESC, d.project, d.name) AS rank
          FROM depth d
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'taskId', x.id, 'project', x.project, 'task', x.name,
               'runs', least(x.runs, v_group_cap), 'capped', x.runs > v_group_cap)
               ORDER BY x.rank) FILTER (WHERE x.rank <= v_task_limit), '[]'::jsonb),
           jsonb_build_object(
               'tasks', count(*) FILTER (WHERE x.rank > v_task_limit),
               'runs', coalesce(sum(least(x.runs, v_group_cap))
                                    FILTER (WHERE x.rank > v_task_limit), 0))
      INTO v_tasks, v_task_rest
      FROM ranked x;

    WITH live AS (
        SELECT l.session_id,
               count(*) FILTER (WHERE l.started_at IS NOT NULL OR l.expires_at > v_now) AS used
          FROM ql_private.run_leases l
         WHERE l.released_at IS NULL
         GROUP BY l.session_id
    ), active AS (
        SELECT s.*, w.name AS worker_name, coalesce(live.used, 0) AS used
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
          LEFT JOIN live ON live.session_id = s.session_id
         WHERE s.state = 'active'
    ), listed AS (
        SELECT a.* FROM active a ORDER BY a.heartbeat_at, a.worker_name, a.session_id
         LIMIT v_session_limit
    )
    SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'workerId', x.worker_id, 'worker', x.worker_name,
                   'sessionId', x.session_id, 'generation', x.generation,
                   'slots', x.slots, 'slotsUsed', x.used,
                   'slotsFree', greatest(x.slots - x.used, 0),
                   'labels', coalesce(x.capabilities -> 'labels', '{}'::jsonb),
                   'runtimes', coalesce(x.capabilities -> 'runtimes', '{}'::jsonb),
                   'lastHeartbeatAgeMs',
                       floor(extract(epoch FROM v_now - x.heartbeat_at) * 1000)::bigint,
                   'expiresInMs', floor(extract(epoch FROM x.expires_at - v_now) * 1000)::bigint)
                   ORDER BY x.heartbeat_at, x.worker_name, x.session_id), '[]'::jsonb)
              FROM listed x),
           (SELECT jsonb_build_object(
                   'active', count(*),
                   'expired', count(*) FILTER (WHERE a.expires_at <= v_now),
                   'slots', coalesce(sum(a.slots), 0),
                   'slotsUsed', coalesce(sum(a.used), 0),
                   'truncated', count(*) > v_session_limit)
              FROM active a)
      INTO v_sessions, v_session_totals;

    SELECT jsonb_build_object(
               'unstarted', count(*) FILTER (WHERE l.started_at IS NULL AND l.expires_at > v_now),
               'started', count(*) FILTER (WHERE l.started_at IS NOT NULL AND l.expires_at > v_now),
               'expiredUnstarted',
                   count(*) FILTER (WHERE l.started_at IS NULL AND l.expires_at <= v_now),
               'expiredStarted',
                   count(*) FILTER (WHERE l.started_at IS NOT NULL AND l.expires_at <= v_now))
      INTO v_leases
      FROM ql_private.run_leases l
     WHERE l.released_at IS NULL;

    WITH recent AS (
        SELECT a.reason, a.outcome
          FROM ql_private.security_audit a
         WHERE a.occurred_at > v_now - interval '1 hour'
         ORDER BY a.occurred_at DESC
         LIMIT v_denial_cap + 1
    ), denied AS (
        SELECT d.reason, count(*) AS n FROM recent d WHERE d.outcome = 'denied' GROUP BY d.reason
    )
    SELECT jsonb_build_object(
               'windowS', 3600,
               'total', coalesce((SELECT sum(n) FROM denied), 0),
               'byReason', coalesce((SELECT jsonb_object_agg(reason, n ORDER BY reason) FROM denied),
                                    '{}'::jsonb),
               'capped', (SELECT count(*) FROM recent) > v_denial_cap)
      INTO v_denials;

    RETURN jsonb_build_object(
        'generatedAtMs', floor(extract(epoch FROM v_now) * 1000)::bigint,
        'queue', jsonb_build_object(
            'runs', least(v_runs, v_total_cap),
            'capped', v_runs > v_total_cap,
            'estimate', v_estimate,
            'offered', (v_leases ->> 'unstarted')::bigint,
            'waiting', greatest(least(v_runs, v_total_cap) - (v_leases ->> 'unstarted')::bigint, 0),
            'oldestWaitingAgeMs', CASE WHEN v_oldest IS NOT NULL THEN
                floor(extract(epoch FROM v_now - v_oldest) * 1000)::bigint END,
            'byPriority', v_priorities,
            'byTask', v_tasks,
            'otherTasks', v_task_rest,
            'taskLimit', v_task_limit),
        'sessions', v_session_totals || jsonb_build_object('list', v_sessions,
                                                           'listLimit', v_session_limit),
        'leases', v_leases,
        'denials', v_denials,
        'notificationQueueUsage', pg_catalog.pg_notification_queue_usage(),
        -- SPEC §16.3: credentials and certificates expiring within 14 days.
        'expiring', ql.expiring_identities(1209600, 20));
END
$$;


ALTER FUNCTION ql.status_snapshot() OWNER TO ql_owner;

--
-- Name: FUNCTION status_snapshot(); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.status_snapshot() IS 'Operator snapshot (qinglong status): queue depth (capped index scans of runs_candidate_keyset, 100000 total / 10000 per group, planner estimate past the cap) by priority and top 50 tasks, oldest waiting run, active sessions (50 listed) with slot use, live leases by state, denials of the last hour by reason (<= 100000 rows read). Inputs: none. Fences: none. Writes: none. Locks: none. Errors: none. Caller: ql_readonly, ql_runtime.';


--
-- Name: sweep_leases(integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.sweep_leases(p_batch integer DEFAULT 500) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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


ALTER FUNCTION ql.sweep_leases(p_batch integer) OWNER TO ql_owner;

--
-- Name: FUNCTION sweep_leases(p_batch integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.sweep_leases(p_batch integer) IS 'Lease expiry, one bounded batch of live leases past expires_at. Inputs: p_batch 1..5000 (default 500). Locks: leases FOR UPDATE SKIP LOCKED, then attempt/run SKIP LOCKED too (never waits, safe on many replicas). Unstarted: released expired, run dispatching -> queued (attempt stays claimed). Started: attempt lost, lease released lost, attempt.lost, retry policy (run.retry_scheduled | run.failed | run.cancelled when cancel requested). Then promotes up to p_batch scheduled runs that came due (runs_due, SKIP LOCKED): due_at := NULL, into the candidate keysets. Returns {expired, lost, retried, failed, cancelled, skipped, promoted, more}. Fences: each lease re-checked on its locked row. Writes: leases, attempts, runs, events of the batch. Errors: QL001 batch < 1, QL002 batch > 5000. Caller: ql_sweeper (runtime sweep), ql_runtime.';


--
-- Name: task_settings(text); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.task_settings(p_task_id text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_task_id uuid := ql_private.parse_uuid(p_task_id, 'taskId');
    v_task ql_private.tasks;
BEGIN
    SELECT tk.* INTO v_task FROM ql_private.tasks tk WHERE tk.id = v_task_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'taskId', MESSAGE = 'task not found';
    END IF;
    RETURN jsonb_build_object(
        'taskId', v_task.id, 'leaseTtlS', v_task.lease_ttl_seconds,
        'maxAttempts', v_task.max_attempts, 'retryBaseMs', v_task.retry_base_ms,
        'retryCapMs', v_task.retry_cap_ms, 'enabled', v_task.enabled,
        'logLimitBytes', v_task.log_limit_bytes);
END
$$;


ALTER FUNCTION ql.task_settings(p_task_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION task_settings(p_task_id text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.task_settings(p_task_id text) IS 'A task''s run policy {taskId, leaseTtlS, maxAttempts, retryBaseMs, retryCapMs, enabled, logLimitBytes} (SPEC 9.1, 15.2). Inputs: p_task_id. Fences: none. Writes: none. Locks: none. Read-only. Errors: QL001 malformed id, QL004 unknown task (COLUMN taskId). Caller: ql_readonly, ql_runtime.';


--
-- Name: throughput(integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.throughput(p_minutes integer DEFAULT 15) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_custom_plan'
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


ALTER FUNCTION ql.throughput(p_minutes integer) OWNER TO ql_owner;

--
-- Name: FUNCTION throughput(p_minutes integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.throughput(p_minutes integer) IS 'Throughput per minute for the console chart (SPEC 10): {minutes: [{minuteMs, dispatched, succeeded, failed, estimated}], fromMs, capped: {dispatched, finished}, cap}; dispatched = leases claimed (run_leases_claimed), succeeded/failed = terminal runs by finished_at (runs_terminal_finished); each series reads at most cap (1000) rows per minute, a fuller minute is extrapolated from the rate of its first cap rows (estimated). Inputs: p_minutes 1..60 (default 15). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 minutes. Caller: ql_readonly, ql_runtime.';


--
-- Name: waiting_runs(integer); Type: FUNCTION; Schema: ql; Owner: ql_owner
--

CREATE FUNCTION ql.waiting_runs(p_limit integer DEFAULT 20) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
    v_priority_cap constant integer := 64;
    v_session_cap constant integer := 200;
    v_capability_cap constant integer := 50;
    v_default_required constant jsonb := '{"executors": ["remote-worker"]}';
    v_nil constant uuid := '00000000-0000-0000-0000-000000000000';
    v_now timestamptz := clock_timestamp();
    v_scanned integer;
    v_priorities integer;
    v_capabilities integer;
    v_live integer;
    v_rows jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 100';
    END IF;

    SELECT count(*) INTO v_live
      FROM ql_private.worker_sessions s
      JOIN ql_private.workers w ON w.id = s.worker_id
     WHERE s.state = 'active' AND s.expires_at > v_now AND w.disabled_at IS NULL;

    -- The ready priorities (ql_private.ready_priorities: one index descent
    -- each, highest first), then each priority's head as a key range.
    WITH listed AS (
        SELECT p.neg, p.n
          FROM ql_private.ready_priorities(v_priority_cap + 1) WITH ORDINALITY AS p(neg, n)
    ), ready AS (
        SELECT h.id, h.queue_seq
          FROM listed l
         CROSS JOIN LATERAL (
               SELECT r.id, r.queue_seq FROM ql_private.runs r
                WHERE (-(r.priority::integer), r.queue_seq, r.id)
                      >= (l.neg, -9223372036854775808, v_nil)
                  AND (-(r.priority::integer), r.queue_seq, r.id)
                      < (l.neg + 1, -9223372036854775808, v_nil)
                  AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                  AND r.due_at IS NULL
                ORDER BY -(r.priority::integer), r.queue_seq, r.id
                LIMIT p_limit) h
         WHERE l.n <= v_priority_cap
    ), due AS (
        SELECT r.id, r.queue_seq FROM ql_private.runs r
         WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NOT NULL AND r.due_at <= v_now
         ORDER BY r.due_at
         LIMIT p_limit
    ), head AS (
        SELECT * FROM ready UNION ALL SELECT * FROM due
    ), waiting AS (
        SELECT r.*, h.queue_seq AS seq, greatest(r.created_at, a.not_before) AS since
          FROM (SELECT hh.id, hh.queue_seq FROM head hh ORDER BY hh.queue_seq LIMIT p_limit) h
          JOIN ql_private.runs r ON r.id = h.id
          LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id
    ), req AS (
        SELECT wr.id, coalesce(pc.required, er.placement -> 'required', v_default_required) AS required
          FROM waiting wr
          LEFT JOIN ql_private.placement_classes pc ON pc.id = wr.placement_class
          LEFT JOIN ql_private.execution_revisions er ON er.id = wr.execution_revision_id
    ), sessions AS (
        SELECT s.session_id, s.capabilities, s.slots, s.heartbeat_at,
               (SELECT count(*) FROM ql_private.run_leases rl
                 WHERE rl.session_id = s.session_id AND rl.released_at IS NULL
                   AND (rl.started_at IS NOT NULL OR rl.expires_at > v_now)) AS used
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
         WHERE s.state = 'active' AND s.expires_at > v_now AND w.disabled_at IS NULL
         ORDER BY s.heartbeat_at DESC, s.session_id
         LIMIT v_session_cap
    ), fleet AS (
        -- Sessions with equal capabilities get equal verdicts: evaluate each once,
        -- the 50 most recently seen distinct capability sets at most.
        SELECT s.capabilities, count(*) AS n, count(*) FILTER (WHERE s.used < s.slots) AS n_free
          FROM sessions s
         GROUP BY s.capabilities
         ORDER BY max(s.heartbeat_at) DESC, min(s.session_id::text)
         LIMIT v_capability_cap
    ), classes AS (
        SELECT DISTINCT q.required FROM req q
    ), verdicts AS (
        SELECT c.required,
               sum(f.n) FILTER (WHERE pe.passed) AS matching,
               sum(f.n_free) FILTER (WHERE pe.passed) AS free,
               sum(f.n) FILTER (WHERE pe.category = 'executor') AS executor,
               sum(f.n) FILTER (WHERE pe.category = 'label') AS label,
               sum(f.n) FILTER (WHERE pe.category = 'runtime') AS runtime
          FROM classes c
         CROSS JOIN fleet f
         CROSS JOIN LATERAL ql_private.placement_evaluate(
               jsonb_build_object('required', c.required), f.capabilities) pe
         GROUP BY c.required
    )
    SELECT jsonb_agg(jsonb_build_object(
               'runId', wr.id,
               'taskId', wr.task_id,
               'task', t.name,
               'project', p.name,
               'priority', wr.priority,
               'queuedAtMs', ql_private.epoch_ms(wr.created_at),
               'waitingMs', greatest(floor(extract(epoch FROM v_now - wr.since) * 1000), 0)::bigint,
               'verdict', CASE WHEN v_live = 0 THEN 'no_live_session'
                               WHEN coalesce(v.free, 0) > 0 THEN 'ready'
                               WHEN coalesce(v.matching, 0) > 0 THEN 'busy'
                               ELSE 'no_match' END,
               'sessionsMatching', coalesce(v.matching, 0),
               'sessionsWithFreeSlots', coalesce(v.free, 0),
               'mismatches', jsonb_build_object('executor', coalesce(v.executor, 0),
                                                'label', coalesce(v.label, 0),
                                                'runtime', coalesce(v.runtime, 0)))
               ORDER BY wr.seq),
           (SELECT count(*) FROM head),
           (SELECT count(*) FROM listed),
           (SELECT count(DISTINCT s.capabilities) FROM sessions s)
      INTO v_rows, v_scanned, v_priorities, v_capabilities
      FROM waiting wr
      JOIN req q ON q.id = wr.id
      JOIN ql_private.tasks t ON t.id = wr.task_id
      JOIN ql_private.projects p ON p.id = t.project_id
      LEFT JOIN verdicts v ON v.required = q.required;

    RETURN jsonb_build_object(
        'runs', coalesce(v_rows, '[]'::jsonb),
        'liveSessions', v_live,
        'sessionsCapped', v_live > v_session_cap,
        'scanned', coalesce(v_scanned, 0),
        'prioritiesCapped', coalesce(v_priorities, 0) > v_priority_cap,
        'capabilitiesCapped', coalesce(v_capabilities, 0) > v_capability_cap);
END
$$;


ALTER FUNCTION ql.waiting_runs(p_limit integer) OWNER TO ql_owner;

--
-- Name: FUNCTION waiting_runs(p_limit integer); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.waiting_runs(p_limit integer) IS 'The console''s waiting panel (SPEC 10): the oldest waiting runs (queued, due, not cancel-requested; the head of each ready priority of runs_candidate_keyset plus overdue runs of runs_due, merged by queue_seq, at most p_limit; waitingMs from greatest(created_at, current attempt not_before)) each with a placement verdict against the live sessions (active, unexpired, worker enabled; at most 200) by ql_private.placement_evaluate of its placement class, as the claim path evaluates it: {runs: [{runId, taskId, task, project, priority, queuedAtMs, waitingMs, verdict (ready|busy|no_match|no_live_session), sessionsMatching, sessionsWithFreeSlots, mismatches}], liveSessions, sessionsCapped, scanned, prioritiesCapped, capabilitiesCapped}. Inputs: p_limit 1..100 (default 20). Fences: none. Writes: none (STABLE). Locks: none. Errors: QL006 limit. Caller: ql_readonly, ql_runtime.';


--
-- Name: apply_retry(uuid, uuid, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    r ql_private.runs;
    a ql_private.attempts;
    t ql_private.tasks;
    now_ts timestamptz := clock_timestamp();
    delay_ms bigint;
    next_id uuid;
    not_before timestamptz;
BEGIN
    SELECT * INTO r FROM ql_private.runs rr WHERE rr.id = p_run_id;
    SELECT * INTO a FROM ql_private.attempts aa WHERE aa.id = p_attempt_id;
    IF r.id IS NULL OR a.id IS NULL OR a.run_id <> r.id
       OR r.current_attempt_id IS DISTINCT FROM a.id
       OR r.state IN ('succeeded', 'failed', 'cancelled')
       OR a.state NOT IN ('failed', 'lost', 'cancelled') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL020',
            MESSAGE = 'retry policy applies only to the ended current attempt of a live run';
    END IF;

    IF r.cancel_requested THEN
        UPDATE ql_private.runs rr
           SET state = 'cancelled', finished_at = now_ts, updated_at = now_ts
         WHERE rr.id = r.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.cancelled', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', a.id, 'attemptNo', a.attempt_no, 'reason', p_reason)));
        RETURN 'cancelled';
    END IF;

    -- The ended attempt's own policy, pinned when it was created (SPEC §9.1);
    -- the next attempt pins the task's policy as configured now.
    SELECT * INTO t FROM ql_private.tasks tk WHERE tk.id = r.task_id;
    IF a.attempt_no < a.max_attempts THEN
        delay_ms := floor(least(a.retry_cap_ms::float8,
                                a.retry_base_ms::float8 * power(2::float8, a.attempt_no - 1))
                          * random())::bigint;
        not_before := now_ts + make_interval(secs => delay_ms / 1000.0);
        next_id := gen_random_uuid();
        INSERT INTO ql_private.attempts (
            id, run_id, attempt_no, executor, state, not_before, created_at, updated_at,
            max_attempts, retry_base_ms, retry_cap_ms)
        VALUES (next_id, r.id, a.attempt_no + 1, a.executor, 'claimed', not_before,
                now_ts, now_ts, t.max_attempts, t.retry_base_ms, t.retry_cap_ms);
        -- A backoff in the future schedules the run (runs_due, SPEC §9.2) instead
        -- of leaving it in the candidate keyset, where a head of runs in backoff
        -- would be walked row by row by every pull.
        UPDATE ql_private.runs rr
           SET current_attempt_id = next_id, state = 'queued', updated_at = now_ts,
               due_at = CASE WHEN not_before > now_ts THEN not_before END
         WHERE rr.id = r.id;
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        VALUES ('run.retry_scheduled', r.id, next_id, jsonb_strip_nulls(jsonb_build_object(
            'attemptId', next_id,
            'attemptNo', a.attempt_no + 1,
            'previousAttemptId', a.id,
            'reason', p_reason,
            'delayMs', delay_ms,
            'notBeforeMs', ql_private.epoch_ms(not_before))));
        RETURN 'retried';
    END IF;

    UPDATE ql_private.runs rr
       SET state = 'failed', finished_at = now_ts, updated_at = now_ts
     WHERE rr.id = r.id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.failed', r.id, a.id, jsonb_strip_nulls(jsonb_build_object(
        'attemptId', a.id, 'attemptNo', a.attempt_no, 'maxAttempts', a.max_attempts,
        'reason', p_reason)));
    RETURN 'failed';
END
$$;


ALTER FUNCTION ql_private.apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text) OWNER TO ql_owner;

--
-- Name: FUNCTION apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text) IS 'Retry policy after the current attempt ended unsuccessfully: cancel-requested -> run cancelled (run.cancelled); attempt_no < max_attempts -> new claimed attempt (task policy as configured now pinned on it) with full-jitter backoff not_before = now + min(cap, base*2^(n-1))*random() ms (max_attempts, base, cap: the ended attempt''s own pinned values), run queued with due_at = not_before when in the future (run.retry_scheduled); else run failed (run.failed). Returns retried|failed|cancelled. Caller holds attempt FOR UPDATE + run FOR NO KEY UPDATE. QL020 when preconditions fail.';


--
-- Name: authenticate(text, bytea, uuid, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
DECLARE
    -- Compared against when the credential is unknown, so the unknown path costs
    -- the same 32-byte constant-time comparison as the known one.
    dummy_digest constant bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
    id_ok boolean := p_credential_id IS NOT NULL AND p_credential_id ~ '^[a-z0-9]{16}$';
    cred record;
    secret_ok boolean;
    reason text;
    http_status integer := 401;
BEGIN
    IF p_worker_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'worker_id is required';
    END IF;
    IF p_action IS NULL OR p_action !~ '^[a-z][a-z0-9_.]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'action must match ^[a-z][a-z0-9_.]{0,63}$';
    END IF;

    IF NOT id_ok OR p_secret_digest IS NULL OR octet_length(p_secret_digest) <> 32 THEN
        reason := 'malformed_credential';
    ELSE
        SELECT c.worker_id, c.secret_digest, c.revoked_at, w.disabled_at, c.expires_at,
               c.rotated_from, c.first_used_at INTO cred
          FROM ql_private.worker_credentials c
          JOIN ql_private.workers w ON w.id = c.worker_id
         WHERE c.credential_id = p_credential_id;
        IF NOT FOUND THEN
            secret_ok := ql_private.digest_equal(p_secret_digest, dummy_digest);
            reason := 'unknown_credential';
        ELSE
            secret_ok := ql_private.digest_equal(p_secret_digest, cred.secret_digest);
            IF NOT secret_ok THEN
                reason := 'bad_secret';
            ELSIF cred.revoked_at IS NOT NULL THEN
                reason := 'revoked_credential';
            ELSIF cred.expires_at IS NOT NULL AND cred.expires_at <= clock_timestamp() THEN
                reason := 'expired_credential';
            ELSIF cred.worker_id <> p_worker_id THEN
                reason := 'worker_mismatch';
                http_status := 403;
            ELSIF cred.disabled_at IS NOT NULL
                  AND NOT (p_action IN ('session.heartbeat', 'session.close', 'lease.ack',
                                        'lease.heartbeat', 'lease.complete', 'lease.log',
                                        'lease.secrets')
                           AND EXISTS (SELECT 1 FROM ql_private.worker_sessions ws
                                        WHERE ws.worker_id = p_worker_id
                                          AND ws.state = 'draining'
                                          AND ws.expires_at > clock_timestamp())) THEN
                reason := 'worker_disabled';
                http_status := 403;
            ELSE
                IF cred.rotated_from IS NOT NULL AND cred.first_used_at IS NULL THEN
                    -- The first use of a rotated credential retires its
                    -- predecessor (SPEC §16.2): the one write it costs, once.
                    PERFORM ql_private.credential_first_use(p_credential_id, cred.rotated_from);
                END IF;
                RETURN NULL;  -- allowed: no write (but a rotated credential's first use)
            END IF;
        END IF;
    END IF;

    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason)
    VALUES (CASE WHEN id_ok THEN p_credential_id END, p_worker_id, p_action, 'denied', reason);
    RETURN jsonb_build_object('status', 'denied', 'httpStatus', http_status, 'reason', reason);
END
$_$;


ALTER FUNCTION ql_private.authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text) OWNER TO ql_owner;

--
-- Name: FUNCTION authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text) IS 'Credential check of worker-facing functions. NULL = allowed (writes nothing); else one security_audit row (credential id only if well-formed, no secrets/digests) and {"status":"denied","httpStatus":401|403,"reason":malformed_credential|unknown_credential|bad_secret|revoked_credential|expired_credential|worker_mismatch|worker_disabled (403, the worker is disabled; while a worker disabled with drain has a draining unexpired session, session.heartbeat, session.close and lease.ack/heartbeat/complete/log/secrets are allowed, their fences keeping them to its started leases)}. Constant-time digest compare, dummy compare for unknown ids. Locks: none. QL001 on NULL worker_id or malformed action.';


--
-- Name: bound_value(jsonb, text, integer, integer); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    v jsonb := p_bounds -> p_key;
    n numeric;
BEGIN
    IF v IS NULL THEN
        RETURN p_default;
    END IF;
    IF jsonb_typeof(v) <> 'number' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('bounds.%s must be an integer', p_key);
    END IF;
    n := v::numeric;
    IF n <> trunc(n) OR n < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('bounds.%s must be an integer >= 1', p_key);
    END IF;
    IF n > p_cap THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002',
            MESSAGE = format('bounds.%s exceeds its hard cap of %s', p_key, p_cap);
    END IF;
    RETURN n::integer;
END
$$;


ALTER FUNCTION ql_private.bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer) OWNER TO ql_owner;

--
-- Name: FUNCTION bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer) IS 'One pull bound: absent -> default; QL001 not an integer >= 1; QL002 above the cap. Pure.';


--
-- Name: candidate_page(smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone DEFAULT clock_timestamp(), p_snapshot pg_snapshot DEFAULT pg_current_snapshot(), p_own xid8 DEFAULT pg_current_xact_id_if_assigned()) RETURNS TABLE(run_id uuid, project_id uuid, task_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint, attempt_id uuid, queued_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
    SELECT c.id, c.project_id, c.task_id, c.execution_revision_id, c.priority,
           c.queue_seq, c.current_attempt_id, c.created_at
      FROM (
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE (-(r.priority::integer), r.queue_seq, r.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.project_id, d.task_id, d.execution_revision_id, d.priority,
                d.queue_seq, d.current_attempt_id, d.created_at
           FROM (SELECT dr.id, dr.project_id, dr.task_id, dr.execution_revision_id,
                        dr.priority, dr.queue_seq, dr.current_attempt_id, dr.created_at,
                        dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE (-(d.priority::integer), d.queue_seq, d.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM (SELECT el.run_id, el.attempt_id
                   FROM ql_private.run_leases el
                  WHERE el.released_at IS NULL AND el.started_at IS NULL
                    AND el.expires_at <= p_now
                  ORDER BY el.expires_at
                  LIMIT (p_limit + 1) * 4) l
          CROSS JOIN LATERAL (
                SELECT rr.* FROM ql_private.runs rr
                 WHERE rr.id = l.run_id AND rr.current_attempt_id = l.attempt_id
                 LIMIT 1) r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(l.attempt_id, p_now) ok
          WHERE (-(r.priority::integer), r.queue_seq, r.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND r.state = 'dispatching' AND r.runtime_owned AND NOT r.cancel_requested
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
      ) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of dispatch candidates in priority DESC, queue_seq, id order (R-CAND): ready queued runs by a range scan of runs_candidate_keyset, merged with scheduled runs that came due (runs_due, at most 4 x (limit + 1), runs not yet due never read) and dispatching runs whose lease expired unstarted (run_leases_unstarted_expiry); rows a concurrent claim is working on (xmax in progress) are skipped without locking. Inlinable SQL, read-only, no locks. Caller: ql_private.scan_and_claim.';


--
-- Name: certificate_serial(text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.certificate_serial(p_serial text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    v_hex text;
BEGIN
    IF p_serial IS NULL OR length(p_serial) > 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    v_hex := replace(lower(btrim(p_serial)), ':', '');
    IF v_hex LIKE 'serial=%' THEN
        v_hex := substr(v_hex, 8);
    END IF;
    IF v_hex !~ '^[0-9a-f]+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    v_hex := coalesce(nullif(ltrim(v_hex, '0'), ''), '0');
    IF length(v_hex) > 40 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    RETURN v_hex;
END
$_$;


ALTER FUNCTION ql_private.certificate_serial(p_serial text) OWNER TO ql_owner;

--
-- Name: FUNCTION certificate_serial(p_serial text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.certificate_serial(p_serial text) IS 'Canonical certificate serial: hex in any case, with or without colons or a serial= prefix -> lowercase hex without colons or leading zeros. Pure. Errors: QL001 (COLUMN serial) NULL, not hex, more than 20 octets. Caller: ql.revoke_certificate, ql.record_certificate.';


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: worker_sessions; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.worker_sessions (
    session_id uuid DEFAULT gen_random_uuid() NOT NULL,
    worker_id uuid NOT NULL,
    generation bigint NOT NULL,
    state text DEFAULT 'active'::text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    capabilities jsonb NOT NULL,
    capabilities_canonical bytea NOT NULL,
    capabilities_digest text NOT NULL,
    slots integer NOT NULL,
    opened_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    closed_at timestamp with time zone,
    CONSTRAINT worker_sessions_capabilities_digest_check CHECK ((capabilities_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT worker_sessions_generation_check CHECK ((generation >= 1)),
    CONSTRAINT worker_sessions_slots_check CHECK (((slots >= 1) AND (slots <= 256))),
    CONSTRAINT worker_sessions_state_check CHECK ((state = ANY (ARRAY['active'::text, 'draining'::text, 'closed'::text])))
)
WITH (fillfactor='50', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='500', autovacuum_vacuum_cost_delay='0');


ALTER TABLE ql_private.worker_sessions OWNER TO ql_owner;

--
-- Name: claim_candidate(ql_private.worker_sessions, uuid[], integer[], uuid, bytea); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean) RETURNS record
    LANGUAGE plpgsql
    SET enable_bitmapscan TO 'off'
    AS $$
DECLARE
    now_ts timestamptz := clock_timestamp();
    pick record;
    l ql_private.run_leases;
    r ql_private.runs;
    a ql_private.attempts;
    score integer;
BEGIN
    SELECT p.ord, cr AS run, ca AS attempt, cer AS revision, ct.lease_ttl_seconds AS ttl,
           ct.log_limit_bytes AS log_limit,
           (SELECT max(g.lease_generation) FROM ql_private.run_leases g
             WHERE g.attempt_id = ca.id) AS last_generation
      INTO pick
      FROM unnest(p_run_ids) WITH ORDINALITY AS p(run_id, ord)
      JOIN ql_private.runs cr ON cr.id = p.run_id
      JOIN ql_private.attempts ca ON ca.id = cr.current_attempt_id
      JOIN ql_private.execution_revisions cer ON cer.id = cr.execution_revision_id
      JOIN ql_private.tasks ct ON ct.id = cr.task_id
     WHERE cr.runtime_owned AND NOT cr.cancel_requested AND ca.state = 'claimed'
       AND ca.executor = 'remote_worker' AND ca.not_before <= now_ts
       AND (cr.due_at IS NULL OR cr.due_at <= now_ts)
       -- The pool grant (SPEC §13.1), on the locked run's pool: the worker holds
       -- the all-pools grant or one for this pool. ql.revoke_pool removes the
       -- grant before it waits for the session row this pull holds, so a claim
       -- either sees the grant gone or is seen (and released) by the revoke.
       AND (EXISTS (SELECT 1 FROM ql_private.workers gw
                     WHERE gw.id = s.worker_id AND gw.all_pools)
            OR EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                        WHERE g.worker_id = s.worker_id AND g.pool_id = cr.pool_id))
       -- A run claimed by someone else since the scan is `dispatching` with a live
       -- offer: passed over here, without taking its lock (which would write WAL).
       AND (cr.state = 'queued'
            OR (cr.state = 'dispatching' AND EXISTS (
                    SELECT 1 FROM ql_private.run_leases el
                     WHERE el.attempt_id = ca.id AND el.released_at IS NULL
                       AND el.started_at IS NULL AND el.expires_at <= now_ts)))
     ORDER BY p.ord
     LIMIT 1
       FOR NO KEY UPDATE OF ca, cr SKIP LOCKED;  -- attempt, then run (LIFECYCLE.md "Locks")
    locked := FOUND;
    IF NOT locked THEN
        consumed := cardinality(p_run_ids);
        RETURN;
    END IF;
    consumed := pick.ord;
    r := pick.run;
    a := pick.attempt;
    score := p_scores[pick.ord];
    IF r.state = 'dispatching' THEN
        UPDATE ql_private.run_leases
           SET released_at = now_ts, release_reason = 'expired', updated_at = now_ts
         WHERE attempt_id = a.id AND released_at IS NULL
           AND started_at IS NULL AND expires_at <= now_ts;
        IF NOT FOUND THEN
            RETURN;  -- its offer is live (claimed since our scan): race lost
        END IF;
    END IF;
    INSERT INTO ql_private.run_leases (
        attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
        lease_version, offer_id, token_digest, execution_revision_id, content_digest,
        placement_score, claimed_at, expires_at, lease_ttl_seconds, log_limit_bytes,
        updated_at)
    VALUES (
        a.id, r.id, s.worker_id, s.session_id, s.generation,
        coalesce(pick.last_generation, 0) + 1, 1, p_offer_id, p_token_digest,
        r.execution_revision_id, (pick.revision).content_digest, score,
        now_ts, now_ts + make_interval(secs => pick.ttl), pick.ttl, pick.log_limit, now_ts)
    RETURNING * INTO l;
    IF r.state = 'queued' THEN
        -- A scheduled run that came due leaves runs_due here (due_at := NULL):
        -- a claimed run is never "scheduled".
        UPDATE ql_private.runs SET state = 'dispatching', due_at = NULL, updated_at = now_ts
         WHERE id = r.id;
    END IF;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.dispatched', r.id, a.id, jsonb_build_object(
        'offerId', p_offer_id,
        'workerId', s.worker_id,
        'sessionId', s.session_id,
        'sessionGeneration', s.generation,
        'leaseGeneration', l.lease_generation,
        'placementScore', score,
        'contentDigest', l.content_digest));
    offer := ql_private.offer_json(l, r, pick.revision);
END
$$;


ALTER FUNCTION ql_private.claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean) IS 'Atomic claim of the first lockable candidate of run_ids (claim order): attempt + run FOR NO KEY UPDATE SKIP LOCKED in one statement (the lifecycle order), every fence re-checked by clock_timestamp() (due_at passed included; the worker''s grant of the run''s pool, SPEC 13.1); inserts the lease with the task lease TTL and log cap (logLimitBytes) pinned on it (an expired unstarted predecessor released), run -> dispatching with due_at cleared, one run.dispatched event. (offer, consumed, locked): offer NULL = nothing claimed; consumed = candidates gone through; locked = one was locked (a claim attempt).';


--
-- Name: claim_page(ql_private.worker_sessions, uuid[], integer[], smallint[], uuid, bytea, integer, boolean); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_run_ids uuid[] := p_run_ids;
    v_scores integer[] := p_scores;
    v_count integer := cardinality(p_run_ids);
    v_claim record;
    v_next integer := 1;
    v_j integer;
    v_swap_id uuid;
    v_swap_score integer;
BEGIN
    attempts := 0;
    races := 0;
    session_locked := p_session_locked;
    capacity_full := false;
    IF v_count > 1 AND EXISTS (SELECT 1 FROM unnest(v_scores) sc WHERE sc <> v_scores[1]) THEN
        FOR v_i IN 2 .. v_count LOOP
            v_j := v_i;
            WHILE v_j > 1 AND p_priorities[v_j - 1] = p_priorities[v_j]
                  AND v_scores[v_j - 1] < v_scores[v_j] LOOP
                v_swap_id := v_run_ids[v_j];
                v_run_ids[v_j] := v_run_ids[v_j - 1];
                v_run_ids[v_j - 1] := v_swap_id;
                v_swap_score := v_scores[v_j];
                v_scores[v_j] := v_scores[v_j - 1];
                v_scores[v_j - 1] := v_swap_score;
                v_j := v_j - 1;
            END LOOP;
        END LOOP;
    END IF;

    WHILE v_next <= v_count AND attempts < p_attempts_left LOOP
        IF NOT session_locked THEN
            IF NOT ql_private.session_claim_lock(p_session) THEN
                capacity_full := true;
                RETURN;
            END IF;
            session_locked := true;
        END IF;
        v_claim := ql_private.claim_candidate(
            p_session, v_run_ids[v_next:v_count], v_scores[v_next:v_count],
            p_offer_id, p_token_digest);
        IF v_claim.offer IS NOT NULL THEN
            offer := v_claim.offer;
            attempts := attempts + 1;
            races := races + v_claim.consumed - 1;
            RETURN;
        END IF;
        -- Nothing claimed: every candidate gone through was a race, and the
        -- one the statement locked (whose fence then failed) an attempt.
        IF v_claim.locked THEN
            attempts := attempts + 1;
        END IF;
        races := races + v_claim.consumed;
        v_next := v_next + v_claim.consumed;
    END LOOP;
END
$$;


ALTER FUNCTION ql_private.claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean) IS 'Claim step of one page of a pull: orders the page''s passers by (priority DESC, placement score DESC, queue order), locks and re-verifies the session before the pull''s first claim (ql_private.session_claim_lock), then tries ql_private.claim_candidate (one SKIP LOCKED statement per try) until a claim, the end of the list or p_attempts_left attempts. Inputs: p_session, p_run_ids/p_scores/p_priorities (scan order), p_offer_id, p_token_digest, p_attempts_left, p_session_locked. Returns (offer NULL = none, attempts, races, session_locked, capacity_full). Fences: session re-check (active, generation, unexpired, capabilities, free slot) before the pull''s first claim; every candidate fence on the locked rows (claim_candidate). Writes: only a claim. Locks: session row FOR NO KEY UPDATE once per pull; run + attempt SKIP LOCKED. Errors: QL010-QL014 from the session re-check. Caller: ql_private.scan_and_claim.';


--
-- Name: class_candidate_page(integer[], smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone DEFAULT clock_timestamp(), p_snapshot pg_snapshot DEFAULT pg_current_snapshot(), p_own xid8 DEFAULT pg_current_xact_id_if_assigned()) RETURNS TABLE(run_id uuid, project_id uuid, task_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint, attempt_id uuid, queued_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
    SELECT c.id, c.project_id, c.task_id, c.execution_revision_id, c.priority,
           c.queue_seq, c.current_attempt_id, c.created_at
      FROM unnest(p_classes) AS k(class_id)
     CROSS JOIN LATERAL (
        (SELECT r.id, r.project_id, r.task_id, r.execution_revision_id, r.priority,
                r.queue_seq, r.current_attempt_id, r.created_at
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE r.placement_class = k.class_id
            AND (-(r.priority::integer), r.queue_seq, r.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.project_id, d.task_id, d.execution_revision_id, d.priority,
                d.queue_seq, d.current_attempt_id, d.created_at
           FROM (SELECT dr.id, dr.project_id, dr.task_id, dr.execution_revision_id,
                        dr.priority, dr.queue_seq, dr.current_attempt_id, dr.created_at,
                        dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.placement_class = k.class_id
                    AND dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE (-(d.priority::integer), d.queue_seq, d.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of queued candidates of the given placement classes, in priority DESC, queue_seq, id order: per class one runs_class_keyset range scan (ready runs) and the due scheduled runs from runs_class_due (at most 4 x (limit + 1), due_at order, keyset-filtered), merged. Passes over rows a concurrent claim holds. Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: close_drained_session(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.close_drained_session() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_session ql_private.worker_sessions;
BEGIN
    SELECT ws.* INTO v_session FROM ql_private.worker_sessions ws
     WHERE ws.session_id = NEW.session_id AND ws.state = 'draining'
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM ql_private.run_leases rl
                WHERE rl.session_id = NEW.session_id AND rl.released_at IS NULL) THEN
        RETURN NULL;
    END IF;
    UPDATE ql_private.worker_sessions ws
       SET state = 'closed', closed_at = clock_timestamp()
     WHERE ws.session_id = NEW.session_id;
    INSERT INTO ql_private.events (type, worker_id, payload)
    VALUES ('session.drained', v_session.worker_id, jsonb_build_object(
        'sessionId', v_session.session_id, 'workerId', v_session.worker_id,
        'generation', v_session.generation));
    RETURN NULL;
END
$$;


ALTER FUNCTION ql_private.close_drained_session() OWNER TO ql_owner;

--
-- Name: FUNCTION close_drained_session(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.close_drained_session() IS 'Trigger (run_leases_close_drained, AFTER UPDATE of a started lease that is released now): when its session is draining and no live lease of it is left, close the session (state closed, closed_at) and write one session.drained event (sessionId, workerId, generation). Locks: the draining session row FOR NO KEY UPDATE (never an active one). Writes: at most the session row and one event. Caller: the trigger only.';


--
-- Name: credential_first_use(text, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE ql_private.worker_credentials c SET first_used_at = clock_timestamp()
     WHERE c.credential_id = p_credential_id AND c.first_used_at IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE ql_private.worker_credentials c
       SET expires_at = least(coalesce(c.expires_at, 'infinity'), clock_timestamp())
     WHERE c.credential_id = p_predecessor_id;
    PERFORM pg_notify('ql_dispatch', 'c:' || p_predecessor_id);
END
$$;


ALTER FUNCTION ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION credential_first_use(p_credential_id text, p_predecessor_id text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) IS 'First use of a rotated credential: sets its first_used_at and expires its predecessor now (SPEC 16.2), NOTIFY ql_dispatch c:<predecessor>. Writes: the two credential rows, once. Locks: both rows (new, then old). Caller: ql_private.authenticate.';


--
-- Name: digest_equal(bytea, bytea); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE
               WHEN p_a IS NULL OR p_b IS NULL
                    OR pg_catalog.octet_length(p_a) <> pg_catalog.octet_length(p_b) THEN false
               ELSE pg_catalog.bit_count(
                        ('x' || pg_catalog.encode(p_a, 'hex'))::pg_catalog.varbit
                        # ('x' || pg_catalog.encode(p_b, 'hex'))::pg_catalog.varbit) = 0
           END
$$;


ALTER FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION digest_equal(p_a bytea, p_b bytea); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea) IS 'Constant-time equality of two digests: one inlinable expression, bit_count of the XOR of their full-length bit strings (all bytes visited, no early exit). Pure. NULL/length mismatch -> false.';


--
-- Name: dispatchable_attempt(uuid, timestamp with time zone); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone) RETURNS SETOF integer
    LANGUAGE sql STABLE
    AS $$
    SELECT 1
      FROM ql_private.attempts a
     WHERE a.id = p_attempt_id
       AND a.state = 'claimed'
       AND a.executor = 'remote_worker'
       AND a.not_before <= p_now
     LIMIT 1
$$;


ALTER FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone) OWNER TO ql_owner;

--
-- Name: FUNCTION dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone) IS 'One row when the attempt is claimed, remote_worker and past not_before at the given time (candidate rule, SPEC 3.1); inlined as a LATERAL probe. Read-only.';


--
-- Name: drain_session(uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_now timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ql_private.worker_sessions ws
                    WHERE ws.session_id = p_session_id AND ws.state = 'active') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'only an active session can start draining';
    END IF;
    released := ql_private.release_unstarted_leases(ARRAY[p_session_id], 'session_closed');
    SELECT count(*)::integer INTO running
      FROM (SELECT 1 FROM ql_private.run_leases rl
             WHERE rl.session_id = p_session_id AND rl.released_at IS NULL
               FOR SHARE) AS live;
    state := CASE WHEN running = 0 THEN 'closed' ELSE 'draining' END;
    v_now := clock_timestamp();
    UPDATE ql_private.worker_sessions ws
       SET state = drain_session.state,
           closed_at = CASE WHEN drain_session.running = 0 THEN v_now END
     WHERE ws.session_id = p_session_id;
END
$$;


ALTER FUNCTION ql_private.drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text) OWNER TO ql_owner;

--
-- Name: FUNCTION drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text) IS 'Start draining an active session the caller holds FOR UPDATE (end_session / disable_worker with drain): unstarted live leases released (session_closed, runs re-queued), state draining (no new offers: session fence QL015), started leases run on; closed at once when no live lease is left, else by ql_private.close_drained_session when the last one is released. Returns (released, running, state). Locks: attempt -> run -> lease per released lease, then FOR SHARE on the remaining live leases (waits for lease changes in flight). Errors: QL001 session not active. Caller: ql.end_session, ql.disable_worker, ql.label_worker.';


--
-- Name: epoch_ms(timestamp with time zone); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.epoch_ms(p_t timestamp with time zone) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT pg_catalog.floor(EXTRACT(epoch FROM p_t) * 1000)::bigint
$$;


ALTER FUNCTION ql_private.epoch_ms(p_t timestamp with time zone) OWNER TO ql_owner;

--
-- Name: FUNCTION epoch_ms(p_t timestamp with time zone); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.epoch_ms(p_t timestamp with time zone) IS 'Integer milliseconds since the epoch (floor). Pure.';


--
-- Name: idle_result(text, integer, integer, integer, integer, jsonb, boolean); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'status', 'idle',
        'reason', p_reason,
        'stats', jsonb_build_object(
            'pages', p_pages,
            'candidates', p_candidates,
            'claimAttempts', p_claim_attempts,
            'races', p_races,
            'mismatches', p_mismatches),
        'truncated', p_truncated));
END
$$;


ALTER FUNCTION ql_private.idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean) IS 'The idle pull envelope {status, reason, stats {pages, candidates, claimAttempts, races, mismatches}, truncated}. Pure.';


--
-- Name: idle_view_notify(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.idle_view_notify() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    kind text := TG_ARGV[0];
BEGIN
    IF kind = 'queue' THEN
        PERFORM pg_notify('ql_dispatch', 'q');
    ELSIF kind = 'credential' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM pg_notify('ql_dispatch', 'c:' || OLD.credential_id);
        END IF;
        IF TG_OP = 'UPDATE' THEN
            PERFORM pg_notify('ql_dispatch', 'c:' || NEW.credential_id);
        END IF;
    ELSIF kind = 'session' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM pg_notify('ql_dispatch', 's:' || OLD.worker_id::text);
        END IF;
        IF TG_OP = 'UPDATE' THEN
            PERFORM pg_notify('ql_dispatch', 's:' || NEW.worker_id::text);
        END IF;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'unknown idle view notification kind';
    END IF;
    RETURN NULL;
END
$$;


ALTER FUNCTION ql_private.idle_view_notify() OWNER TO ql_owner;

--
-- Name: FUNCTION idle_view_notify(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.idle_view_notify() IS 'Trigger: NOTIFY ql_dispatch with q (a run may have become dispatchable), c:<credentialId> (credential changed/deleted) or s:<workerId> (session fence facts changed). Ids only. Never fired by claims or session heartbeats (trigger WHEN clauses, migration 0005). Locks: notification queue at commit. QL001 unknown kind.';


--
-- Name: json_object_from_bytes(bytea, integer, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    doc json;
    has_duplicate boolean;
    result jsonb;
BEGIN
    IF p_bytes IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('%s is required', p_field);
    END IF;
    IF octet_length(p_bytes) > p_max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002',
            MESSAGE = format('%s exceeds %s bytes', p_field, p_max_bytes);
    END IF;
    BEGIN
        doc := convert_from(p_bytes, 'UTF8')::json;
    EXCEPTION
        WHEN data_exception THEN  -- invalid UTF-8 (22021), invalid JSON (22P02), ...
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('%s must be UTF-8 JSON', p_field);
        WHEN statement_too_complex THEN  -- nesting beyond the parser's stack
            RAISE EXCEPTION USING ERRCODE = 'QL002',
                MESSAGE = format('%s is nested too deeply', p_field);
    END;
    IF json_typeof(doc) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s must be a JSON object', p_field);
    END IF;

    BEGIN
        -- Every object node, reached through objects and arrays, must have distinct keys.
        WITH RECURSIVE node(v) AS (
            SELECT doc
            UNION ALL
            SELECT child.v
              FROM node
              CROSS JOIN LATERAL (
                  SELECT e.value FROM json_each(
                      CASE WHEN json_typeof(node.v) = 'object' THEN node.v ELSE '{}'::json END) e
                  UNION ALL
                  SELECT a.value FROM json_array_elements(
                      CASE WHEN json_typeof(node.v) = 'array' THEN node.v ELSE '[]'::json END) a
              ) AS child(v)
             WHERE json_typeof(node.v) IN ('object', 'array')
        )
        SELECT EXISTS (
            SELECT 1 FROM node
             WHERE json_typeof(node.v) = 'object'
               AND (SELECT count(*) <> count(DISTINCT k) FROM json_object_keys(node.v) AS k)
        ) INTO has_duplicate;
        result := doc::jsonb;
    EXCEPTION
        WHEN data_exception THEN  -- \u0000 (22P05) has no text/jsonb representation
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('%s contains an unsupported escape', p_field);
    END;
    IF has_duplicate THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s has a duplicate object key', p_field);
    END IF;
    RETURN result;
END
$$;


ALTER FUNCTION ql_private.json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text) OWNER TO ql_owner;

--
-- Name: FUNCTION json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text) IS 'Parse document bytes into a jsonb object: <= max_bytes (QL002), UTF-8 JSON object without duplicate keys at any depth (QL001). Pure. Caller: open_session, publish_revision.';


--
-- Name: run_leases; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.run_leases (
    id bigint NOT NULL,
    attempt_id uuid NOT NULL,
    run_id uuid NOT NULL,
    worker_id uuid NOT NULL,
    session_id uuid NOT NULL,
    session_generation bigint NOT NULL,
    lease_generation integer NOT NULL,
    lease_version integer DEFAULT 1 NOT NULL,
    offer_id uuid NOT NULL,
    token_digest bytea NOT NULL,
    execution_revision_id uuid NOT NULL,
    content_digest text NOT NULL,
    placement_score integer NOT NULL,
    claimed_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    released_at timestamp with time zone,
    release_reason text,
    updated_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone,
    heartbeat_version integer,
    lease_ttl_seconds integer NOT NULL,
    log_limit_bytes integer DEFAULT 4194304 NOT NULL,
    CONSTRAINT run_leases_check CHECK (((released_at IS NULL) = (release_reason IS NULL))),
    CONSTRAINT run_leases_content_digest_check CHECK ((content_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT run_leases_heartbeat_started_check CHECK (((heartbeat_at IS NULL) OR (started_at IS NOT NULL))),
    CONSTRAINT run_leases_heartbeat_version_check CHECK (((heartbeat_version IS NULL) OR ((heartbeat_version >= 2) AND (heartbeat_version <= lease_version)))),
    CONSTRAINT run_leases_lease_generation_check CHECK ((lease_generation >= 1)),
    CONSTRAINT run_leases_lease_ttl_seconds_check CHECK (((lease_ttl_seconds >= 5) AND (lease_ttl_seconds <= 86400))),
    CONSTRAINT run_leases_lease_version_check CHECK ((lease_version >= 1)),
    CONSTRAINT run_leases_log_limit_bytes_check CHECK (((log_limit_bytes >= 1024) AND (log_limit_bytes <= 67108864))),
    CONSTRAINT run_leases_placement_score_check CHECK ((placement_score >= 0)),
    CONSTRAINT run_leases_release_reason_check CHECK ((release_reason = ANY (ARRAY['expired'::text, 'session_replaced'::text, 'session_closed'::text, 'completed'::text, 'lost'::text, 'cancelled'::text, 'start_failed'::text, 'grant_revoked'::text]))),
    CONSTRAINT run_leases_token_digest_check CHECK ((octet_length(token_digest) = 32))
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_cost_delay='0', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', vacuum_index_cleanup='on', autovacuum_vacuum_insert_threshold='1000', autovacuum_vacuum_insert_scale_factor='0');


ALTER TABLE ql_private.run_leases OWNER TO ql_owner;

--
-- Name: lease_answer(ql_private.run_leases, text, boolean); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT ql_private.lease_json(p_lease) || jsonb_build_object(
        'state', p_state,
        'startedAtMs', ql_private.epoch_ms((p_lease).started_at),
        'cancelRequested', p_cancel_requested)
$$;


ALTER FUNCTION ql_private.lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean) IS 'lease@v1 body (without schema) from a lease row, its attempt''s state and its run''s cancel flag: lease_json fields + state + startedAtMs (null before start) + cancelRequested. Never the token or its digest. Pure. Caller: ql_private.lease_projection and the lease lifecycle calls after their change.';


--
-- Name: lease_json(ql_private.run_leases); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_json(l ql_private.run_leases) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT jsonb_build_object(
        'runId', l.run_id,
        'attemptId', l.attempt_id,
        'workerId', l.worker_id,
        'sessionId', l.session_id,
        'sessionGeneration', l.session_generation,
        'leaseGeneration', l.lease_generation,
        'leaseVersion', l.lease_version,
        'offerId', l.offer_id,
        'claimedAtMs', ql_private.epoch_ms(l.claimed_at),
        'expiresAtMs', ql_private.epoch_ms(l.expires_at),
        'updatedAtMs', ql_private.epoch_ms(l.updated_at))
$$;


ALTER FUNCTION ql_private.lease_json(l ql_private.run_leases) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_json(l ql_private.run_leases); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_json(l ql_private.run_leases) IS 'The wire lease object (offer@v1 lease; lease@v1 without state/startedAtMs/cancelRequested) from a run_leases row. Pure, inlinable; never the token or its digest.';


--
-- Name: attempts; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.attempts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    run_id uuid NOT NULL,
    attempt_no integer NOT NULL,
    executor text NOT NULL,
    state text DEFAULT 'claimed'::text NOT NULL,
    not_before timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    exit_code integer,
    reason text,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    finished_at timestamp with time zone,
    result jsonb,
    max_attempts integer NOT NULL,
    retry_base_ms integer NOT NULL,
    retry_cap_ms integer NOT NULL,
    CONSTRAINT attempts_attempt_no_check CHECK ((attempt_no >= 1)),
    CONSTRAINT attempts_executor_check CHECK ((executor = 'remote_worker'::text)),
    CONSTRAINT attempts_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT attempts_reason_check CHECK (((reason IS NULL) OR (reason ~ '^[a-z][a-z0-9_]{0,63}$'::text))),
    CONSTRAINT attempts_result_check CHECK (((result IS NULL) OR ((jsonb_typeof(result) = 'object'::text) AND (pg_column_size(result) <= 12288)))),
    CONSTRAINT attempts_retry_base_ms_check CHECK (((retry_base_ms >= 0) AND (retry_base_ms <= 3600000))),
    CONSTRAINT attempts_retry_cap_ms_check CHECK (((retry_cap_ms >= 0) AND (retry_cap_ms <= 86400000))),
    CONSTRAINT attempts_state_check CHECK ((state = ANY (ARRAY['claimed'::text, 'starting'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'lost'::text, 'cancelled'::text])))
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_cost_delay='0', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', vacuum_index_cleanup='on');


ALTER TABLE ql_private.attempts OWNER TO ql_owner;

--
-- Name: runs; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    task_id uuid NOT NULL,
    execution_revision_id uuid NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    queue_seq bigint NOT NULL,
    state text DEFAULT 'queued'::text NOT NULL,
    runtime_owned boolean DEFAULT true NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    current_attempt_id uuid,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    finished_at timestamp with time zone,
    placement_class integer,
    due_at timestamp with time zone,
    idempotency_key text,
    pool_id uuid NOT NULL,
    CONSTRAINT runs_idempotency_key_check CHECK (((idempotency_key IS NULL) OR ((char_length(idempotency_key) >= 1) AND (char_length(idempotency_key) <= 128)))),
    CONSTRAINT runs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'dispatching'::text, 'starting'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text])))
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_cost_delay='0', autovacuum_analyze_scale_factor='0', autovacuum_analyze_threshold='5000', vacuum_index_cleanup='on');


ALTER TABLE ql_private.runs OWNER TO ql_owner;

--
-- Name: lease_open(uuid, uuid, uuid, bigint, bytea, bigint, text, text, ql_private.run_leases); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text DEFAULT NULL::text, p_seen ql_private.run_leases DEFAULT NULL::ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_ids record;
    v_row record;
    v_now timestamptz;
    v_last text;
BEGIN
    IF p_change IS NULL
       OR p_change NOT IN ('starting', 'running', 'start_failed', 'heartbeat', 'complete',
                           'log') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'change must be starting, running, start_failed, heartbeat, complete or log';
    END IF;
    IF p_lease_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion is required';
    END IF;
    IF p_lock IS NOT NULL THEN
        IF p_lock NOT IN ('lease', 'attempt_run_lease', 'attempt_lease_share') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = 'lock must be NULL, lease, attempt_run_lease or attempt_lease_share';
        END IF;
        IF p_seen.id IS NOT NULL THEN
            IF p_seen.offer_id IS DISTINCT FROM p_offer_id THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001',
                    MESSAGE = 'the lease seen is not the lease of this offer id';
            END IF;
            v_ids := p_seen;
        ELSE
            SELECT rl.id, rl.attempt_id, rl.run_id INTO v_ids
              FROM ql_private.run_leases rl WHERE rl.offer_id = p_offer_id;
        END IF;
        IF v_ids.id IS NOT NULL THEN
            IF p_lock = 'attempt_run_lease' THEN
                -- One statement: its row locks are taken for each row in the
                -- order of its locking clauses (the executor's LockRows walks them
                -- in that order), so attempt -> run -> lease, as three statements
                -- would, each waited for in turn.
                PERFORM 1
                   FROM ql_private.attempts aa, ql_private.runs rr, ql_private.run_leases rl
                  WHERE aa.id = v_ids.attempt_id AND rr.id = v_ids.run_id AND rl.id = v_ids.id
                    FOR UPDATE OF aa FOR NO KEY UPDATE OF rr FOR UPDATE OF rl;
            ELSIF p_lock = 'attempt_lease_share' THEN
                PERFORM 1
                   FROM ql_private.attempts aa, ql_private.run_leases rl
                  WHERE aa.id = v_ids.attempt_id AND rl.id = v_ids.id
                    FOR KEY SHARE OF aa FOR KEY SHARE OF rl;
            ELSE
                PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = v_ids.id FOR NO KEY UPDATE;
            END IF;
        END IF;
    END IF;
    -- One statement, so one snapshot (taken after the locks above); `now` too.
    v_now := clock_timestamp();
    SELECT rl, aa, rr, rl.lease_ttl_seconds AS ttl,
           ql_private.lease_verdict(rl, ws, aa, rr, er.content_digest, p_worker_id,
                                    p_session_id, p_generation, p_token_digest, v_now, true)
               AS verdict
      INTO v_row
      FROM ql_private.run_leases rl
      JOIN ql_private.attempts aa ON aa.id = rl.attempt_id
      JOIN ql_private.runs rr ON rr.id = rl.run_id
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = rl.session_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id
     WHERE rl.offer_id = p_offer_id;
    IF NOT FOUND THEN
        category := 'offer_foreign';
        RETURN;
    END IF;
    lease := v_row.rl;
    attempt := v_row.aa;
    run := v_row.rr;
    ttl := v_row.ttl;
    category := v_row.verdict;
    IF (category IS NULL OR category = 'lease_terminal')
       AND p_lease_version <> lease.lease_version THEN
        v_last := CASE
            WHEN lease.release_reason IN ('completed', 'cancelled') THEN 'complete'
            WHEN lease.release_reason = 'start_failed' THEN 'start_failed'
            WHEN lease.released_at IS NOT NULL THEN NULL
            WHEN lease.heartbeat_version = lease.lease_version THEN 'heartbeat'
            WHEN lease.started_at IS NOT NULL
                 AND attempt.state IN ('starting', 'running') THEN attempt.state
        END;
        IF p_lease_version = lease.lease_version - 1 AND v_last = p_change THEN
            category := 'replay';
        ELSIF category IS NULL THEN
            category := 'stale_lease_version';
        END IF;
    END IF;
END
$$;


ALTER FUNCTION ql_private.lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text) IS 'Shared opening of the lease lifecycle calls (ack, heartbeat, complete, log append), after authentication. Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest (the caller''s proof), p_lease_version (the version the worker last saw), p_change (starting | running | start_failed | heartbeat | complete | log), p_lock NULL | lease | attempt_run_lease | attempt_lease_share. Locks in the one order attempt FOR UPDATE -> run FOR NO KEY UPDATE -> lease FOR UPDATE (attempt_run_lease; the order of ql.cancel_run and release_unstarted_leases, so none of them can deadlock), or the lease FOR NO KEY UPDATE only (lease), or attempt FOR KEY SHARE -> lease FOR KEY SHARE (attempt_lease_share: a log append, which must not overlap a change of the attempt), then reads lease, attempt, run, the lease TTL pinned on the lease at claim, session and revision digest in one statement (one snapshot) and decides with ql_private.lease_verdict (lifecycle rules); an unknown offer id answers one row with category offer_foreign. p_seen: the lease row of the caller''s unlocked read (names the rows to lock; NULL: read by offer id). Fences: lease_verdict, then the lease version (live or released by a completion): version = current -> category unchanged (NULL: apply); version = current - 1 and the change that made the current version is p_change (read off the rows: release reason, heartbeat_version, attempt state) -> replay; otherwise stale_lease_version (a released lease keeps lease_terminal). Writes: none (row locks only). Errors: QL001 unknown lock mode or change, NULL lease version, p_seen of another offer. Caller: ql.ack_lease, ql.heartbeat_lease, ql.complete_lease, ql.append_log.';


--
-- Name: lease_projection(bigint); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_projection(p_lease_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN (
    SELECT ql_private.lease_answer(l, a.state, r.cancel_requested)
      FROM ql_private.run_leases l
      JOIN ql_private.attempts a ON a.id = l.attempt_id
      JOIN ql_private.runs r ON r.id = l.run_id
     WHERE l.id = p_lease_id);
END
$$;


ALTER FUNCTION ql_private.lease_projection(p_lease_id bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_projection(p_lease_id bigint); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_projection(p_lease_id bigint) IS 'lease@v1 projection (without schema): offer lease fields + state (the lease''s own attempt) + startedAtMs (null before start) + cancelRequested. Never the token or its digest. Read-only.';


--
-- Name: lease_verdict(ql_private.run_leases, ql_private.worker_sessions, ql_private.attempts, ql_private.runs, text, uuid, uuid, bigint, bytea, timestamp with time zone, boolean); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE
        WHEN (p_lease).worker_id <> p_worker_id THEN 'offer_foreign'
        WHEN NOT ql_private.digest_equal((p_lease).token_digest, p_token_digest)
            THEN 'token_mismatch'
        WHEN (p_lease).session_id <> p_session_id
             OR (p_lease).session_generation <> p_generation
             OR (p_session).state NOT IN ('active', 'draining')
             OR (p_session).expires_at <= p_now
             OR (p_lease).release_reason = 'session_replaced'
             OR ((p_lease).release_reason = 'session_closed'
                 AND (p_session).state <> 'draining')
            THEN 'session_replaced'
        WHEN (p_session).state = 'draining' AND (p_lease).started_at IS NULL
            THEN 'session_draining'
        WHEN (p_lease).release_reason = 'expired'
             OR ((p_lease).released_at IS NULL AND (p_lease).started_at IS NULL
                 AND (p_lease).expires_at <= p_now)
            THEN 'lease_expired'
        WHEN (p_lease).released_at IS NOT NULL
            THEN CASE WHEN p_lifecycle AND (p_lease).release_reason = 'lost'
                      THEN 'lease_expired' ELSE 'lease_terminal' END
        WHEN (p_run).current_attempt_id IS DISTINCT FROM (p_lease).attempt_id
             OR ((p_lease).started_at IS NULL AND (p_attempt).state <> 'claimed')
             OR ((p_lease).started_at IS NOT NULL
                 AND (p_attempt).state NOT IN ('starting', 'running'))
            THEN 'attempt_changed'
        WHEN (p_run).execution_revision_id <> (p_lease).execution_revision_id
             OR p_revision_digest IS DISTINCT FROM (p_lease).content_digest
            THEN 'revision_drift'
        WHEN p_lifecycle AND (p_lease).expires_at <= p_now THEN 'lease_expired'
    END
$$;


ALTER FUNCTION ql_private.lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean) IS 'The fence verdict on a lease, from rows the caller read in one statement: first failing category in order offer_foreign, token_mismatch (constant-time), session_replaced, session_draining (draining session, lease never started; a started lease of a draining session passes), lease_expired, lease_terminal, attempt_changed, revision_drift; NULL when all hold. With p_lifecycle (ACK, heartbeat, completion): a live lease past expires_at and a lease released as lost answer lease_expired. Inputs: lease, session, attempt, run, revision digest, the caller''s proof (worker, session, generation, token digest), p_now. Pure (inlined SQL): writes nothing, locks nothing, raises nothing. Caller: ql_private.recover_fence, ql_private.lease_open.';


--
-- Name: lock_run_attempt(uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_attempt_id uuid;
BEGIN
    LOOP
        SELECT rr.current_attempt_id INTO v_attempt_id
          FROM ql_private.runs rr WHERE rr.id = p_run_id;
        IF NOT FOUND THEN
            run := NULL;
            attempt := NULL;
            RETURN;
        END IF;
        BEGIN
            attempt := NULL;
            IF v_attempt_id IS NOT NULL THEN
                SELECT att.* INTO attempt
                  FROM ql_private.attempts att WHERE att.id = v_attempt_id FOR UPDATE;
            END IF;
            SELECT rr.* INTO run FROM ql_private.runs rr WHERE rr.id = p_run_id
               FOR NO KEY UPDATE;
            IF FOUND AND run.current_attempt_id IS DISTINCT FROM v_attempt_id THEN
                RAISE EXCEPTION USING ERRCODE = 'QLR01', MESSAGE = 'current attempt moved';
            END IF;
        EXCEPTION WHEN SQLSTATE 'QLR01' THEN
            CONTINUE;  -- the sub-block's locks are released: read the run again
        END;
        IF run.id IS NULL THEN
            attempt := NULL;  -- deleted (pruned) while we waited
        END IF;
        RETURN;
    END LOOP;
END
$$;


ALTER FUNCTION ql_private.lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts) OWNER TO ql_owner;

--
-- Name: FUNCTION lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts) IS 'Lock a run''s current attempt (FOR UPDATE) then the run (FOR NO KEY UPDATE), the lifecycle order attempt -> run; when the run moved to another attempt meanwhile, both locks are rolled back (sub-block) and it starts again, so it never waits for an attempt while holding the run. Inputs: p_run_id. Returns (run, attempt): run NULL = no such run, attempt NULL = none current. Writes: none. Waits obey the caller''s lock_timeout (55P03 propagates, nothing held from the call). Caller: ql.cancel_run, ql.retry_run, ql.cancel_runs.';


--
-- Name: log_bytes(uuid, bigint, bigint); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) RETURNS bytea
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT coalesce(string_agg(
               substring(c.content
                         FROM (greatest(p_from - c.start_byte, 0) + 1)::integer
                         FOR (least(c.start_byte + octet_length(c.content), p_to)
                              - greatest(c.start_byte, p_from))::integer),
               ''::bytea ORDER BY c.start_byte), ''::bytea)
      FROM ql_private.attempt_log_chunks c
     WHERE c.attempt_id = p_attempt_id
       AND c.start_byte < p_to
       AND c.start_byte >= coalesce(
               (SELECT max(f.start_byte) FROM ql_private.attempt_log_chunks f
                 WHERE f.attempt_id = p_attempt_id AND f.start_byte <= p_from), 0)
       AND c.start_byte + octet_length(c.content) > p_from
$$;


ALTER FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) IS 'The stored bytes [p_from, p_to) of an attempt''s live log (SPEC 15), reassembled from ql_private.attempt_log_chunks (contiguous chunks: the first one needed is the last starting at or before p_from); '''' when nothing is stored there. Index-driven (chunks primary key). Writes: none. Locks: none. Errors: none. Caller: ql.run_log, ql.append_log.';


--
-- Name: matching_classes(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.matching_classes(p_capabilities jsonb) RETURNS integer[]
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_waiting integer[];
BEGIN
    -- The waiting classes first, then each looked up by its key: a join would
    -- be free to hash all of placement_classes.
    v_waiting := ARRAY(SELECT w.class_id FROM ql_private.waiting_classes(v_now) w(class_id));
    RETURN (
        SELECT coalesce(array_agg(pc.id ORDER BY pc.id), '{}')
          FROM unnest(v_waiting) k(class_id)
         CROSS JOIN LATERAL (
               SELECT c.id, c.required FROM ql_private.placement_classes c
                WHERE c.id = k.class_id) pc
         CROSS JOIN LATERAL ql_private.placement_evaluate(
               jsonb_build_object('required', pc.required), p_capabilities) pe
         WHERE pe.passed);
END
$$;


ALTER FUNCTION ql_private.matching_classes(p_capabilities jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION matching_classes(p_capabilities jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.matching_classes(p_capabilities jsonb) IS 'Placement classes with runs waiting (ql_private.waiting_classes: a ready queued run in runs_class_keyset or a due scheduled one in runs_class_due, found by skip scans: one descent per waiting class) whose required placement the capabilities satisfy (placement_evaluate on {required}); classes without waiting runs are never evaluated. Read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: execution_revisions; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.execution_revisions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    task_id uuid NOT NULL,
    revision integer NOT NULL,
    kind text NOT NULL,
    executor text NOT NULL,
    spec jsonb NOT NULL,
    placement jsonb,
    canonical bytea NOT NULL,
    content_digest text NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    signature_kid text,
    signature_jws text,
    CONSTRAINT execution_revisions_content_digest_check CHECK ((content_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT execution_revisions_executor_check CHECK ((executor = 'remote_worker'::text)),
    CONSTRAINT execution_revisions_kind_check CHECK ((kind = 'qinglong/command@v1'::text)),
    CONSTRAINT execution_revisions_placement_check CHECK (((placement IS NULL) OR (jsonb_typeof(placement) = 'object'::text))),
    CONSTRAINT execution_revisions_revision_check CHECK ((revision >= 1)),
    CONSTRAINT execution_revisions_signature_jws_check CHECK (((signature_jws IS NULL) OR ((length(signature_jws) <= 1456) AND (signature_jws ~ '^[A-Za-z0-9_-]{2,}\.\.[A-Za-z0-9_-]{86}$'::text)))),
    CONSTRAINT execution_revisions_signature_kid_check CHECK (((signature_kid IS NULL) OR (signature_kid ~ '^[A-Za-z0-9_-]{1,128}$'::text))),
    CONSTRAINT execution_revisions_signature_pair CHECK (((signature_kid IS NULL) = (signature_jws IS NULL))),
    CONSTRAINT execution_revisions_spec_check CHECK ((jsonb_typeof(spec) = 'object'::text))
);


ALTER TABLE ql_private.execution_revisions OWNER TO ql_owner;

--
-- Name: offer_json(ql_private.run_leases, ql_private.runs, ql_private.execution_revisions); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT jsonb_build_object(
        'offerId', l.offer_id,
        'target', jsonb_build_object(
            'workerId', l.worker_id,
            'sessionId', l.session_id,
            'generation', l.session_generation),
        'candidate', jsonb_build_object(
            'runId', r.id,
            'attemptId', l.attempt_id,
            'projectId', r.project_id,
            'taskId', r.task_id,
            'executionRevisionId', l.execution_revision_id,
            'priority', r.priority,
            'queuedAtMs', ql_private.epoch_ms(r.created_at)),
        'executionRevision', jsonb_build_object(
            'id', er.id,
            'taskId', er.task_id,
            'revision', er.revision,
            'kind', er.kind,
            'executor', er.executor,
            'spec', er.spec,
            'contentDigest', er.content_digest,
            'createdAtMs', ql_private.epoch_ms(er.created_at))
            || CASE WHEN er.placement IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('placement', er.placement) END
            || jsonb_build_object('signature', CASE WHEN er.signature_jws IS NULL THEN NULL
                ELSE jsonb_build_object('kid', er.signature_kid, 'jws', er.signature_jws) END),
        'contentDigest', l.content_digest,
        'placementScore', l.placement_score,
        'lease', ql_private.lease_json(l))
$$;


ALTER FUNCTION ql_private.offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions) OWNER TO ql_owner;

--
-- Name: FUNCTION offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions) IS 'offer@v1 body (without schema/status) from a lease, its run and its pinned revision (executionRevision.signature {kid, jws} or null, SPEC 16.1). Pure; never carries the token or its digest. Used by the claim and by every replay.';


--
-- Name: offer_projection(bigint); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.offer_projection(p_lease_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    -- plpgsql, not SQL: a non-inlinable SQL function is re-planned on every call,
    -- a plpgsql statement keeps its plan for the connection.
    RETURN (SELECT ql_private.offer_json(l, r, er)
              FROM ql_private.run_leases l
              JOIN ql_private.runs r ON r.id = l.run_id
              JOIN ql_private.execution_revisions er ON er.id = l.execution_revision_id
             WHERE l.id = p_lease_id);
END
$$;


ALTER FUNCTION ql_private.offer_projection(p_lease_id bigint) OWNER TO ql_owner;

--
-- Name: FUNCTION offer_projection(p_lease_id bigint); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.offer_projection(p_lease_id bigint) IS 'offer@v1 projection (without schema/status) rebuilt from the durable lease, run and pinned revision through ql_private.offer_json; identical for claim and replay; never carries the token or its digest. Read-only.';


--
-- Name: parse_uuid(text, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.parse_uuid(p_value text, p_field text) RETURNS uuid
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
    IF p_value IS NULL
       OR p_value !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = p_field,
            MESSAGE = format('%s must be a lowercase canonical UUID', p_field);
    END IF;
    RETURN p_value::uuid;
END
$_$;


ALTER FUNCTION ql_private.parse_uuid(p_value text, p_field text) OWNER TO ql_owner;

--
-- Name: FUNCTION parse_uuid(p_value text, p_field text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.parse_uuid(p_value text, p_field text) IS 'Parse a lowercase canonical UUID argument. Pure. QL001 (with the field name, never the value, in the message and as COLUMN) when NULL or malformed.';


--
-- Name: placement_class_of(uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.placement_class_of(p_revision_id uuid) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    req jsonb;
    class_id integer;
BEGIN
    SELECT coalesce(er.placement -> 'required', '{"executors": ["remote-worker"]}'::jsonb)
      INTO req
      FROM ql_private.execution_revisions er WHERE er.id = p_revision_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'execution revision not found';
    END IF;
    SELECT pc.id INTO class_id FROM ql_private.placement_classes pc WHERE pc.required = req
       FOR KEY SHARE;
    IF FOUND THEN
        RETURN class_id;
    END IF;
    INSERT INTO ql_private.placement_classes (required) VALUES (req)
        ON CONFLICT (required) DO NOTHING
        RETURNING id INTO class_id;
    IF class_id IS NULL THEN  -- a concurrent enqueue created it first
        SELECT pc.id INTO class_id FROM ql_private.placement_classes pc WHERE pc.required = req
           FOR KEY SHARE;
    END IF;
    RETURN class_id;
END
$$;


ALTER FUNCTION ql_private.placement_class_of(p_revision_id uuid) OWNER TO ql_owner;

--
-- Name: FUNCTION placement_class_of(p_revision_id uuid); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.placement_class_of(p_revision_id uuid) IS 'Placement class id (normalized required placement) of an execution revision, created on first use (ON CONFLICT DO NOTHING); an existing class row is locked FOR KEY SHARE (ql.prune_fleet skips it). Caller: ql.enqueue_runs. QL004 revision not found.';


--
-- Name: placement_evaluate(jsonb, jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer) RETURNS record
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    req jsonb;
    pref jsonb;
    cap_labels jsonb;
    cap_runtimes jsonb;
BEGIN
    IF p_capabilities IS NULL OR jsonb_typeof(p_capabilities) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities must be a JSON object';
    END IF;
    passed := false;
    score := 0;
    req := p_placement -> 'required';            -- NULL when placement is NULL (R-REV-2)
    cap_labels := coalesce(p_capabilities -> 'labels', '{}');
    cap_runtimes := coalesce(p_capabilities -> 'runtimes', '{}');

    -- 1. executors: containment of string arrays is exactly "every required one present"
    --    (a plpgsql simple expression: no query is started for it).
    IF NOT coalesce(p_capabilities -> 'executors', '[]')
           @> coalesce(req -> 'executors', '["remote-worker"]') THEN
        category := 'executor';
        RETURN;
    END IF;

    -- 2./3. labels, then runtimes, in ONE query (each query costs a few µs of executor
    --    start-up; CASE keeps the order and skips runtimes once a label failed).
    --    `allowed ? value` holds only when value is a string in the allowed array; an
    --    absent capability label gives NULL, which coalesce turns into a failure.
    --    CASE (not AND) guarantees semver_satisfies never sees an absent runtime.
    IF coalesce(req -> 'labels', '{}') <> '{}' OR coalesce(req -> 'runtimes', '{}') <> '{}' THEN
        SELECT CASE
                 WHEN EXISTS (
                   SELECT 1 FROM jsonb_each(req -> 'labels') AS l(key, allowed)
                    WHERE NOT coalesce(l.allowed ? (cap_labels ->> l.key), false))
                 THEN 'label'
                 WHEN EXISTS (
                   SELECT 1 FROM jsonb_each(req -> 'runtimes') AS r(name, comparators)
                    WHERE NOT CASE WHEN cap_runtimes ? r.name
                                   THEN ql_private.semver_satisfies(cap_runtimes ->> r.name, r.comparators)
                                   ELSE false END)
                 THEN 'runtime'
               END
          INTO category;
        IF category IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;

    passed := true;
    -- Score: every preferred term in one query; a term counts when all its labels
    -- and runtimes hold by the same rules as above.
    pref := p_placement -> 'preferred';
    IF pref IS NOT NULL AND jsonb_typeof(pref) = 'array' AND pref <> '[]' THEN
        SELECT coalesce(sum((t.term ->> 'weight')::integer), 0)::integer
          INTO score
          FROM jsonb_array_elements(pref) AS t(term)
         WHERE NOT EXISTS (
                 SELECT 1 FROM jsonb_each(t.term -> 'labels') AS l(key, allowed)
                  WHERE NOT coalesce(l.allowed ? (cap_labels ->> l.key), false))
           AND NOT EXISTS (
                 SELECT 1 FROM jsonb_each(t.term -> 'runtimes') AS r(name, comparators)
                  WHERE NOT CASE WHEN cap_runtimes ? r.name
                                 THEN ql_private.semver_satisfies(cap_runtimes ->> r.name, r.comparators)
                                 ELSE false END);
    END IF;
END
$$;


ALTER FUNCTION ql_private.placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer) OWNER TO ql_owner;

--
-- Name: FUNCTION placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer) IS 'Evaluate a normalized placement (NULL = required executor remote-worker, R-REV-2) against stored worker capabilities: passed, first failing category (executor, label, runtime) and score = sum of weights of holding preferred terms (0 unless passed). Pure. QL001 capabilities not an object.';


--
-- Name: pool_candidate_page(uuid[], smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) RETURNS TABLE(run_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT c.id, c.execution_revision_id, c.priority, c.queue_seq
      FROM unnest(p_pools) AS k(pool_id)
     CROSS JOIN LATERAL (
        (SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE r.pool_id = k.pool_id
            AND (-(r.priority::integer), r.queue_seq, r.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.execution_revision_id, d.priority, d.queue_seq
           FROM (SELECT dr.id, dr.execution_revision_id, dr.priority, dr.queue_seq,
                        dr.current_attempt_id, dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.pool_id = k.pool_id
                    AND dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE (-(d.priority::integer), d.queue_seq, d.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of queued candidates of the given pools (a worker''s grants, SPEC 13.1/13.3), in priority DESC, queue_seq, id order: per pool one runs_pool_keyset range scan (ready runs) and the due scheduled runs from runs_pool_due (at most 4 x (limit + 1), due_at order, keyset-filtered), merged. Passes over rows a concurrent claim holds. Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: pool_class_candidate_page(uuid[], integer[], smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) RETURNS TABLE(run_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT c.id, c.execution_revision_id, c.priority, c.queue_seq
      FROM unnest(p_pools) AS p(pool_id)
     CROSS JOIN unnest(p_classes) AS k(class_id)
     CROSS JOIN LATERAL (
        (SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
           FROM ql_private.runs r
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
          WHERE r.pool_id = p.pool_id
            AND r.placement_class = k.class_id
            AND (-(r.priority::integer), r.queue_seq, r.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
            AND r.due_at IS NULL
            AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
          ORDER BY -(r.priority::integer), r.queue_seq, r.id
          LIMIT p_limit + 1)
        UNION ALL
        (SELECT d.id, d.execution_revision_id, d.priority, d.queue_seq
           FROM (SELECT dr.id, dr.execution_revision_id, dr.priority, dr.queue_seq,
                        dr.current_attempt_id, dr.xmax AS row_xmax
                   FROM ql_private.runs dr
                  WHERE dr.pool_id = p.pool_id
                    AND dr.placement_class = k.class_id
                    AND dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
                    AND dr.due_at IS NOT NULL AND dr.due_at <= p_now
                  ORDER BY dr.due_at
                  LIMIT (p_limit + 1) * 4) d
          CROSS JOIN LATERAL ql_private.dispatchable_attempt(d.current_attempt_id, p_now) ok
          WHERE (-(d.priority::integer), d.queue_seq, d.id)
                > (coalesce(-(p_after_priority::integer), -2147483648),
                   coalesce(p_after_seq, -9223372036854775808),
                   coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
            AND NOT ql_private.xid_in_progress(d.row_xmax, p_snapshot, p_own)
          ORDER BY -(d.priority::integer), d.queue_seq, d.id
          LIMIT p_limit + 1)) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of queued candidates of the given pools (a worker''s grants, SPEC 13.1/13.3) and placement classes (the session''s matching classes), in priority DESC, queue_seq, id order: per (pool, class) pair one runs_pool_class_keyset range scan (ready runs) and the due scheduled runs from runs_pool_class_due (at most 4 x (limit + 1), due_at order, keyset-filtered), merged. The class page of a worker without the all-pools grant: a blocked head in its pools is jumped over (SPEC 3.1). Cost: two index descents per pair, independent of queue depth. Passes over rows a concurrent claim holds. Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: pools; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.pools (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT pools_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text))
);


ALTER TABLE ql_private.pools OWNER TO ql_owner;

--
-- Name: pool_of(text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.pool_of(p_pool text) RETURNS ql_private.pools
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
    v_pool ql_private.pools;
BEGIN
    IF p_pool IS NULL
       OR p_pool !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}/[a-z0-9][a-z0-9._-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
            MESSAGE = 'pool must be PROJECT/NAME (name ^[a-z0-9][a-z0-9._-]{0,62}$)';
    END IF;
    SELECT pl.* INTO v_pool
      FROM ql_private.projects p
      JOIN ql_private.pools pl ON pl.project_id = p.id
     WHERE p.name = split_part(p_pool, '/', 1) AND pl.name = split_part(p_pool, '/', 2);
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'pool', MESSAGE = 'pool not found';
    END IF;
    RETURN v_pool;
END
$_$;


ALTER FUNCTION ql_private.pool_of(p_pool text) OWNER TO ql_owner;

--
-- Name: FUNCTION pool_of(p_pool text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.pool_of(p_pool text) IS 'Resolve a pool reference P/N to its pools row. Read-only, no locks. Errors: QL001 malformed (COLUMN pool), QL004 unknown pool (COLUMN pool). Caller: ql.grant_pool, ql.revoke_pool, ql.publish_revision.';


--
-- Name: pool_ready_candidate_page(uuid[], smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) RETURNS TABLE(run_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT c.id, c.execution_revision_id, c.priority, c.queue_seq
      FROM unnest(p_pools) AS k(pool_id)
     CROSS JOIN LATERAL (
        SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
          FROM ql_private.runs r
         CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
         WHERE r.pool_id = k.pool_id
           AND (-(r.priority::integer), r.queue_seq, r.id)
               > (coalesce(-(p_after_priority::integer), -2147483648),
                  coalesce(p_after_seq, -9223372036854775808),
                  coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
           AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
           AND r.due_at IS NULL
           AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
         ORDER BY -(r.priority::integer), r.queue_seq, r.id
         LIMIT p_limit + 1) c
     ORDER BY -(c.priority::integer), c.queue_seq, c.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of the ready queued candidates of the given pools (a worker''s grants, SPEC 13.1/13.3) in priority DESC, queue_seq, id order: per pool one runs_pool_keyset range scan, merged. pool_candidate_page''s first source alone, read while no scheduled run is due (a cheaper plan to start). Passes over rows a concurrent claim holds. Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: producer_run(uuid, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_run_id uuid := ql_private.parse_uuid(p_run_id, 'runId');
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ql_private.runs r
                    WHERE r.id = v_run_id AND r.project_id = p_project_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'runId', MESSAGE = 'run not found';
    END IF;
    RETURN v_run_id;
END
$$;


ALTER FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_run(p_project_id uuid, p_run_id text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text) IS 'A producer''s run must belong to the token''s project: returns its id; an unknown or foreign run is QL004 (COLUMN runId) alike, never a 403. QL001 malformed id. Writes: none. Locks: none. Caller: ql.producer_*.';


--
-- Name: producer_task(uuid, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.producer_task(p_project_id uuid, p_task text) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_task_id uuid;
    v_parts text[];
BEGIN
    IF p_task ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        SELECT t.id INTO v_task_id FROM ql_private.tasks t
         WHERE t.id = p_task::uuid AND t.project_id = p_project_id;
    ELSIF p_task ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        v_parts := string_to_array(p_task, '/');
        SELECT t.id INTO v_task_id
          FROM ql_private.projects p JOIN ql_private.tasks t ON t.project_id = p.id
         WHERE p.id = p_project_id AND p.name = v_parts[1] AND t.name = v_parts[2];
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'task',
            MESSAGE = 'task must be a task id or "<project>/<name>"';
    END IF;
    IF v_task_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'task', MESSAGE = 'task not found';
    END IF;
    RETURN v_task_id;
END
$_$;


ALTER FUNCTION ql_private.producer_task(p_project_id uuid, p_task text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_task(p_project_id uuid, p_task text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.producer_task(p_project_id uuid, p_task text) IS 'A producer''s task (id or "<project>/<name>") confined to the token''s project: returns its id; unknown or foreign = QL004 (COLUMN task), malformed = QL001 (COLUMN task). Writes: none. Locks: none. Caller: ql.producer_enqueue, ql.producer_list_runs.';


--
-- Name: producer_token(text, bytea, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_token ql_private.project_tokens;
    v_match boolean;
BEGIN
    IF p_token_id IS NOT NULL AND p_token_id ~ '^[a-z0-9]{16}$' THEN
        SELECT t.* INTO v_token FROM ql_private.project_tokens t WHERE t.id = p_token_id;
    END IF;
    v_match := ql_private.digest_equal(
        coalesce(v_token.token_digest, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea),
        p_token_digest);
    IF v_token.id IS NULL OR NOT v_match OR v_token.revoked_at IS NOT NULL
       OR (v_token.expires_at IS NOT NULL AND v_token.expires_at <= clock_timestamp()) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL030', MESSAGE = 'token_invalid';
    END IF;
    IF p_scope IS NULL OR NOT p_scope = ANY (v_token.scopes) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL031', MESSAGE = 'scope_missing';
    END IF;
    RETURN v_token.project_id;
END
$_$;


ALTER FUNCTION ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) OWNER TO ql_owner;

--
-- Name: FUNCTION producer_token(p_token_id text, p_token_digest bytea, p_scope text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) IS 'Producer authentication (SPEC 13.4): the token id + SHA-256 digest of the whole token must match (digest_equal, constant time; an unknown id still compares), unrevoked, unexpired (clock_timestamp) and hold p_scope; returns the token''s project id. Writes: none. Locks: none. Errors: QL030 token_invalid (401), QL031 scope_missing (403); never the id or digest in a message. Caller: ql.producer_*.';


--
-- Name: project_default_pool(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.project_default_pool() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO ql_private.pools (project_id, name) VALUES (NEW.id, 'default');
    RETURN NULL;
END
$$;


ALTER FUNCTION ql_private.project_default_pool() OWNER TO ql_owner;

--
-- Name: FUNCTION project_default_pool(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.project_default_pool() IS 'Trigger: every new project gets its pool `default` in the same statement (SPEC 13.1).';


--
-- Name: project_runs_page(uuid, text[], integer, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET jit TO 'off'
    AS $_$
DECLARE
    v_all_states constant text[] := ARRAY['queued', 'dispatching', 'starting', 'running',
                                          'succeeded', 'failed', 'cancelled'];
    v_states text[];
    v_after bigint := 9223372036854775807;
    v_ids uuid[];
    v_seqs bigint[];
    v_runs jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_after IS NOT NULL THEN
        IF p_after !~ '^[0-9]{1,19}$' OR p_after::numeric > 9223372036854775807 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'after',
                MESSAGE = 'after must be the cursor (next) of a previous page';
        END IF;
        v_after := p_after::bigint;
    END IF;
    IF p_states IS NULL OR cardinality(p_states) = 0 THEN
        v_states := v_all_states;
    ELSE
        IF EXISTS (SELECT 1 FROM unnest(p_states) s WHERE s IS NULL OR s <> ALL (v_all_states)) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'state',
                MESSAGE = 'state must be one of queued, dispatching, starting, running, '
                          'succeeded, failed, cancelled';
        END IF;
        v_states := ARRAY(SELECT DISTINCT s FROM unnest(p_states) s);
    END IF;

    SELECT array_agg(x.id ORDER BY x.queue_seq DESC),
           array_agg(x.queue_seq ORDER BY x.queue_seq DESC)
      INTO v_ids, v_seqs
      FROM (SELECT r.id, r.queue_seq
              FROM unnest(v_states) AS st(state)
             CROSS JOIN LATERAL (
                   SELECT rr.id, rr.queue_seq FROM ql_private.runs rr
                    WHERE rr.project_id = p_project_id AND rr.state = st.state
                      AND rr.queue_seq < v_after
                    ORDER BY rr.queue_seq DESC
                    LIMIT p_limit + 1) r
             ORDER BY r.queue_seq DESC
             LIMIT p_limit + 1) x;

    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'runId', r.id,
               'taskId', r.task_id,
               'project', pr.name,
               'taskName', t.name,
               'pool', pr.name || '/' || pl.name,
               'state', r.state,
               'priority', r.priority,
               'queuedAtMs', ql_private.epoch_ms(r.created_at),
               'notBeforeMs', ql_private.epoch_ms(coalesce(r.due_at, a.not_before)),
               'attempts', a.attempt_no,
               'updatedAtMs', ql_private.epoch_ms(r.updated_at))
               ORDER BY o.ord), '[]'::jsonb)
      INTO v_runs
      FROM unnest(coalesce(v_ids, '{}')) WITH ORDINALITY AS o(id, ord)
      JOIN ql_private.runs r ON r.id = o.id
      JOIN ql_private.tasks t ON t.id = r.task_id
      JOIN ql_private.projects pr ON pr.id = r.project_id
      JOIN ql_private.pools pl ON pl.id = r.pool_id
      LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id
     WHERE o.ord <= p_limit;
    RETURN jsonb_build_object(
        'runs', v_runs,
        'next', CASE WHEN cardinality(v_ids) > p_limit THEN v_seqs[p_limit]::text END);
END
$_$;


ALTER FUNCTION ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text) OWNER TO ql_owner;

--
-- Name: FUNCTION project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text) IS 'The SPEC 9.4 list page ({runs, next}, newest first, the fields of ql.list_runs) of every task of one project: one backward range scan of runs_project_state_seq per state, each <= limit + 1 rows, merged; no count, no OFFSET. Writes: none (STABLE). Errors: QL001 state/after, QL006 limit (COLUMN = wire field). Caller: ql.producer_list_runs.';


--
-- Name: pull_bounds(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    s record := ql_private.settings();
    k text;
BEGIN
    pages := s.default_pages;
    page_size := s.default_page_size;
    claim_attempts := s.default_claim_attempts;
    IF p_bounds IS NULL OR p_bounds = 'null'::jsonb THEN
        RETURN;
    END IF;
    IF jsonb_typeof(p_bounds) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'bounds must be a JSON object';
    END IF;
    FOR k IN SELECT jsonb_object_keys(p_bounds) LOOP
        IF k NOT IN ('pages', 'pageSize', 'claimAttempts') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('bounds has unknown field %s', left(k, 32));
        END IF;
    END LOOP;
    pages := ql_private.bound_value(p_bounds, 'pages', pages, s.max_pages);
    page_size := ql_private.bound_value(p_bounds, 'pageSize', page_size, s.max_page_size);
    claim_attempts := ql_private.bound_value(p_bounds, 'claimAttempts', claim_attempts,
                                             s.max_claim_attempts);
END
$$;


ALTER FUNCTION ql_private.pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer) OWNER TO ql_owner;

--
-- Name: FUNCTION pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer) IS 'Validate pull bounds {pages, pageSize, claimAttempts}: defaults 2/8/8, caps 16/64/64. QL001 malformed/unknown/below 1, QL002 above a cap. Pure.';


--
-- Name: ready_candidate_page(smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) RETURNS TABLE(run_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
      FROM ql_private.runs r
     CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
     WHERE (-(r.priority::integer), r.queue_seq, r.id)
           > (coalesce(-(p_after_priority::integer), -2147483648),
              coalesce(p_after_seq, -9223372036854775808),
              coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
       AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
       AND r.due_at IS NULL
       AND NOT ql_private.xid_in_progress(r.xmax, p_snapshot, p_own)
     ORDER BY -(r.priority::integer), r.queue_seq, r.id
     LIMIT p_limit + 1
$$;


ALTER FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'One keyset page (limit + 1 rows) of ready queued candidates only (candidate_page''s first source) in priority DESC, queue_seq, id order: a runs_candidate_keyset range scan with per-row attempt probes; passes over rows a concurrent claim holds. Read by a pull instead of candidate_page while no scheduled run is due and no offer expired unstarted (a cheaper plan to start). Inlinable SQL, read-only. Caller: ql_private.scan_and_claim.';


--
-- Name: ready_priorities(integer); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.ready_priorities(p_limit integer) RETURNS SETOF integer
    LANGUAGE sql STABLE
    AS $$
    WITH RECURSIVE prio(neg) AS (
        SELECT (SELECT -(r.priority::integer) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
        UNION ALL
        SELECT (SELECT -(r.priority::integer) FROM ql_private.runs r
                 WHERE -(r.priority::integer) > p.neg
                   AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL
                 ORDER BY -(r.priority::integer), r.queue_seq, r.id
                 LIMIT 1)
          FROM prio p
         WHERE p.neg IS NOT NULL
    )
    SELECT p.neg FROM prio p WHERE p.neg IS NOT NULL LIMIT p_limit
$$;


ALTER FUNCTION ql_private.ready_priorities(p_limit integer) OWNER TO ql_owner;

--
-- Name: FUNCTION ready_priorities(p_limit integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.ready_priorities(p_limit integer) IS 'The distinct priorities of the ready queue as -priority in runs_candidate_keyset order (highest first), at most p_limit: a loose index scan, one descent per priority. Inlinable SQL, read-only. Callers: ql.queue_depth, ql.waiting_runs.';


--
-- Name: recover_fence(ql_private.run_leases, uuid, uuid, bigint, bytea); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_category text;
BEGIN
    -- After every lease fence, the pool grant (SPEC §13.1): a replay never
    -- hands back an offer of a pool the worker no longer holds — started or not —
    -- and answers lease_terminal (the offer is over for this worker; ql.revoke_pool
    -- released it if it had not started).
    SELECT coalesce(
               ql_private.lease_verdict(l, ws, aa, rr, er.content_digest, p_worker_id,
                                        p_session_id, p_generation, p_token_digest, v_now,
                                        false),
               CASE WHEN NOT coalesce(gw.all_pools, false)
                         AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                                          WHERE g.worker_id = l.worker_id
                                            AND g.pool_id = rr.pool_id)
                    THEN 'lease_terminal' END)
      INTO v_category
      FROM (SELECT 1) AS one
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = l.session_id
      LEFT JOIN ql_private.attempts aa ON aa.id = l.attempt_id
      LEFT JOIN ql_private.runs rr ON rr.id = l.run_id
      LEFT JOIN ql_private.workers gw ON gw.id = l.worker_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id;
    RETURN v_category;
END
$$;


ALTER FUNCTION ql_private.recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea) IS 'Fences of an offer replay (ql_private.lease_verdict, replay rules) in order: offer_foreign, token_mismatch, session_replaced, session_draining, lease_expired, lease_terminal, attempt_changed, revision_drift; then lease_terminal when the worker no longer holds a grant for the run''s pool (SPEC 13.1); NULL when all hold. Reads session, worker, attempt, run and revision digest in one statement. Read-only.';


--
-- Name: recover_offer(uuid, uuid, bigint, uuid, bytea); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    l ql_private.run_leases;
    category text;
BEGIN
    SELECT * INTO l FROM ql_private.run_leases WHERE offer_id = p_offer_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    category := ql_private.recover_fence(l, p_worker_id, p_session_id, p_generation,
                                         p_token_digest);
    IF category IS NOT NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', category);
    END IF;
    RETURN jsonb_build_object('status', 'idempotent',
                              'offer', ql_private.offer_projection(l.id));
END
$$;


ALTER FUNCTION ql_private.recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea) OWNER TO ql_owner;

--
-- Name: FUNCTION recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea) IS 'Pull step 1: replay of an existing offer id -> {status: idempotent, offer} rebuilt from the durable lease, or {status: conflict, category}; NULL when the offer id is new. Read-only, no locks.';


--
-- Name: refuse_referenced_delete(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.refuse_referenced_delete() RETURNS trigger
    LANGUAGE plpgsql
    SET max_parallel_workers_per_gather TO '0'
    AS $$
DECLARE
    v_referenced boolean;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', TG_ARGV[0]) INTO v_referenced;
    ELSE
        -- One index probe of the child per deleted row, whatever the estimates:
        -- the LATERAL ... LIMIT 1 can only be a parameterized nested loop. (A
        -- plain join is planned the same way today, but a prune batch deletes
        -- the children first, so the check never stops early and a hash join
        -- over a million-row child would be a full scan per batch.)
        -- TG_ARGV[3], when given, narrows the referencing rows (the session
        -- guard counts only live leases, migration 0017).
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM gone g CROSS JOIN LATERAL '
                       '(SELECT 1 FROM %s c WHERE c.%I = g.%I AND (%s) LIMIT 1) hit)',
                       TG_ARGV[0], TG_ARGV[1], TG_ARGV[2],
                       CASE WHEN TG_NARGS > 3 THEN TG_ARGV[3] ELSE 'true' END)
           INTO v_referenced;
    END IF;
    IF v_referenced THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = format('%s on %s.%s refused: rows of %s (%s) still reference it',
                             TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[1]);
    END IF;
    RETURN NULL;
END
$$;


ALTER FUNCTION ql_private.refuse_referenced_delete() OWNER TO ql_owner;

--
-- Name: FUNCTION refuse_referenced_delete(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.refuse_referenced_delete() IS 'Trigger: the delete half of a dropped foreign key (0014). AFTER DELETE FOR EACH STATEMENT (transition table gone): 23503 when a row of TG_ARGV[0] still references a deleted row (TG_ARGV[1] = child column, TG_ARGV[2] = parent key, optional TG_ARGV[3] = a condition on the child rows that count); BEFORE TRUNCATE: 23503 while TG_ARGV[0] has any row. Read-only.';


--
-- Name: refuse_revision_change(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.refuse_revision_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'QL021',
        MESSAGE = format('execution revisions are immutable (%s refused)', TG_OP);
END
$$;


ALTER FUNCTION ql_private.refuse_revision_change() OWNER TO ql_owner;

--
-- Name: release_ungranted_leases(uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.release_ungranted_leases(p_session_id uuid) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    l record;
    v_now timestamptz;
    v_released integer := 0;
BEGIN
    FOR l IN SELECT rl.id, rl.attempt_id, rl.run_id
               FROM ql_private.run_leases rl
               JOIN ql_private.runs r ON r.id = rl.run_id
               JOIN ql_private.workers w ON w.id = rl.worker_id
              WHERE rl.session_id = p_session_id
                AND rl.released_at IS NULL AND rl.started_at IS NULL
                AND NOT w.all_pools
                AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                                 WHERE g.worker_id = rl.worker_id AND g.pool_id = r.pool_id)
              ORDER BY rl.id
    LOOP
        PERFORM 1 FROM ql_private.attempts a WHERE a.id = l.attempt_id FOR UPDATE;
        PERFORM 1 FROM ql_private.runs r WHERE r.id = l.run_id FOR NO KEY UPDATE;
        v_now := clock_timestamp();
        UPDATE ql_private.run_leases rl
           SET released_at = v_now, release_reason = 'grant_revoked', updated_at = v_now
         WHERE rl.id = l.id AND rl.released_at IS NULL AND rl.started_at IS NULL;
        IF FOUND THEN
            v_released := v_released + 1;
            UPDATE ql_private.runs r
               SET state = 'queued', updated_at = v_now
             WHERE r.id = l.run_id AND r.state = 'dispatching'
               AND r.current_attempt_id = l.attempt_id;
        END IF;
    END LOOP;
    RETURN v_released;
END
$$;


ALTER FUNCTION ql_private.release_ungranted_leases(p_session_id uuid) OWNER TO ql_owner;

--
-- Name: FUNCTION release_ungranted_leases(p_session_id uuid); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.release_ungranted_leases(p_session_id uuid) IS 'Release the live unstarted leases of a session whose run''s pool its worker no longer holds (reason grant_revoked) and re-queue their runs; started leases may finish. Locks attempt, run, lease: the one lifecycle order (the session row locked by the caller). Returns the number released. Caller: ql.revoke_pool.';


--
-- Name: release_unstarted_leases(uuid[], text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    l record;
    now_ts timestamptz;
    released integer := 0;
BEGIN
    FOR l IN SELECT rl.id, rl.attempt_id, rl.run_id
               FROM ql_private.run_leases rl
              WHERE rl.session_id = ANY (p_session_ids)
                AND rl.released_at IS NULL AND rl.started_at IS NULL
              ORDER BY rl.id
    LOOP
        PERFORM 1 FROM ql_private.attempts a WHERE a.id = l.attempt_id FOR UPDATE;
        PERFORM 1 FROM ql_private.runs r WHERE r.id = l.run_id FOR NO KEY UPDATE;
        now_ts := clock_timestamp();
        UPDATE ql_private.run_leases rl
           SET released_at = now_ts, release_reason = p_reason, updated_at = now_ts
         WHERE rl.id = l.id AND rl.released_at IS NULL AND rl.started_at IS NULL;
        IF FOUND THEN
            released := released + 1;
            UPDATE ql_private.runs r
               SET state = 'queued', updated_at = now_ts
             WHERE r.id = l.run_id AND r.state = 'dispatching'
               AND r.current_attempt_id = l.attempt_id;
        END IF;
    END LOOP;
    RETURN released;
END
$$;


ALTER FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text) OWNER TO ql_owner;

--
-- Name: FUNCTION release_unstarted_leases(p_session_ids uuid[], p_reason text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text) IS 'Release the live unstarted leases of the given sessions (reason session_replaced|session_closed) and re-queue their runs. Locks attempt, run, lease: the one lifecycle order. Caller: open_session, close_session.';


--
-- Name: require_digest(bytea, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.require_digest(p_value bytea, p_field text) RETURNS bytea
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_value IS NULL OR octet_length(p_value) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s must be a 32-byte SHA-256 digest', p_field);
    END IF;
    RETURN p_value;
END
$$;


ALTER FUNCTION ql_private.require_digest(p_value bytea, p_field text) OWNER TO ql_owner;

--
-- Name: FUNCTION require_digest(p_value bytea, p_field text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.require_digest(p_value bytea, p_field text) IS 'Require a 32-byte SHA-256 digest argument. Pure. QL001 when NULL or of another length.';


--
-- Name: require_reason(text, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.require_reason(p_value text, p_field text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    IF p_value IS NOT NULL AND p_value !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s must match ^[a-z][a-z0-9_]{0,63}$', p_field);
    END IF;
    RETURN p_value;
END
$_$;


ALTER FUNCTION ql_private.require_reason(p_value text, p_field text) OWNER TO ql_owner;

--
-- Name: FUNCTION require_reason(p_value text, p_field text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.require_reason(p_value text, p_field text) IS 'Require a bounded low-cardinality reason code ^[a-z][a-z0-9_]{0,63}$ (NULL passes). Pure. QL001 when malformed.';


--
-- Name: run_default_pool(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.run_default_pool() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    SELECT t.pool_id INTO NEW.pool_id FROM ql_private.tasks t WHERE t.id = NEW.task_id;
    RETURN NEW;
END
$$;


ALTER FUNCTION ql_private.run_default_pool() OWNER TO ql_owner;

--
-- Name: FUNCTION run_default_pool(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.run_default_pool() IS 'Trigger: a run inserted without a pool gets its task''s pool (ql.enqueue_runs always gives it).';


--
-- Name: scan_and_claim(ql_private.worker_sessions, uuid, bytea, integer, integer, integer); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    -- In-progress transactions as of the pull's start: rows they hold are passed
    -- over by the scan (candidate_page); a later claimer's xid is above its xmax.
    v_snapshot pg_snapshot := pg_current_snapshot();
    v_own xid8 := pg_current_xact_id_if_assigned();
    v_classes integer[];        -- NULL: whole queue; else only these placement classes
    -- The pools the session's worker may take from (SPEC §13.1): NULL = every
    -- pool (the '*' grant); else the granted pools, read through their own
    -- keyset (ql_private.pool_candidate_page, SPEC §13.3). The claim re-checks
    -- the grant on the locked rows; this read only bounds the scan.
    v_pools uuid[] := (SELECT CASE WHEN w.all_pools THEN NULL
                                   ELSE ARRAY(SELECT g.pool_id
                                                FROM ql_private.worker_pool_grants g
                                               WHERE g.worker_id = w.id
                                               ORDER BY g.pool_id) END
                         FROM ql_private.workers w WHERE w.id = p_session.worker_id);
    v_candidate record;
    v_claim record;
    v_run_ids uuid[];           -- this page's passers, in scan order
    v_scores integer[];
    v_priorities smallint[];
    v_passing integer;
    v_examined_before integer := 0;
    v_rev_ids uuid[] := '{}';
    v_rev_passed boolean[] := '{}';
    v_rev_category text[] := '{}';
    v_rev_score integer[] := '{}';
    v_verdict record;
    v_k integer;
    v_after_priority smallint;
    v_after_seq bigint;
    v_after_id uuid;
    v_pages_read integer := 0;
    v_examined integer := 0;
    v_attempts integer := 0;
    v_races integer := 0;
    v_mm_executor integer := 0;
    v_mm_label integer := 0;
    v_mm_runtime integer := 0;
    v_truncated boolean := false;
    v_session_locked boolean := false;
    v_any_passed boolean := false;
    v_page refcursor;
    -- Whether the pull reads the whole queue (candidate_page) rather than the
    -- ready runs alone: a scheduled run is due or an offer expired unstarted at
    -- `now` (two index probes, once per pull; runs_due, run_leases_unstarted_expiry).
    -- Each probe reads the first entry of its index in index order (ORDER BY
    -- the indexed column, LIMIT 1), not an EXISTS with a range condition: a
    -- generic plan of that EXISTS made while run_leases was small walked
    -- run_leases_session_live_counted (every live lease of every session, with
    -- a heap fetch each) on every pull for the life of the connection; only an
    -- index ordered by the column serves the ORDER BY without a sort, so the
    -- planner picks it whatever the statistics (tests/sql/pull_offer.sql).
    v_whole_queue boolean := coalesce((
            SELECT dr.due_at FROM ql_private.runs dr
             WHERE dr.state = 'queued' AND dr.runtime_owned AND NOT dr.cancel_requested
               AND dr.due_at IS NOT NULL
             ORDER BY dr.due_at LIMIT 1) <= v_now, false)
        OR coalesce((
            SELECT el.expires_at FROM ql_private.run_leases el
             WHERE el.released_at IS NULL AND el.started_at IS NULL
             ORDER BY el.expires_at LIMIT 1) <= v_now, false);
BEGIN
    IF v_pools IS NOT NULL AND cardinality(v_pools) = 0 THEN
        -- No grant: nothing this worker may take, so nothing is read (SPEC §13.1).
        RETURN ql_private.idle_result('no_candidates', 0, 0, 0, 0,
            '{"executor":0,"label":0,"runtime":0,"capacity":0}'::jsonb, false);
    END IF;
    FOR v_page_no IN 1 .. p_pages LOOP
        v_truncated := false;
        v_pages_read := v_pages_read + 1;
        v_run_ids := '{}';
        v_scores := '{}';
        v_priorities := '{}';
        v_passing := 0;
        -- The page's source, each its own statement (a plan is started on every
        -- execution, so none carries the others' branches): the session's
        -- placement classes once the pull switched to them (within the granted
        -- pools for a worker without the all-pools grant); the whole queue
        -- (three merged sources) while a scheduled run is due or an offer expired
        -- unstarted; else, the steady state, the ready runs alone.
        IF v_pools IS NOT NULL AND v_classes IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_class_candidate_page(v_pools, v_classes,
                           v_after_priority, v_after_seq, v_after_id, p_page_size, v_now,
                           v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_pools IS NOT NULL AND v_whole_queue THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_candidate_page(v_pools, v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_pools IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.pool_ready_candidate_page(v_pools, v_after_priority,
                           v_after_seq, v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_classes IS NOT NULL THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.class_candidate_page(v_classes, v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSIF v_whole_queue THEN
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.candidate_page(v_after_priority, v_after_seq, v_after_id,
                                                 p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        ELSE
            OPEN v_page FOR
                SELECT c.run_id, c.execution_revision_id, c.priority, c.queue_seq
                  FROM ql_private.ready_candidate_page(v_after_priority, v_after_seq,
                           v_after_id, p_page_size, v_now, v_snapshot, v_own) c
                 ORDER BY -(c.priority::integer), c.queue_seq, c.run_id;
        END IF;
        LOOP
            FETCH v_page INTO v_candidate;
            EXIT WHEN NOT FOUND;
            IF v_examined - v_examined_before >= p_page_size THEN
                v_truncated := true;  -- the (limit + 1)th row: more candidates exist
                EXIT;
            END IF;
            v_examined := v_examined + 1;
            v_after_priority := v_candidate.priority;
            v_after_seq := v_candidate.queue_seq;
            v_after_id := v_candidate.run_id;
            -- Placement once per distinct revision per pull (a page is mostly one
            -- task): the verdicts are kept in arrays indexed alike.
            v_k := array_position(v_rev_ids, v_candidate.execution_revision_id);
            IF v_k IS NULL THEN
                SELECT pe.passed, pe.category, pe.score INTO v_verdict
                  FROM ql_private.execution_revisions er,
                       ql_private.placement_evaluate(er.placement, p_session.capabilities) pe
                 WHERE er.id = v_candidate.execution_revision_id;
                v_rev_ids := v_rev_ids || v_candidate.execution_revision_id;
                v_rev_passed := v_rev_passed || v_verdict.passed;
                v_rev_category := v_rev_category || v_verdict.category;
                v_rev_score := v_rev_score || v_verdict.score;
                v_k := cardinality(v_rev_ids);
            END IF;
            IF v_rev_passed[v_k] THEN
                v_passing := v_passing + 1;
                v_run_ids[v_passing] := v_candidate.run_id;
                v_scores[v_passing] := v_rev_score[v_k];
                v_priorities[v_passing] := v_candidate.priority;
            ELSIF v_rev_category[v_k] = 'executor' THEN
                v_mm_executor := v_mm_executor + 1;
            ELSIF v_rev_category[v_k] = 'label' THEN
                v_mm_label := v_mm_label + 1;
            ELSE
                v_mm_runtime := v_mm_runtime + 1;
            END IF;
        END LOOP;
        CLOSE v_page;
        v_examined_before := v_examined;
        v_any_passed := v_any_passed OR v_passing > 0;

        -- Claim from this page before reading the next one: the common pull then
        -- costs one page.
        IF v_passing > 0 AND v_attempts < p_claim_attempts THEN
            v_claim := ql_private.claim_page(
                p_session, v_run_ids, v_scores, v_priorities, p_offer_id, p_token_digest,
                p_claim_attempts - v_attempts, v_session_locked);
            v_attempts := v_attempts + v_claim.attempts;
            v_races := v_races + v_claim.races;
            v_session_locked := v_claim.session_locked;
            IF v_claim.offer IS NOT NULL THEN
                RETURN jsonb_build_object('status', 'offered', 'offer', v_claim.offer);
            END IF;
            IF v_claim.capacity_full THEN
                RETURN ql_private.idle_result('capacity_full', v_pages_read, v_examined,
                    v_attempts, v_races, jsonb_build_object('executor', v_mm_executor,
                    'label', v_mm_label, 'runtime', v_mm_runtime, 'capacity', 1), v_truncated);
            END IF;
        END IF;
        EXIT WHEN NOT v_truncated OR v_attempts >= p_claim_attempts;
        -- The class-page fallback: a first page without a passing candidate is a
        -- head this session cannot take, so the next pages read only the runs of
        -- the placement classes it matches (runs_class_keyset), jumping over any
        -- number of others.
        -- The class pages start from the head of the key order again: no run
        -- of a matching class was in the first page (it would have passed), but
        -- due runs of one may sit before its last key (that page's due source
        -- read only the earliest-due runs), and must not be jumped over.
        -- A worker restricted to granted pools reads the same classes within
        -- its pools only (pool_class_candidate_page: the pool x class keysets).
        IF v_passing = 0 AND v_classes IS NULL THEN
            v_classes := ql_private.matching_classes(p_session.capabilities);
            EXIT WHEN cardinality(v_classes) = 0;
            v_after_priority := NULL;
            v_after_seq := NULL;
            v_after_id := NULL;
        END IF;
    END LOOP;

    RETURN ql_private.idle_result(
        CASE WHEN v_examined = 0 THEN 'no_candidates'
             WHEN NOT v_any_passed THEN 'placement_mismatch'
             ELSE 'contention' END,
        v_pages_read, v_examined, v_attempts, v_races,
        jsonb_build_object('executor', v_mm_executor, 'label', v_mm_label,
                           'runtime', v_mm_runtime, 'capacity', 0),
        v_truncated);
END
$$;


ALTER FUNCTION ql_private.scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer) OWNER TO ql_owner;

--
-- Name: FUNCTION scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer) IS 'Pull steps 3-4, the page loop: bounded keyset scan (one statement per page from its source: pool_candidate_page over the worker''s granted pools unless it holds the all-pools grant (none: idle, nothing read), pool_class_candidate_page (granted pools x matching classes) after a blocked page there, else class_candidate_page after a blocked first page, candidate_page while a scheduled run is due or an offer expired unstarted, else ready_candidate_page; placement once per distinct revision per pull; after a first page without a passer, only the session''s matching placement classes), then the claim step per page (ql_private.claim_page: claim order, session lock, SKIP LOCKED claims), up to p_claim_attempts; {status: offered|idle}. Inputs: p_session, p_offer_id, p_token_digest, p_pages, p_page_size, p_claim_attempts. Fences: placement here; session and candidate fences in the claim step. Writes: only when claiming. Locks: none here (claim step: session row, run + attempt SKIP LOCKED). Errors: QL010-QL014 from the session re-check. Caller: ql.pull_offer.';


--
-- Name: semver_compare(text, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.semver_compare(p_a text, p_b text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    ka text COLLATE "C" := ql_private.semver_parse(p_a, 'a');
    kb text COLLATE "C" := ql_private.semver_parse(p_b, 'b');
BEGIN
    IF ka < kb THEN
        RETURN -1;
    ELSIF ka = kb THEN
        RETURN 0;
    END IF;
    RETURN 1;
END
$$;


ALTER FUNCTION ql_private.semver_compare(p_a text, p_b text) OWNER TO ql_owner;

--
-- Name: FUNCTION semver_compare(p_a text, p_b text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.semver_compare(p_a text, p_b text) IS 'SemVer 2.0.0 precedence: -1/0/1; build metadata ignored; numbers of any size. Pure. QL003 when a or b is NULL or invalid.';


--
-- Name: semver_parse(text, text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.semver_parse(p_version text, p_field text DEFAULT 'version'::text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
DECLARE
    k text;
    id text;
    rest text;
    core text;
    pre text;
    i integer;
    -- error path only
    build text;
    parts text[];
    reason text;
    shown text;
BEGIN
    -- Fast path: one capture-free match (PostgreSQL runs it as a DFA only, ~4x cheaper
    -- than regexp_match with groups) against the grammar of semver.Version._REGEX and
    -- schemas/qinglong.defs.v1.json#semver; then plain string splits.
    IF p_version ~ ('^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)'
                    '(?:-(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?'
                    '(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$') THEN
        rest := split_part(p_version, '+', 1);      -- build metadata never matters
        i := strpos(rest, '-');                      -- first '-' starts the prerelease
        IF i > 0 THEN
            pre := substr(rest, i + 1);
            rest := left(rest, i - 1);
        END IF;
        core := split_part(rest, '.', 1);
        k := lpad(length(core)::text, 10, '0') || core;
        core := split_part(rest, '.', 2);
        k := k || lpad(length(core)::text, 10, '0') || core;
        core := split_part(rest, '.', 3);
        k := k || lpad(length(core)::text, 10, '0') || core;
        IF pre IS NULL THEN
            RETURN k || chr(3);
        END IF;
        k := k || chr(2);
        FOREACH id IN ARRAY string_to_array(pre, '.') LOOP
            IF id ~ '^[0-9]+$' THEN
                k := k || chr(5) || lpad(length(id)::text, 10, '0') || id || chr(1);
            ELSE
                k := k || chr(6) || id || chr(1);
            END IF;
        END LOOP;
        RETURN k;
    END IF;

    -- Error path: say precisely what is wrong (cost does not matter here).
    IF p_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL003',
            MESSAGE = format('%s: version is missing', p_field);
    END IF;
    rest := p_version;
    IF strpos(rest, '+') > 0 THEN
        build := substr(rest, strpos(rest, '+') + 1);
        rest := left(rest, strpos(rest, '+') - 1);
    END IF;
    IF strpos(rest, '-') > 0 THEN
        pre := substr(rest, strpos(rest, '-') + 1);
        core := left(rest, strpos(rest, '-') - 1);
    ELSE
        core := rest;
    END IF;
    parts := string_to_array(core, '.');
    IF p_version = '' THEN
        reason := 'empty string';
    ELSIF coalesce(array_length(parts, 1), 0) <> 3 THEN
        reason := 'expected MAJOR.MINOR.PATCH';
    ELSE
        FOR i IN 1 .. 3 LOOP
            IF parts[i] !~ '^[0-9]+$' THEN
                reason := format('%s is not a non-empty decimal number',
                                 (ARRAY['major', 'minor', 'patch'])[i]);
            ELSIF parts[i] ~ '^0[0-9]' THEN
                reason := format('%s has a leading zero', (ARRAY['major', 'minor', 'patch'])[i]);
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    IF reason IS NULL AND pre = '' THEN
        reason := 'empty prerelease';
    ELSIF reason IS NULL AND pre IS NOT NULL THEN
        FOREACH id IN ARRAY string_to_array(pre, '.') LOOP
            IF id = '' THEN
                reason := 'empty prerelease identifier';
            ELSIF id ~ '[^0-9A-Za-z-]' THEN
                reason := 'prerelease identifier has a character outside [0-9A-Za-z-]';
            ELSIF id ~ '^0[0-9]+$' THEN
                reason := 'numeric prerelease identifier has a leading zero';
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    IF reason IS NULL AND build = '' THEN
        reason := 'empty build metadata';
    ELSIF reason IS NULL AND build IS NOT NULL THEN
        FOREACH id IN ARRAY string_to_array(build, '.') LOOP
            IF id = '' THEN
                reason := 'empty build identifier';
            ELSIF id ~ '[^0-9A-Za-z-]' THEN
                reason := 'build identifier has a character outside [0-9A-Za-z-]';
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    shown := regexp_replace(p_version, '[^ -~]', '?', 'g');
    IF length(shown) > 64 THEN
        shown := left(shown, 61) || '...';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'QL003',
        MESSAGE = format('%s: %s is not SemVer 2.0.0 (%s)', p_field, quote_literal(shown),
                         coalesce(reason, 'malformed')),
        HINT = 'expected MAJOR.MINOR.PATCH[-prerelease][+build] without leading zeros';
END
$_$;


ALTER FUNCTION ql_private.semver_parse(p_version text, p_field text) OWNER TO ql_owner;

--
-- Name: FUNCTION semver_parse(p_version text, p_field text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.semver_parse(p_version text, p_field text) IS 'Validate SemVer 2.0.0 and return its precedence key (byte order under COLLATE "C" = SemVer precedence; build metadata dropped). Pure. QL003 naming the field, the defect and <= 64 printable chars of the input.';


--
-- Name: semver_satisfies(text, jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    vk text COLLATE "C";
    ck text COLLATE "C";
    pre_prefix text COLLATE "C";   -- key of version up to and including its chr(2)
    pre_at integer;
    pre_ok boolean;
    holds boolean := true;
    c text;
    op text;
    n integer;
    i integer;
BEGIN
    IF p_comparators IS NULL OR jsonb_typeof(p_comparators) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'comparators must be a JSON array of strings';
    END IF;
    vk := ql_private.semver_parse(p_version, 'version');
    pre_at := strpos(vk, chr(2));     -- chr(2) occurs only as the prerelease tag
    pre_ok := pre_at = 0;             -- a release needs no prerelease comparator
    IF NOT pre_ok THEN
        pre_prefix := left(vk, pre_at);
    END IF;
    n := jsonb_array_length(p_comparators);
    -- Index access keeps every step a plpgsql "simple expression" (no SPI query).
    FOR i IN 0 .. n - 1 LOOP
        IF jsonb_typeof(p_comparators -> i) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('comparators[%s] must be a string', i);
        END IF;
        c := p_comparators ->> i;
        op := left(c, 2);
        IF op NOT IN ('>=', '<=') THEN
            op := left(c, 1);
            IF op NOT IN ('>', '<', '=') THEN
                RAISE EXCEPTION USING ERRCODE = 'QL003',
                    MESSAGE = format('comparators[%s] must start with one of >=, >, <=, <, =', i);
            END IF;
        END IF;
        IF strpos(c, '+') > 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL003',
                MESSAGE = format('comparators[%s] must not carry build metadata', i);
        END IF;
        ck := ql_private.semver_parse(substr(c, length(op) + 1), 'comparators[' || i || ']');
        holds := holds AND CASE op
            WHEN '>=' THEN vk >= ck
            WHEN '>'  THEN vk > ck
            WHEN '<=' THEN vk <= ck
            WHEN '<'  THEN vk < ck
            ELSE vk = ck
        END;
        -- Same MAJOR.MINOR.PATCH and a prerelease: keys share the prefix up to chr(2).
        IF NOT pre_ok AND left(ck, pre_at) = pre_prefix THEN
            pre_ok := true;
        END IF;
    END LOOP;
    RETURN holds AND pre_ok;
END
$$;


ALTER FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION semver_satisfies(p_version text, p_comparators jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb) IS 'node-semver satisfaction of a normalized comparator array (AND; a prerelease version needs a comparator with a prerelease on the same MAJOR.MINOR.PATCH; [] admits releases only). Pure. QL001 not an array of strings; QL003 invalid version/comparator.';


--
-- Name: session_claim_lock(ql_private.worker_sessions); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    locked ql_private.worker_sessions;
BEGIN
    locked := ql_private.session_fence(s.worker_id, s.session_id, s.generation, true);
    IF locked.capabilities_digest <> s.capabilities_digest THEN
        RAISE EXCEPTION USING ERRCODE = 'QL014',
            MESSAGE = 'session capabilities changed during the pull';
    END IF;
    RETURN ql_private.session_live_leases(locked.session_id) < locked.slots;
END
$$;


ALTER FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions) OWNER TO ql_owner;

--
-- Name: FUNCTION session_claim_lock(s ql_private.worker_sessions); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions) IS 'Lock the session row (FOR NO KEY UPDATE), re-verify its fences, return whether a slot is free. QL010-QL015.';


--
-- Name: session_fence(uuid, uuid, bigint, boolean); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean) RETURNS ql_private.worker_sessions
    LANGUAGE plpgsql
    AS $$
DECLARE
    s ql_private.worker_sessions;
BEGIN
    IF p_worker_id IS NULL OR p_session_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'workerId and sessionId are required';
    END IF;
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF coalesce(p_lock, false) THEN
        SELECT * INTO s FROM ql_private.worker_sessions ws
         WHERE ws.session_id = p_session_id AND ws.worker_id = p_worker_id
           FOR NO KEY UPDATE;
    ELSE
        SELECT * INTO s FROM ql_private.worker_sessions ws
         WHERE ws.session_id = p_session_id AND ws.worker_id = p_worker_id;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL010', MESSAGE = 'session_not_found';
    END IF;
    IF s.generation <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
    END IF;
    -- Only a session that is not active needs the second look (a query): on the
    -- hot path an active session costs one statement.
    IF s.state <> 'active' THEN
        IF EXISTS (SELECT 1 FROM ql_private.worker_sessions newer
                    WHERE newer.worker_id = p_worker_id AND newer.generation > s.generation) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL011', MESSAGE = 'session_replaced';
        END IF;
        IF s.state = 'draining' AND s.expires_at > clock_timestamp() THEN
            RAISE EXCEPTION USING ERRCODE = 'QL015', MESSAGE = 'session_draining';
        ELSIF s.state = 'draining' THEN
            -- A draining session that lapsed is over: the worker opens a new one.
            RAISE EXCEPTION USING ERRCODE = 'QL012', MESSAGE = 'session_expired';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'QL013', MESSAGE = 'session_closed';
    END IF;
    IF s.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = 'QL012', MESSAGE = 'session_expired';
    END IF;
    RETURN s;
END
$$;


ALTER FUNCTION ql_private.session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean) OWNER TO ql_owner;

--
-- Name: FUNCTION session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean) IS 'Session fence: returns the active, owned, exact-generation, unexpired session row; else QL010 not found / QL011 replaced (generation differs, or inactive with a newer generation) / QL013 closed / QL015 draining and unexpired (takes no new offer) / QL012 expired (active or draining). lock=false: no row lock (idle pulls); lock=true: FOR NO KEY UPDATE (serializes claims of a session; waits for and re-checks after open/close, which take FOR UPDATE). QL001 NULL ids or generation < 1.';


--
-- Name: session_live_leases(uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.session_live_leases(p_session_id uuid) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT count(*)::integer
      FROM ql_private.run_leases l
     WHERE l.session_id = p_session_id
       AND l.released_at IS NULL
       AND (l.started_at IS NOT NULL OR l.expires_at > clock_timestamp()));
END
$$;


ALTER FUNCTION ql_private.session_live_leases(p_session_id uuid) OWNER TO ql_owner;

--
-- Name: FUNCTION session_live_leases(p_session_id uuid); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.session_live_leases(p_session_id uuid) IS 'Number of live leases of a session (started, or unstarted and unexpired). Read-only.';


--
-- Name: session_projection(ql_private.worker_sessions); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.session_projection(s ql_private.worker_sessions) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'workerId', s.worker_id,
        'sessionId', s.session_id,
        'generation', s.generation,
        'expiresAtMs', ql_private.epoch_ms(s.expires_at),
        'capabilitiesDigest', s.capabilities_digest,
        'heartbeatIntervalMs', (SELECT heartbeat_interval_ms FROM ql_private.settings())));
END
$$;


ALTER FUNCTION ql_private.session_projection(s ql_private.worker_sessions) OWNER TO ql_owner;

--
-- Name: FUNCTION session_projection(s ql_private.worker_sessions); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.session_projection(s ql_private.worker_sessions) IS 'session@v1 projection {workerId, sessionId, generation, expiresAtMs, capabilitiesDigest, heartbeatIntervalMs}. Pure.';


--
-- Name: settings(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    -- plpgsql assignments, not a SQL SELECT: a SQL function returning a record is
    -- re-planned on every call, and every pull reads these.
    session_ttl := interval '60 seconds';
    heartbeat_interval_ms := 20000;
    default_pages := 2;
    default_page_size := 8;
    default_claim_attempts := 8;
    max_pages := 16;
    max_page_size := 64;
    max_claim_attempts := 64;
    idle_retry_after_ms := 2000;
END
$$;


ALTER FUNCTION ql_private.settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer) OWNER TO ql_owner;

--
-- Name: FUNCTION settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer) IS 'Protocol constants: session TTL 60 s, heartbeat 20 s, pull bounds default 2x8/8 and caps 16/64/64, idle retry 2 s. Pure.';


--
-- Name: signature_kid(text); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.signature_kid(p_signature text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_header_b64 text;
    v_header jsonb;
BEGIN
    IF p_signature IS NULL THEN
        RETURN NULL;
    END IF;
    -- header <= 1368 characters (a 1 KiB object) + '..' + 86: at most 1456.
    IF length(p_signature) > 1456
       OR p_signature !~ '^[A-Za-z0-9_-]{2,}\.\.[A-Za-z0-9_-]{86}$'
       OR length(split_part(p_signature, '.', 1)) % 4 = 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'signature',
            MESSAGE = 'signature must be a detached compact JWS: base64url(header)..base64url(signature)';
    END IF;
    v_header_b64 := translate(split_part(p_signature, '.', 1), '-_', '+/');
    v_header_b64 := v_header_b64 || repeat('=', (4 - length(v_header_b64) % 4) % 4);
    v_header := ql_private.json_object_from_bytes(
        decode(v_header_b64, 'base64'), 1024, 'signature header');
    IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_header) k)
           IS DISTINCT FROM ARRAY['alg', 'kid']
       OR v_header -> 'alg' IS DISTINCT FROM '"EdDSA"'::jsonb
       OR jsonb_typeof(v_header -> 'kid') IS DISTINCT FROM 'string'
       OR (v_header ->> 'kid') !~ '^[A-Za-z0-9_-]{1,128}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'signature',
            MESSAGE = 'signature header must be exactly {"alg":"EdDSA","kid":"<kid>"}';
    END IF;
    RETURN v_header ->> 'kid';
END
$_$;


ALTER FUNCTION ql_private.signature_kid(p_signature text) OWNER TO ql_owner;

--
-- Name: FUNCTION signature_kid(p_signature text); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.signature_kid(p_signature text) IS 'Shape check of a revision signature (SPEC 16.1), a detached compact JWS base64url(header)..base64url(64-byte signature) with the protected header exactly {alg: EdDSA, kid ^[A-Za-z0-9_-]{1,128}$}; returns the kid (NULL for NULL). Not a verification. Pure. Errors: QL001 COLUMN signature when malformed. Caller: ql.publish_revision.';


--
-- Name: task_default_pool(); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.task_default_pool() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    SELECT p.id INTO NEW.pool_id FROM ql_private.pools p
     WHERE p.project_id = NEW.project_id AND p.name = 'default';
    RETURN NEW;
END
$$;


ALTER FUNCTION ql_private.task_default_pool() OWNER TO ql_owner;

--
-- Name: FUNCTION task_default_pool(); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.task_default_pool() IS 'Trigger: a task inserted without a pool gets its project''s default pool.';


--
-- Name: validate_capabilities(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.validate_capabilities(p_capabilities jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    sub jsonb;
    k text;
    v jsonb;
    s text COLLATE "C";
    prev text COLLATE "C";
    n integer;
    j integer;
BEGIN
    IF p_capabilities IS NULL OR jsonb_typeof(p_capabilities) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities must be a JSON object';
    END IF;
    SELECT key INTO k FROM jsonb_object_keys(p_capabilities) AS o(key)
     WHERE key NOT IN ('schema', 'executors', 'labels', 'runtimes', 'slots') LIMIT 1;
    IF k IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
            'capabilities: unknown field %s', quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
    END IF;
    SELECT f INTO k FROM unnest(ARRAY['schema', 'executors', 'labels', 'runtimes', 'slots']) AS f
     WHERE NOT p_capabilities ? f LIMIT 1;
    IF k IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('capabilities.%s is missing', k);
    END IF;

    IF p_capabilities -> 'schema' <> '"qinglong/worker-capabilities@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'capabilities.schema must be "qinglong/worker-capabilities@v1"';
    END IF;

    -- executors: 1..8 names, sorted and unique (canonical form)
    sub := p_capabilities -> 'executors';
    IF jsonb_typeof(sub) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.executors must be a JSON array';
    END IF;
    n := jsonb_array_length(sub);
    IF n > 8 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'capabilities.executors has more than 8 entries';
    ELSIF n = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.executors must not be empty';
    END IF;
    FOR j IN 0 .. n - 1 LOOP
        IF jsonb_typeof(sub -> j) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.executors[%s] must be a string', j);
        END IF;
        s := sub ->> j;
        IF s !~ '^[a-z0-9][a-z0-9-]{0,62}$' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.executors[%s] must match ^[a-z0-9][a-z0-9-]{0,62}$', j);
        ELSIF s = prev THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.executors[%s] is a duplicate', j);
        ELSIF s < prev THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.executors[%s] is out of order (must be sorted)', j);
        END IF;
        prev := s;
    END LOOP;

    -- labels: <= 32 key -> single string value
    sub := p_capabilities -> 'labels';
    IF jsonb_typeof(sub) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.labels must be a JSON object';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(sub)) > 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'capabilities.labels has more than 32 keys';
    END IF;
    FOR k, v IN SELECT key, value FROM jsonb_each(sub) LOOP
        IF k !~ '^[a-z0-9][a-z0-9._/-]{0,62}$' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
                'capabilities.labels: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
                quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
        END IF;
        IF jsonb_typeof(v) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.labels["%s"] must be a string', k);
        END IF;
        s := v #>> '{}';
        IF length(s) > 128 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002',
                MESSAGE = format('capabilities.labels["%s"] is longer than 128 characters', k);
        ELSIF s = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.labels["%s"] must not be empty', k);
        ELSIF s ~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.labels["%s"] contains a control or invisible character', k);
        END IF;
    END LOOP;

    -- runtimes: <= 16 name -> SemVer 2.0.0 version (build metadata allowed)
    sub := p_capabilities -> 'runtimes';
    IF jsonb_typeof(sub) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.runtimes must be a JSON object';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(sub)) > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'capabilities.runtimes has more than 16 names';
    END IF;
    FOR k, v IN SELECT key, value FROM jsonb_each(sub) LOOP
        IF k !~ '^[a-z0-9][a-z0-9._-]{0,62}$' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
                'capabilities.runtimes: name %s must match ^[a-z0-9][a-z0-9._-]{0,62}$',
                quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
        END IF;
        IF jsonb_typeof(v) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('capabilities.runtimes["%s"] must be a string', k);
        END IF;
        s := v #>> '{}';
        IF length(s) > 128 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002',
                MESSAGE = format('capabilities.runtimes["%s"] is longer than 128 characters', k);
        END IF;
        PERFORM ql_private.semver_parse(s, format('capabilities.runtimes["%s"]', k));
    END LOOP;

    -- slots: integral JSON number written without fraction/exponent, 1..256
    v := p_capabilities -> 'slots';
    IF jsonb_typeof(v) <> 'number' OR (v #>> '{}') !~ '^-?[0-9]+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.slots must be an integer';
    ELSIF (v #>> '{}')::numeric > 256 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'capabilities.slots is above 256';
    ELSIF (v #>> '{}')::numeric < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'capabilities.slots must be at least 1';
    END IF;
END
$_$;


ALTER FUNCTION ql_private.validate_capabilities(p_capabilities jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION validate_capabilities(p_capabilities jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.validate_capabilities(p_capabilities jsonb) IS 'Refuse anything but a canonical qinglong/worker-capabilities@v1 document: schema id, unknown/missing fields, sorted unique executors 1..8, labels <= 32, runtimes <= 16 valid SemVer, slots 1..256. Pure. QL001 shape, QL002 oversize, QL003 semver; messages name the JSON path.';


--
-- Name: validate_placement(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.validate_placement(p_placement jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    req jsonb;
    pref jsonb;
    term jsonb;
    sub jsonb;
    elem jsonb;
    path text;
    k text;
    v jsonb;
    s text COLLATE "C";
    prev text COLLATE "C";
    op text;
    n integer;
    t integer;
    j integer;
BEGIN
    IF p_placement IS NULL OR jsonb_typeof(p_placement) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'placement must be a JSON object';
    END IF;
    SELECT key INTO k FROM jsonb_object_keys(p_placement) AS o(key)
     WHERE key NOT IN ('required', 'preferred') LIMIT 1;
    IF k IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
            'placement: unknown field %s', quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
    END IF;

    -- required: object with exactly executors, labels, runtimes
    req := p_placement -> 'required';
    IF req IS NULL OR jsonb_typeof(req) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'placement.required must be a JSON object';
    END IF;
    SELECT key INTO k FROM jsonb_object_keys(req) AS o(key)
     WHERE key NOT IN ('executors', 'labels', 'runtimes') LIMIT 1;
    IF k IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
            'placement.required: unknown field %s', quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
    END IF;

    -- required.executors: 1..8 names, sorted and unique
    sub := req -> 'executors';
    IF sub IS NULL OR jsonb_typeof(sub) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'placement.required.executors must be a JSON array';
    END IF;
    n := jsonb_array_length(sub);
    IF n > 8 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'placement.required.executors has more than 8 entries';
    ELSIF n = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'placement.required.executors must not be empty';
    END IF;
    prev := NULL;
    FOR j IN 0 .. n - 1 LOOP
        IF jsonb_typeof(sub -> j) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('placement.required.executors[%s] must be a string', j);
        END IF;
        s := sub ->> j;
        IF s !~ '^[a-z0-9][a-z0-9-]{0,62}$' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('placement.required.executors[%s] must match ^[a-z0-9][a-z0-9-]{0,62}$', j);
        ELSIF s = prev THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('placement.required.executors[%s] is a duplicate', j);
        ELSIF s < prev THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('placement.required.executors[%s] is out of order (must be sorted)', j);
        END IF;
        prev := s;
    END LOOP;

    -- preferred: array of <= 16 objects with exactly weight, labels, runtimes
    pref := p_placement -> 'preferred';
    IF pref IS NULL OR jsonb_typeof(pref) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'placement.preferred must be a JSON array';
    END IF;
    IF jsonb_array_length(pref) > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'placement.preferred has more than 16 terms';
    END IF;
    FOR t IN 0 .. jsonb_array_length(pref) - 1 LOOP
        term := pref -> t;
        path := format('placement.preferred[%s]', t);
        IF jsonb_typeof(term) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('%s must be a JSON object', path);
        END IF;
        SELECT key INTO k FROM jsonb_object_keys(term) AS o(key)
         WHERE key NOT IN ('weight', 'labels', 'runtimes') LIMIT 1;
        IF k IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
                '%s: unknown field %s', path, quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
        END IF;
        -- integral JSON number written without fraction/exponent, 1..100
        IF (CASE WHEN jsonb_typeof(term -> 'weight') IS DISTINCT FROM 'number'
                      OR (term ->> 'weight') !~ '^[0-9]{1,3}$' THEN true
                 ELSE (term ->> 'weight')::integer NOT BETWEEN 1 AND 100 END) THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('%s.weight must be an integer 1..100', path);
        END IF;
    END LOOP;

    -- labels and runtimes: the same rules for required (t = -1) and each preferred term
    FOR t IN -1 .. jsonb_array_length(pref) - 1 LOOP
        IF t = -1 THEN
            term := req;
            path := 'placement.required';
        ELSE
            term := pref -> t;
            path := format('placement.preferred[%s]', t);
        END IF;

        sub := term -> 'labels';
        IF sub IS NULL OR jsonb_typeof(sub) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('%s.labels must be a JSON object', path);
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(sub)) > 32 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = format('%s.labels has more than 32 keys', path);
        END IF;
        FOR k, v IN SELECT key, value FROM jsonb_each(sub) LOOP
            IF k !~ '^[a-z0-9][a-z0-9._/-]{0,62}$' THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
                    '%s.labels: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
                    path, quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
            END IF;
            IF jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001',
                    MESSAGE = format('%s.labels["%s"] must be a JSON array of strings', path, k);
            END IF;
            n := jsonb_array_length(v);
            IF n > 32 THEN
                RAISE EXCEPTION USING ERRCODE = 'QL002',
                    MESSAGE = format('%s.labels["%s"] has more than 32 values', path, k);
            ELSIF n = 0 THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001',
                    MESSAGE = format('%s.labels["%s"] must not be empty', path, k);
            END IF;
            prev := NULL;
            FOR j IN 0 .. n - 1 LOOP
                IF jsonb_typeof(v -> j) <> 'string' THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.labels["%s"][%s] must be a string', path, k, j);
                END IF;
                s := v ->> j;
                IF length(s) > 128 THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL002',
                        MESSAGE = format('%s.labels["%s"][%s] is longer than 128 characters', path, k, j);
                ELSIF s = '' THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.labels["%s"][%s] must not be empty', path, k, j);
                ELSIF s ~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]' THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.labels["%s"][%s] contains a control or invisible character', path, k, j);
                ELSIF s = prev THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.labels["%s"][%s] is a duplicate', path, k, j);
                ELSIF s < prev THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.labels["%s"][%s] is out of order (must be sorted)', path, k, j);
                END IF;
                prev := s;
            END LOOP;
        END LOOP;

        sub := term -> 'runtimes';
        IF sub IS NULL OR jsonb_typeof(sub) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('%s.runtimes must be a JSON object', path);
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(sub)) > 16 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = format('%s.runtimes has more than 16 names', path);
        END IF;
        FOR k, v IN SELECT key, value FROM jsonb_each(sub) LOOP
            IF k !~ '^[a-z0-9][a-z0-9._-]{0,62}$' THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format(
                    '%s.runtimes: name %s must match ^[a-z0-9][a-z0-9._-]{0,62}$',
                    path, quote_literal(left(regexp_replace(k, '[^ -~]', '?', 'g'), 64)));
            END IF;
            IF jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001',
                    MESSAGE = format('%s.runtimes["%s"] must be a JSON array of comparators', path, k);
            END IF;
            n := jsonb_array_length(v);
            IF n > 32 THEN
                RAISE EXCEPTION USING ERRCODE = 'QL002',
                    MESSAGE = format('%s.runtimes["%s"] has more than 32 comparators', path, k);
            END IF;
            FOR j IN 0 .. n - 1 LOOP
                IF jsonb_typeof(v -> j) <> 'string' THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL001',
                        MESSAGE = format('%s.runtimes["%s"][%s] must be a string', path, k, j);
                END IF;
                s := v ->> j;
                IF length(s) > 160 THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL002',
                        MESSAGE = format('%s.runtimes["%s"][%s] is longer than 160 characters', path, k, j);
                END IF;
                op := left(s, 2);
                IF op NOT IN ('>=', '<=') THEN
                    op := left(s, 1);
                    IF op NOT IN ('>', '<', '=') THEN
                        RAISE EXCEPTION USING ERRCODE = 'QL003', MESSAGE = format(
                            '%s.runtimes["%s"][%s] must start with one of >=, >, <=, <, =', path, k, j);
                    END IF;
                END IF;
                IF strpos(s, '+') > 0 THEN
                    RAISE EXCEPTION USING ERRCODE = 'QL003', MESSAGE = format(
                        '%s.runtimes["%s"][%s] must not carry build metadata', path, k, j);
                END IF;
                PERFORM ql_private.semver_parse(substr(s, length(op) + 1),
                                                format('%s.runtimes["%s"][%s]', path, k, j));
            END LOOP;
        END LOOP;
    END LOOP;
END
$_$;


ALTER FUNCTION ql_private.validate_placement(p_placement jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION validate_placement(p_placement jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.validate_placement(p_placement jsonb) IS 'Refuse anything but the exact normalized placement (DESIGN "Normalized placement"): unknown/missing fields, types, name/key/value rules, sorted unique sets, caps, comparators. Pure. QL001 shape, QL002 oversize, QL003 semver; messages name the JSON path.';


--
-- Name: validate_result(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.validate_result(p_result jsonb) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_max_tail_bytes constant integer := 8192;
    v_problem text;
    v_key text;
    v_value jsonb;
BEGIN
    IF p_result IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_result) <> 'object' THEN
        v_problem := 'result must be an object';
    ELSE
        SELECT k INTO v_key FROM jsonb_object_keys(p_result) k
         WHERE k NOT IN ('exitCode', 'durationMs', 'outputTail', 'outputBytes', 'logBytes',
                         'limits')
         ORDER BY k LIMIT 1;
        IF v_key IS NOT NULL THEN
            v_problem := 'result has an unknown field (allowed: exitCode, durationMs, '
                         'outputTail, outputBytes, logBytes, limits)';
        END IF;
    END IF;
    IF v_problem IS NULL THEN
        v_value := p_result -> 'exitCode';
        IF v_value IS NOT NULL AND jsonb_typeof(v_value) <> 'null'
           AND NOT (jsonb_typeof(v_value) = 'number'
                    AND v_value::numeric = trunc(v_value::numeric)
                    AND v_value::numeric BETWEEN -2147483648 AND 2147483647) THEN
            v_problem := 'result.exitCode must be null or an integer -2147483648..2147483647';
        END IF;
    END IF;
    IF v_problem IS NULL THEN
        FOREACH v_key IN ARRAY ARRAY['durationMs', 'outputBytes'] LOOP
            v_value := p_result -> v_key;
            IF v_value IS NULL OR jsonb_typeof(v_value) <> 'number'
               OR v_value::numeric <> trunc(v_value::numeric)
               OR v_value::numeric NOT BETWEEN 0 AND 9223372036854775807 THEN
                v_problem := format('result.%s must be an integer >= 0', v_key);
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF v_problem IS NULL THEN
        v_value := p_result -> 'logBytes';
        IF v_value IS NOT NULL AND jsonb_typeof(v_value) <> 'null'
           AND NOT (jsonb_typeof(v_value) = 'number'
                    AND v_value::numeric = trunc(v_value::numeric)
                    AND v_value::numeric BETWEEN 0 AND 9223372036854775807) THEN
            v_problem := 'result.logBytes must be null or an integer >= 0';
        END IF;
    END IF;
    IF v_problem IS NULL THEN
        v_value := p_result -> 'limits';
        IF v_value IS NOT NULL AND jsonb_typeof(v_value) <> 'null' THEN
            v_problem := ql_private.validate_result_limits(v_value);
        END IF;
    END IF;
    IF v_problem IS NULL THEN
        v_value := p_result -> 'outputTail';
        IF v_value IS NULL OR jsonb_typeof(v_value) <> 'string' THEN
            v_problem := 'result.outputTail must be a string';
        ELSIF octet_length(convert_to(v_value #>> '{}', 'UTF8')) > v_max_tail_bytes THEN
            v_problem := format('result.outputTail must be at most %s bytes in UTF-8',
                                v_max_tail_bytes);
        END IF;
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'result', MESSAGE = v_problem;
    END IF;
    RETURN p_result;
END
$$;


ALTER FUNCTION ql_private.validate_result(p_result jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION validate_result(p_result jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.validate_result(p_result jsonb) IS 'Validate a completion result (SPEC 9.3): NULL, or an object with exactly {exitCode? (null or int32), durationMs (integer >= 0), outputTail (string <= 8192 UTF-8 bytes), outputBytes (integer >= 0), logBytes? (null or integer >= 0, SPEC 15.2), limits? (null or {mechanism cgroup|rlimit, uid null|0..4294967295, maxProcesses/maxOpenFiles/maxMemoryBytes null|integer >= 0, exceeded: distinct of processes|memory|openFiles}, SPEC 11; ql_private.validate_result_limits)}; returns it unchanged. Pure. Errors: QL001 COLUMN result (the message names the field). Caller: ql.complete_lease.';


--
-- Name: validate_result_limits(jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.validate_result_limits(p_limits jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_keys constant text[] := ARRAY['mechanism', 'uid', 'maxProcesses', 'maxOpenFiles',
                                    'maxMemoryBytes', 'exceeded'];
    v_key text;
    v_value jsonb;
    v_max numeric;
BEGIN
    IF jsonb_typeof(p_limits) <> 'object' THEN
        RETURN 'result.limits must be an object';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(p_limits) k WHERE k <> ALL (v_keys))
       OR EXISTS (SELECT 1 FROM unnest(v_keys) k WHERE NOT p_limits ? k) THEN
        RETURN 'result.limits must have exactly the fields mechanism, uid, maxProcesses, '
               'maxOpenFiles, maxMemoryBytes, exceeded';
    END IF;
    IF p_limits -> 'mechanism' NOT IN ('"cgroup"'::jsonb, '"rlimit"'::jsonb) THEN
        RETURN 'result.limits.mechanism must be cgroup or rlimit';
    END IF;
    FOREACH v_key IN ARRAY v_keys[2:5] LOOP
        v_value := p_limits -> v_key;
        v_max := CASE v_key WHEN 'uid' THEN 4294967295 ELSE 9223372036854775807 END;
        IF jsonb_typeof(v_value) <> 'null'
           AND NOT (jsonb_typeof(v_value) = 'number'
                    AND v_value::numeric = trunc(v_value::numeric)
                    AND v_value::numeric BETWEEN 0 AND v_max) THEN
            RETURN format('result.limits.%s must be null or an integer 0..%s', v_key, v_max);
        END IF;
    END LOOP;
    v_value := p_limits -> 'exceeded';
    IF jsonb_typeof(v_value) <> 'array'
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_value) e
                   WHERE e NOT IN ('"processes"'::jsonb, '"memory"'::jsonb, '"openFiles"'::jsonb))
       OR (SELECT count(DISTINCT e) <> count(*) FROM jsonb_array_elements(v_value) e) THEN
        RETURN 'result.limits.exceeded must be an array of distinct values from processes, '
               'memory, openFiles';
    END IF;
    RETURN NULL;
END
$$;


ALTER FUNCTION ql_private.validate_result_limits(p_limits jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION validate_result_limits(p_limits jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.validate_result_limits(p_limits jsonb) IS 'Check a completion result''s limits (SPEC 11, 9.3): an object with exactly {mechanism cgroup|rlimit, uid null|0..4294967295, maxProcesses, maxOpenFiles, maxMemoryBytes (each null|integer >= 0), exceeded (array of distinct processes|memory|openFiles)}. Returns NULL when well-formed, else the problem naming the field. Pure. Errors: none raised. Caller: ql_private.validate_result.';


--
-- Name: validate_secret_refs(text, jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
    v_secrets jsonb := p_spec -> 'secrets';
    v_bad text;
BEGIN
    IF jsonb_typeof(v_secrets) IS DISTINCT FROM 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(v_secrets) e WHERE jsonb_typeof(e.value) <> 'string') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets must be an object of secret names';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(v_secrets)) > 16 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets names at most 16 secrets';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_each_text(v_secrets) e
                WHERE e.key !~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
                   OR e.value !~ '^[a-z][a-z0-9_.-]{0,63}$') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = 'spec.secrets maps ENV_NAME (^[A-Za-z_][A-Za-z0-9_]*$) to a secret name (^[a-z][a-z0-9_.-]{0,63}$)';
    END IF;
    SELECT min(k COLLATE "C") INTO v_bad
      FROM jsonb_object_keys(v_secrets) k
     WHERE jsonb_typeof(p_spec -> 'env') = 'object' AND (p_spec -> 'env') ? k;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = format('%s is in both spec.env and spec.secrets', v_bad);
    END IF;
    SELECT min(e.value COLLATE "C") INTO v_bad
      FROM jsonb_each_text(v_secrets) e
     WHERE NOT EXISTS (SELECT 1 FROM ql_private.projects p
                         JOIN ql_private.secrets s ON s.project_id = p.id
                        WHERE p.name = p_project AND s.name = e.value);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'secrets',
            MESSAGE = format('secret %s does not exist in project %s (admin secret set)',
                             v_bad, p_project);
    END IF;
END
$_$;


ALTER FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION validate_secret_refs(p_project text, p_spec jsonb); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb) IS 'Publish fence of spec.secrets (SPEC 14.2): an object of <= 16 ENV_NAME -> secret name, no ENV_NAME also in spec.env, every secret existing in project p_project. Inputs: p_project, p_spec. Writes: none. Locks: none. Errors: QL001 COLUMN secrets (the message names the env name or secret at fault). Caller: ql.publish_revision.';


--
-- Name: waiting_classes(timestamp with time zone); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.waiting_classes(p_due_by timestamp with time zone) RETURNS SETOF integer
    LANGUAGE sql STABLE
    AS $$
    WITH RECURSIVE ready(class_id) AS (
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL)
        UNION ALL
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NULL AND r.placement_class > ready.class_id)
          FROM ready WHERE ready.class_id IS NOT NULL
    ), scheduled(class_id) AS (
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NOT NULL)
        UNION ALL
        SELECT (SELECT min(r.placement_class) FROM ql_private.runs r
                 WHERE r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested
                   AND r.due_at IS NOT NULL AND r.placement_class > scheduled.class_id)
          FROM scheduled WHERE scheduled.class_id IS NOT NULL
    )
    SELECT ready.class_id FROM ready WHERE ready.class_id IS NOT NULL
    UNION
    SELECT s.class_id FROM scheduled s
     WHERE s.class_id IS NOT NULL
       AND (SELECT min(d.due_at) FROM ql_private.runs d
             WHERE d.placement_class = s.class_id
               AND d.state = 'queued' AND d.runtime_owned AND NOT d.cancel_requested
               AND d.due_at IS NOT NULL) <= p_due_by
$$;


ALTER FUNCTION ql_private.waiting_classes(p_due_by timestamp with time zone) OWNER TO ql_owner;

--
-- Name: FUNCTION waiting_classes(p_due_by timestamp with time zone); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.waiting_classes(p_due_by timestamp with time zone) IS 'Placement classes with a ready queued run (runs_class_keyset) or a scheduled queued run due by p_due_by (runs_class_due; infinity = any), by skip scans: one index descent per such class, nothing for classes without waiting runs. Inlinable SQL, read-only, no locks. Callers: ql_private.matching_classes, ql.prune_fleet.';


--
-- Name: xid_in_progress(xid, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT p_xid <> '0'::xid
       AND p_xid IS DISTINCT FROM p_own::xid
       AND ((p_xid::text::bigint
             - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
             + 4294967296) % 4294967296) < 2147483648
       AND pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint
           + (p_xid::text::bigint
              - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
              + 4294967296) % 4294967296
           < pg_catalog.pg_snapshot_xmax(p_snapshot)::text::bigint + 4096
       AND NOT pg_catalog.pg_visible_in_snapshot(
               (pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint
                + (p_xid::text::bigint
                   - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
                   + 4294967296) % 4294967296)::text::xid8,
               p_snapshot)
$$;


ALTER FUNCTION ql_private.xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8) OWNER TO ql_owner;

--
-- Name: FUNCTION xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8) IS 'Whether a 32-bit xmax is a transaction in progress in the snapshot (widened against its epoch; >= snapshot xmax only within 4096), never the caller''s own. A hint for candidate_page to pass over rows a concurrent claim holds. Pure, inlinable.';


--
-- Name: attempt_log_chunks; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.attempt_log_chunks (
    attempt_id uuid NOT NULL,
    start_byte bigint NOT NULL,
    content bytea NOT NULL,
    CONSTRAINT attempt_log_chunks_content_check CHECK (((octet_length(content) >= 1) AND (octet_length(content) <= 65536))),
    CONSTRAINT attempt_log_chunks_start_byte_check CHECK ((start_byte >= 0))
);


ALTER TABLE ql_private.attempt_log_chunks OWNER TO ql_owner;

--
-- Name: attempt_logs; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.attempt_logs (
    attempt_id uuid NOT NULL,
    run_id uuid NOT NULL,
    stored_bytes bigint DEFAULT 0 NOT NULL,
    limit_bytes integer NOT NULL,
    truncated boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT attempt_logs_check CHECK (((stored_bytes >= 0) AND (stored_bytes <= limit_bytes))),
    CONSTRAINT attempt_logs_limit_bytes_check CHECK (((limit_bytes >= 1024) AND (limit_bytes <= 67108864)))
);


ALTER TABLE ql_private.attempt_logs OWNER TO ql_owner;

--
-- Name: certificate_revocations; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.certificate_revocations (
    serial text NOT NULL,
    seq bigint NOT NULL,
    revoked_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    revoked_by text NOT NULL,
    CONSTRAINT certificate_revocations_revoked_by_check CHECK (((octet_length(revoked_by) >= 1) AND (octet_length(revoked_by) <= 63))),
    CONSTRAINT certificate_revocations_serial_check CHECK ((serial ~ '^(0|[1-9a-f][0-9a-f]{0,39})$'::text))
);


ALTER TABLE ql_private.certificate_revocations OWNER TO ql_owner;

--
-- Name: certificate_revocations_seq_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ql_private.certificate_revocations ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ql_private.certificate_revocations_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: events; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.events (
    id bigint NOT NULL,
    type text NOT NULL,
    run_id uuid,
    attempt_id uuid,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    worker_id uuid,
    CONSTRAINT events_payload_check CHECK ((NOT (payload ?| ARRAY['leaseToken'::text, 'token'::text, 'tokenDigest'::text, 'token_digest'::text, 'secret'::text, 'secretDigest'::text, 'secret_digest'::text]))),
    CONSTRAINT events_type_check CHECK ((type ~ '^(run|attempt|lease|worker|session)\.[a-z_]+$'::text))
)
WITH (autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_cost_delay='0');


ALTER TABLE ql_private.events OWNER TO ql_owner;

--
-- Name: events_id_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ql_private.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ql_private.events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: placement_classes; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.placement_classes (
    id integer NOT NULL,
    required jsonb NOT NULL,
    CONSTRAINT placement_classes_required_check CHECK ((jsonb_typeof(required) = 'object'::text))
);


ALTER TABLE ql_private.placement_classes OWNER TO ql_owner;

--
-- Name: placement_classes_id_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ql_private.placement_classes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ql_private.placement_classes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: project_data_keys; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.project_data_keys (
    project_id uuid NOT NULL,
    key_id text NOT NULL,
    kek_id text NOT NULL,
    nonce bytea NOT NULL,
    wrapped_key bytea NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT project_data_keys_kek_id_check CHECK ((kek_id ~ '^[a-z0-9][a-z0-9._-]{0,63}$'::text)),
    CONSTRAINT project_data_keys_key_id_check CHECK ((key_id ~ '^[a-f0-9]{32}$'::text)),
    CONSTRAINT project_data_keys_nonce_check CHECK ((octet_length(nonce) = 12)),
    CONSTRAINT project_data_keys_wrapped_key_check CHECK ((octet_length(wrapped_key) = 48))
);


ALTER TABLE ql_private.project_data_keys OWNER TO ql_owner;

--
-- Name: project_tokens; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.project_tokens (
    id text NOT NULL,
    project_id uuid NOT NULL,
    token_digest bytea NOT NULL,
    scopes text[] NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    created_by text NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT project_tokens_check CHECK (((expires_at IS NULL) OR (expires_at > created_at))),
    CONSTRAINT project_tokens_created_by_check CHECK (((octet_length(created_by) >= 1) AND (octet_length(created_by) <= 63))),
    CONSTRAINT project_tokens_id_check CHECK ((id ~ '^[a-z0-9]{16}$'::text)),
    CONSTRAINT project_tokens_scopes_check CHECK ((((cardinality(scopes) >= 1) AND (cardinality(scopes) <= 5)) AND (scopes <@ ARRAY['enqueue'::text, 'read'::text, 'cancel'::text, 'retry'::text, 'log'::text]) AND (array_position(scopes, NULL::text) IS NULL))),
    CONSTRAINT project_tokens_token_digest_check CHECK ((octet_length(token_digest) = 32))
);


ALTER TABLE ql_private.project_tokens OWNER TO ql_owner;

--
-- Name: projects; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.projects (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT projects_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'::text))
);


ALTER TABLE ql_private.projects OWNER TO ql_owner;

--
-- Name: run_leases_id_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ql_private.run_leases ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ql_private.run_leases_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: run_queue_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

CREATE SEQUENCE ql_private.run_queue_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER TABLE ql_private.run_queue_seq OWNER TO ql_owner;

--
-- Name: run_queue_seq; Type: SEQUENCE OWNED BY; Schema: ql_private; Owner: ql_owner
--

ALTER SEQUENCE ql_private.run_queue_seq OWNED BY ql_private.runs.queue_seq;


--
-- Name: schema_migrations; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT schema_migrations_checksum_check CHECK ((checksum ~ '^[0-9a-f]{64}$'::text))
);


ALTER TABLE ql_private.schema_migrations OWNER TO ql_owner;

--
-- Name: secrets; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.secrets (
    project_id uuid NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    key_id text NOT NULL,
    nonce bytea NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT secrets_ciphertext_check CHECK (((octet_length(ciphertext) >= (8 + 16)) AND (octet_length(ciphertext) <= (16384 + 16)))),
    CONSTRAINT secrets_key_id_check CHECK ((key_id ~ '^[a-f0-9]{32}$'::text)),
    CONSTRAINT secrets_name_check CHECK ((name ~ '^[a-z][a-z0-9_.-]{0,63}$'::text)),
    CONSTRAINT secrets_nonce_check CHECK ((octet_length(nonce) = 12)),
    CONSTRAINT secrets_version_check CHECK ((version >= 1))
);


ALTER TABLE ql_private.secrets OWNER TO ql_owner;

--
-- Name: security_audit; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.security_audit (
    id bigint NOT NULL,
    occurred_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    credential_id text,
    worker_id uuid,
    action text NOT NULL,
    outcome text NOT NULL,
    reason text NOT NULL,
    actor text,
    detail jsonb,
    CONSTRAINT security_audit_action_check CHECK ((action ~ '^[a-z][a-z0-9_.]{0,63}$'::text)),
    CONSTRAINT security_audit_actor_check CHECK (((actor IS NULL) OR ((octet_length(actor) >= 1) AND (octet_length(actor) <= 63)))),
    CONSTRAINT security_audit_credential_id_check CHECK (((credential_id IS NULL) OR (credential_id ~ '^[a-z0-9]{16}$'::text))),
    CONSTRAINT security_audit_detail_check CHECK (((detail IS NULL) OR ((jsonb_typeof(detail) = 'object'::text) AND (pg_column_size(detail) <= 4096) AND (NOT (detail ?| ARRAY['leaseToken'::text, 'token'::text, 'tokenDigest'::text, 'token_digest'::text, 'secret'::text, 'secretDigest'::text, 'secret_digest'::text, 'value'::text, 'values'::text]))))),
    CONSTRAINT security_audit_outcome_check CHECK ((outcome = ANY (ARRAY['allowed'::text, 'denied'::text]))),
    CONSTRAINT security_audit_reason_check CHECK ((reason ~ '^[a-z][a-z0-9_]{0,63}$'::text))
);


ALTER TABLE ql_private.security_audit OWNER TO ql_owner;

--
-- Name: security_audit_id_seq; Type: SEQUENCE; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ql_private.security_audit ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ql_private.security_audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: tasks; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.tasks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    name text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    current_revision_id uuid,
    lease_ttl_seconds integer DEFAULT 60 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    retry_base_ms integer DEFAULT 1000 NOT NULL,
    retry_cap_ms integer DEFAULT 300000 NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    pool_id uuid NOT NULL,
    log_limit_bytes integer DEFAULT 4194304 NOT NULL,
    CONSTRAINT tasks_lease_ttl_seconds_check CHECK (((lease_ttl_seconds >= 5) AND (lease_ttl_seconds <= 86400))),
    CONSTRAINT tasks_log_limit_bytes_check CHECK (((log_limit_bytes >= 1024) AND (log_limit_bytes <= 67108864))),
    CONSTRAINT tasks_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT tasks_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'::text)),
    CONSTRAINT tasks_retry_base_ms_check CHECK (((retry_base_ms >= 0) AND (retry_base_ms <= 3600000))),
    CONSTRAINT tasks_retry_cap_ms_check CHECK (((retry_cap_ms >= 0) AND (retry_cap_ms <= 86400000)))
);


ALTER TABLE ql_private.tasks OWNER TO ql_owner;

--
-- Name: worker_certificates; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.worker_certificates (
    serial text NOT NULL,
    worker_id uuid NOT NULL,
    not_after timestamp with time zone NOT NULL,
    issued_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT worker_certificates_serial_check CHECK ((serial ~ '^(0|[1-9a-f][0-9a-f]{0,39})$'::text))
);


ALTER TABLE ql_private.worker_certificates OWNER TO ql_owner;

--
-- Name: worker_credentials; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.worker_credentials (
    credential_id text NOT NULL,
    worker_id uuid NOT NULL,
    secret_digest bytea NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    revoked_at timestamp with time zone,
    ttl_s bigint,
    expires_at timestamp with time zone,
    rotated_from text,
    first_used_at timestamp with time zone,
    CONSTRAINT worker_credentials_credential_id_check CHECK ((credential_id ~ '^[a-z0-9]{16}$'::text)),
    CONSTRAINT worker_credentials_expiry_after_creation CHECK (((expires_at IS NULL) OR (expires_at > (created_at - '00:00:01'::interval)))),
    CONSTRAINT worker_credentials_first_use_of_successors CHECK (((first_used_at IS NULL) OR (rotated_from IS NOT NULL))),
    CONSTRAINT worker_credentials_secret_digest_check CHECK ((octet_length(secret_digest) = 32)),
    CONSTRAINT worker_credentials_ttl_s_check CHECK (((ttl_s IS NULL) OR ((ttl_s >= 10) AND (ttl_s <= 315360000))))
);


ALTER TABLE ql_private.worker_credentials OWNER TO ql_owner;

--
-- Name: worker_labels; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.worker_labels (
    worker_id uuid NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    granted_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT worker_labels_key_check CHECK ((key ~ '^[a-z0-9][a-z0-9._/-]{0,62}$'::text)),
    CONSTRAINT worker_labels_value_check CHECK ((((char_length(value) >= 1) AND (char_length(value) <= 128)) AND (value !~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]'::text)))
);


ALTER TABLE ql_private.worker_labels OWNER TO ql_owner;

--
-- Name: worker_pool_grants; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.worker_pool_grants (
    worker_id uuid NOT NULL,
    pool_id uuid NOT NULL,
    granted_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


ALTER TABLE ql_private.worker_pool_grants OWNER TO ql_owner;

--
-- Name: workers; Type: TABLE; Schema: ql_private; Owner: ql_owner
--

CREATE TABLE ql_private.workers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    disabled_at timestamp with time zone,
    all_pools boolean DEFAULT false NOT NULL,
    self_labels boolean DEFAULT false NOT NULL,
    CONSTRAINT workers_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'::text))
);


ALTER TABLE ql_private.workers OWNER TO ql_owner;

--
-- Name: runs queue_seq; Type: DEFAULT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.runs ALTER COLUMN queue_seq SET DEFAULT nextval('ql_private.run_queue_seq'::regclass);


--
-- Name: attempt_log_chunks attempt_log_chunks_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempt_log_chunks
    ADD CONSTRAINT attempt_log_chunks_pkey PRIMARY KEY (attempt_id, start_byte);


--
-- Name: attempt_logs attempt_logs_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempt_logs
    ADD CONSTRAINT attempt_logs_pkey PRIMARY KEY (attempt_id);


--
-- Name: attempts attempts_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempts
    ADD CONSTRAINT attempts_pkey PRIMARY KEY (id);


--
-- Name: attempts attempts_run_id_attempt_no_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempts
    ADD CONSTRAINT attempts_run_id_attempt_no_key UNIQUE (run_id, attempt_no);


--
-- Name: certificate_revocations certificate_revocations_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.certificate_revocations
    ADD CONSTRAINT certificate_revocations_pkey PRIMARY KEY (serial);


--
-- Name: certificate_revocations certificate_revocations_seq_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.certificate_revocations
    ADD CONSTRAINT certificate_revocations_seq_key UNIQUE (seq);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);


--
-- Name: execution_revisions execution_revisions_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.execution_revisions
    ADD CONSTRAINT execution_revisions_pkey PRIMARY KEY (id);


--
-- Name: execution_revisions execution_revisions_task_id_revision_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.execution_revisions
    ADD CONSTRAINT execution_revisions_task_id_revision_key UNIQUE (task_id, revision);


--
-- Name: placement_classes placement_classes_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.placement_classes
    ADD CONSTRAINT placement_classes_pkey PRIMARY KEY (id);


--
-- Name: placement_classes placement_classes_required_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.placement_classes
    ADD CONSTRAINT placement_classes_required_key UNIQUE (required);


--
-- Name: pools pools_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.pools
    ADD CONSTRAINT pools_pkey PRIMARY KEY (id);


--
-- Name: pools pools_project_id_name_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.pools
    ADD CONSTRAINT pools_project_id_name_key UNIQUE (project_id, name);


--
-- Name: project_data_keys project_data_keys_key_id_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.project_data_keys
    ADD CONSTRAINT project_data_keys_key_id_key UNIQUE (key_id);


--
-- Name: project_data_keys project_data_keys_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.project_data_keys
    ADD CONSTRAINT project_data_keys_pkey PRIMARY KEY (project_id);


--
-- Name: project_tokens project_tokens_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.project_tokens
    ADD CONSTRAINT project_tokens_pkey PRIMARY KEY (id);


--
-- Name: projects projects_name_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.projects
    ADD CONSTRAINT projects_name_key UNIQUE (name);


--
-- Name: projects projects_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);


--
-- Name: run_leases run_leases_attempt_id_lease_generation_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.run_leases
    ADD CONSTRAINT run_leases_attempt_id_lease_generation_key UNIQUE (attempt_id, lease_generation);


--
-- Name: run_leases run_leases_offer_id_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.run_leases
    ADD CONSTRAINT run_leases_offer_id_key UNIQUE (offer_id);


--
-- Name: run_leases run_leases_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.run_leases
    ADD CONSTRAINT run_leases_pkey PRIMARY KEY (id);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);


--
-- Name: schema_migrations schema_migrations_name_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.schema_migrations
    ADD CONSTRAINT schema_migrations_name_key UNIQUE (name);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: secrets secrets_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.secrets
    ADD CONSTRAINT secrets_pkey PRIMARY KEY (project_id, name);


--
-- Name: security_audit security_audit_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.security_audit
    ADD CONSTRAINT security_audit_pkey PRIMARY KEY (id);


--
-- Name: tasks tasks_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);


--
-- Name: tasks tasks_project_id_name_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.tasks
    ADD CONSTRAINT tasks_project_id_name_key UNIQUE (project_id, name);


--
-- Name: worker_certificates worker_certificates_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_certificates
    ADD CONSTRAINT worker_certificates_pkey PRIMARY KEY (serial);


--
-- Name: worker_credentials worker_credentials_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_credentials
    ADD CONSTRAINT worker_credentials_pkey PRIMARY KEY (credential_id);


--
-- Name: worker_labels worker_labels_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_labels
    ADD CONSTRAINT worker_labels_pkey PRIMARY KEY (worker_id, key);


--
-- Name: worker_pool_grants worker_pool_grants_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_pool_grants
    ADD CONSTRAINT worker_pool_grants_pkey PRIMARY KEY (worker_id, pool_id);


--
-- Name: worker_sessions worker_sessions_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_sessions
    ADD CONSTRAINT worker_sessions_pkey PRIMARY KEY (session_id);


--
-- Name: worker_sessions worker_sessions_worker_id_generation_key; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_sessions
    ADD CONSTRAINT worker_sessions_worker_id_generation_key UNIQUE (worker_id, generation);


--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (id);


--
-- Name: attempt_logs_run; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX attempt_logs_run ON ql_private.attempt_logs USING btree (run_id);


--
-- Name: events_fleet; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX events_fleet ON ql_private.events USING btree (created_at) WHERE (run_id IS NULL);


--
-- Name: events_run; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX events_run ON ql_private.events USING btree (run_id, id);


--
-- Name: project_tokens_project; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX project_tokens_project ON ql_private.project_tokens USING btree (project_id, created_at);


--
-- Name: run_leases_claimed; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_claimed ON ql_private.run_leases USING btree (claimed_at);


--
-- Name: run_leases_live_expiry; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_live_expiry ON ql_private.run_leases USING btree (expires_at) WHERE (released_at IS NULL);


--
-- Name: run_leases_one_live; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE UNIQUE INDEX run_leases_one_live ON ql_private.run_leases USING btree (attempt_id) WHERE (released_at IS NULL);


--
-- Name: run_leases_session_live_counted; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_session_live_counted ON ql_private.run_leases USING btree (session_id) INCLUDE (started_at, expires_at) WHERE (released_at IS NULL);


--
-- Name: run_leases_unstarted_expiry; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_unstarted_expiry ON ql_private.run_leases USING btree (expires_at) WHERE ((released_at IS NULL) AND (started_at IS NULL));


--
-- Name: runs_candidate_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_candidate_keyset ON ql_private.runs USING btree (((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: runs_class_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_class_due ON ql_private.runs USING btree (placement_class, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: runs_class_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_class_keyset ON ql_private.runs USING btree (placement_class, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: runs_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_due ON ql_private.runs USING btree (due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: runs_idempotency_key; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE UNIQUE INDEX runs_idempotency_key ON ql_private.runs USING btree (task_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);


--
-- Name: runs_pool_class_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_class_due ON ql_private.runs USING btree (pool_id, placement_class, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: runs_pool_class_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_class_keyset ON ql_private.runs USING btree (pool_id, placement_class, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: runs_pool_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_due ON ql_private.runs USING btree (pool_id, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: runs_pool_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_keyset ON ql_private.runs USING btree (pool_id, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: runs_project_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_project_state_seq ON ql_private.runs USING btree (project_id, state, queue_seq);


--
-- Name: runs_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_state_seq ON ql_private.runs USING btree (state, queue_seq);


--
-- Name: runs_task_queued_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_task_queued_due ON ql_private.runs USING btree (task_id, due_at) WHERE (state = 'queued'::text);


--
-- Name: runs_task_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_task_state_seq ON ql_private.runs USING btree (task_id, state, queue_seq);


--
-- Name: runs_terminal_finished; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_terminal_finished ON ql_private.runs USING btree (finished_at) WHERE (state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text]));


--
-- Name: security_audit_pruned; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX security_audit_pruned ON ql_private.security_audit USING btree (id) WHERE (action = 'audit.pruned'::text);


--
-- Name: security_audit_time; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX security_audit_time ON ql_private.security_audit USING btree (occurred_at);


--
-- Name: tasks_pool; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX tasks_pool ON ql_private.tasks USING btree (pool_id);


--
-- Name: worker_certificates_live_not_after; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_certificates_live_not_after ON ql_private.worker_certificates USING btree (not_after) WHERE (revoked_at IS NULL);


--
-- Name: worker_certificates_worker; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_certificates_worker ON ql_private.worker_certificates USING btree (worker_id);


--
-- Name: worker_credentials_live_expiry; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_credentials_live_expiry ON ql_private.worker_credentials USING btree (expires_at) WHERE ((revoked_at IS NULL) AND (expires_at IS NOT NULL));


--
-- Name: worker_credentials_rotated_from; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_credentials_rotated_from ON ql_private.worker_credentials USING btree (rotated_from) WHERE (rotated_from IS NOT NULL);


--
-- Name: worker_credentials_worker; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_credentials_worker ON ql_private.worker_credentials USING btree (worker_id);


--
-- Name: worker_pool_grants_pool; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_pool_grants_pool ON ql_private.worker_pool_grants USING btree (pool_id);


--
-- Name: worker_sessions_closed; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_sessions_closed ON ql_private.worker_sessions USING btree (closed_at) WHERE (state = 'closed'::text);


--
-- Name: worker_sessions_draining; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX worker_sessions_draining ON ql_private.worker_sessions USING btree (worker_id) WHERE (state = 'draining'::text);


--
-- Name: worker_sessions_one_active; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE UNIQUE INDEX worker_sessions_one_active ON ql_private.worker_sessions USING btree (worker_id) WHERE (state = 'active'::text);


--
-- Name: attempts attempts_idle_view_insert; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER attempts_idle_view_insert AFTER INSERT ON ql_private.attempts FOR EACH STATEMENT EXECUTE FUNCTION ql_private.idle_view_notify('queue');


--
-- Name: attempts attempts_idle_view_update; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER attempts_idle_view_update AFTER UPDATE ON ql_private.attempts FOR EACH ROW WHEN (((new.state = 'claimed'::text) AND ((old.state IS DISTINCT FROM new.state) OR (old.not_before IS DISTINCT FROM new.not_before) OR (old.executor IS DISTINCT FROM new.executor)))) EXECUTE FUNCTION ql_private.idle_view_notify('queue');


--
-- Name: attempts attempts_no_truncate_under_leases; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER attempts_no_truncate_under_leases BEFORE TRUNCATE ON ql_private.attempts FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'attempt_id', 'id');


--
-- Name: attempts attempts_referenced_by_leases; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER attempts_referenced_by_leases AFTER DELETE ON ql_private.attempts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'attempt_id', 'id');


--
-- Name: execution_revisions execution_revisions_immutable; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER execution_revisions_immutable BEFORE DELETE OR UPDATE ON ql_private.execution_revisions FOR EACH ROW EXECUTE FUNCTION ql_private.refuse_revision_change();


--
-- Name: execution_revisions execution_revisions_no_truncate; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER execution_revisions_no_truncate BEFORE TRUNCATE ON ql_private.execution_revisions FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_revision_change();


--
-- Name: projects projects_default_pool; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER projects_default_pool AFTER INSERT ON ql_private.projects FOR EACH ROW EXECUTE FUNCTION ql_private.project_default_pool();


--
-- Name: run_leases run_leases_close_drained; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER run_leases_close_drained AFTER UPDATE OF released_at ON ql_private.run_leases FOR EACH ROW WHEN (((old.released_at IS NULL) AND (new.released_at IS NOT NULL) AND (new.started_at IS NOT NULL))) EXECUTE FUNCTION ql_private.close_drained_session();


--
-- Name: runs runs_default_pool; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER runs_default_pool BEFORE INSERT ON ql_private.runs FOR EACH ROW WHEN ((new.pool_id IS NULL)) EXECUTE FUNCTION ql_private.run_default_pool();


--
-- Name: runs runs_idle_view_insert; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER runs_idle_view_insert AFTER INSERT ON ql_private.runs FOR EACH STATEMENT EXECUTE FUNCTION ql_private.idle_view_notify('queue');


--
-- Name: runs runs_idle_view_requeue; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER runs_idle_view_requeue AFTER UPDATE ON ql_private.runs FOR EACH ROW WHEN (((new.state = 'queued'::text) AND new.runtime_owned AND (NOT new.cancel_requested) AND ((old.state IS DISTINCT FROM new.state) OR (old.current_attempt_id IS DISTINCT FROM new.current_attempt_id) OR (old.runtime_owned IS DISTINCT FROM new.runtime_owned) OR (old.cancel_requested IS DISTINCT FROM new.cancel_requested)))) EXECUTE FUNCTION ql_private.idle_view_notify('queue');


--
-- Name: runs runs_referenced_by_events; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER runs_referenced_by_events AFTER DELETE ON ql_private.runs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.events', 'run_id', 'id');


--
-- Name: tasks tasks_default_pool; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER tasks_default_pool BEFORE INSERT ON ql_private.tasks FOR EACH ROW WHEN ((new.pool_id IS NULL)) EXECUTE FUNCTION ql_private.task_default_pool();


--
-- Name: worker_credentials worker_credentials_idle_view_delete; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_credentials_idle_view_delete AFTER DELETE ON ql_private.worker_credentials FOR EACH ROW EXECUTE FUNCTION ql_private.idle_view_notify('credential');


--
-- Name: worker_credentials worker_credentials_idle_view_update; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_credentials_idle_view_update AFTER UPDATE ON ql_private.worker_credentials FOR EACH ROW WHEN ((old.* IS DISTINCT FROM new.*)) EXECUTE FUNCTION ql_private.idle_view_notify('credential');


--
-- Name: worker_sessions worker_sessions_idle_view_delete; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_sessions_idle_view_delete AFTER DELETE ON ql_private.worker_sessions FOR EACH ROW EXECUTE FUNCTION ql_private.idle_view_notify('session');


--
-- Name: worker_sessions worker_sessions_idle_view_update; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_sessions_idle_view_update AFTER UPDATE ON ql_private.worker_sessions FOR EACH ROW WHEN (((old.state IS DISTINCT FROM new.state) OR (old.generation IS DISTINCT FROM new.generation) OR (old.worker_id IS DISTINCT FROM new.worker_id) OR (old.session_id IS DISTINCT FROM new.session_id) OR (old.slots IS DISTINCT FROM new.slots) OR (old.capabilities_digest IS DISTINCT FROM new.capabilities_digest) OR (old.capabilities_canonical IS DISTINCT FROM new.capabilities_canonical) OR (new.expires_at < old.expires_at))) EXECUTE FUNCTION ql_private.idle_view_notify('session');


--
-- Name: worker_sessions worker_sessions_no_truncate_under_leases; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_sessions_no_truncate_under_leases BEFORE TRUNCATE ON ql_private.worker_sessions FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'session_id', 'session_id');


--
-- Name: worker_sessions worker_sessions_referenced_by_live_leases; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER worker_sessions_referenced_by_live_leases AFTER DELETE ON ql_private.worker_sessions REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'session_id', 'session_id', 'released_at IS NULL');


--
-- Name: workers workers_referenced_by_leases; Type: TRIGGER; Schema: ql_private; Owner: ql_owner
--

CREATE TRIGGER workers_referenced_by_leases AFTER DELETE ON ql_private.workers REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_referenced_delete('ql_private.run_leases', 'worker_id', 'id');


--
-- Name: attempt_log_chunks attempt_log_chunks_attempt_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempt_log_chunks
    ADD CONSTRAINT attempt_log_chunks_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES ql_private.attempt_logs(attempt_id) ON DELETE CASCADE;


--
-- Name: attempt_logs attempt_logs_attempt_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempt_logs
    ADD CONSTRAINT attempt_logs_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES ql_private.attempts(id) ON DELETE CASCADE;


--
-- Name: attempts attempts_run_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.attempts
    ADD CONSTRAINT attempts_run_id_fkey FOREIGN KEY (run_id) REFERENCES ql_private.runs(id);


--
-- Name: events events_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.events
    ADD CONSTRAINT events_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id);


--
-- Name: execution_revisions execution_revisions_task_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.execution_revisions
    ADD CONSTRAINT execution_revisions_task_id_fkey FOREIGN KEY (task_id) REFERENCES ql_private.tasks(id);


--
-- Name: pools pools_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.pools
    ADD CONSTRAINT pools_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.projects(id);


--
-- Name: project_data_keys project_data_keys_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.project_data_keys
    ADD CONSTRAINT project_data_keys_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.projects(id);


--
-- Name: project_tokens project_tokens_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.project_tokens
    ADD CONSTRAINT project_tokens_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.projects(id);


--
-- Name: runs runs_execution_revision_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.runs
    ADD CONSTRAINT runs_execution_revision_id_fkey FOREIGN KEY (execution_revision_id) REFERENCES ql_private.execution_revisions(id);


--
-- Name: runs runs_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.runs
    ADD CONSTRAINT runs_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.projects(id);


--
-- Name: runs runs_task_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.runs
    ADD CONSTRAINT runs_task_id_fkey FOREIGN KEY (task_id) REFERENCES ql_private.tasks(id);


--
-- Name: secrets secrets_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.secrets
    ADD CONSTRAINT secrets_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.project_data_keys(project_id);


--
-- Name: tasks tasks_current_revision_fk; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.tasks
    ADD CONSTRAINT tasks_current_revision_fk FOREIGN KEY (current_revision_id) REFERENCES ql_private.execution_revisions(id);


--
-- Name: tasks tasks_pool_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.tasks
    ADD CONSTRAINT tasks_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES ql_private.pools(id);


--
-- Name: tasks tasks_project_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.tasks
    ADD CONSTRAINT tasks_project_id_fkey FOREIGN KEY (project_id) REFERENCES ql_private.projects(id);


--
-- Name: worker_certificates worker_certificates_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_certificates
    ADD CONSTRAINT worker_certificates_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id);


--
-- Name: worker_credentials worker_credentials_rotated_from_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_credentials
    ADD CONSTRAINT worker_credentials_rotated_from_fkey FOREIGN KEY (rotated_from) REFERENCES ql_private.worker_credentials(credential_id);


--
-- Name: worker_credentials worker_credentials_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_credentials
    ADD CONSTRAINT worker_credentials_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id);


--
-- Name: worker_labels worker_labels_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_labels
    ADD CONSTRAINT worker_labels_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id);


--
-- Name: worker_pool_grants worker_pool_grants_pool_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_pool_grants
    ADD CONSTRAINT worker_pool_grants_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES ql_private.pools(id);


--
-- Name: worker_pool_grants worker_pool_grants_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_pool_grants
    ADD CONSTRAINT worker_pool_grants_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id) ON DELETE CASCADE;


--
-- Name: worker_sessions worker_sessions_worker_id_fkey; Type: FK CONSTRAINT; Schema: ql_private; Owner: ql_owner
--

ALTER TABLE ONLY ql_private.worker_sessions
    ADD CONSTRAINT worker_sessions_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES ql_private.workers(id);


--
-- Name: SCHEMA ql; Type: ACL; Schema: -; Owner: ql_owner
--

GRANT USAGE ON SCHEMA ql TO ql_runtime;
GRANT USAGE ON SCHEMA ql TO ql_worker_ingress;
GRANT USAGE ON SCHEMA ql TO ql_readonly;
GRANT USAGE ON SCHEMA ql TO ql_sweeper;
GRANT USAGE ON SCHEMA ql TO ql_producer;


--
-- Name: FUNCTION ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) TO ql_worker_ingress;


--
-- Name: FUNCTION append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) TO ql_worker_ingress;


--
-- Name: FUNCTION authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) TO ql_worker_ingress;


--
-- Name: FUNCTION cancel_run(p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.cancel_run(p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.cancel_run(p_run_id text) TO ql_runtime;


--
-- Name: FUNCTION cancel_runs(p_task_id text, p_state text, p_wait_ms integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer) TO ql_runtime;


--
-- Name: FUNCTION close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) TO ql_worker_ingress;


--
-- Name: FUNCTION complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) TO ql_worker_ingress;


--
-- Name: FUNCTION configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer) TO ql_runtime;


--
-- Name: FUNCTION confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) TO ql_worker_ingress;


--
-- Name: FUNCTION create_pool(p_project text, p_name text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.create_pool(p_project text, p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.create_pool(p_project text, p_name text) TO ql_runtime;


--
-- Name: FUNCTION create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint) TO ql_runtime;


--
-- Name: FUNCTION delete_secret(p_project text, p_name text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.delete_secret(p_project text, p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.delete_secret(p_project text, p_name text) TO ql_runtime;


--
-- Name: FUNCTION disable_worker(p_worker_id text, p_drain boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean) TO ql_runtime;


--
-- Name: FUNCTION enable_worker(p_worker_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.enable_worker(p_worker_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.enable_worker(p_worker_id text) TO ql_runtime;


--
-- Name: FUNCTION end_session(p_session_id text, p_drain boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.end_session(p_session_id text, p_drain boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.end_session(p_session_id text, p_drain boolean) TO ql_runtime;


--
-- Name: FUNCTION enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) TO ql_runtime;


--
-- Name: FUNCTION expiring_counts(p_within_s bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.expiring_counts(p_within_s bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.expiring_counts(p_within_s bigint) TO ql_worker_ingress;


--
-- Name: FUNCTION expiring_identities(p_within_s bigint, p_limit integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) TO ql_readonly;
GRANT ALL ON FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) TO ql_runtime;


--
-- Name: FUNCTION grant_pool(p_worker_id text, p_pool text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.grant_pool(p_worker_id text, p_pool text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.grant_pool(p_worker_id text, p_pool text) TO ql_runtime;


--
-- Name: FUNCTION heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) TO ql_worker_ingress;


--
-- Name: FUNCTION heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) TO ql_worker_ingress;


--
-- Name: FUNCTION heartbeat_sessions(p_items jsonb); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.heartbeat_sessions(p_items jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.heartbeat_sessions(p_items jsonb) TO ql_worker_ingress;


--
-- Name: FUNCTION idle_probe(); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.idle_probe() FROM PUBLIC;
GRANT ALL ON FUNCTION ql.idle_probe() TO ql_worker_ingress;


--
-- Name: FUNCTION issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint) TO ql_runtime;


--
-- Name: FUNCTION label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean) TO ql_runtime;


--
-- Name: FUNCTION lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) TO ql_worker_ingress;


--
-- Name: FUNCTION list_data_keys(); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.list_data_keys() FROM PUBLIC;
GRANT ALL ON FUNCTION ql.list_data_keys() TO ql_runtime;


--
-- Name: FUNCTION list_project_tokens(p_project text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.list_project_tokens(p_project text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.list_project_tokens(p_project text) TO ql_runtime;


--
-- Name: FUNCTION list_runs(p_task_id text, p_states text[], p_limit integer, p_after text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) TO ql_readonly;
GRANT ALL ON FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) TO ql_runtime;


--
-- Name: FUNCTION list_secrets(p_project text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.list_secrets(p_project text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.list_secrets(p_project text) TO ql_runtime;


--
-- Name: FUNCTION list_workers(p_limit integer, p_after text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.list_workers(p_limit integer, p_after text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.list_workers(p_limit integer, p_after text) TO ql_readonly;
GRANT ALL ON FUNCTION ql.list_workers(p_limit integer, p_after text) TO ql_runtime;


--
-- Name: FUNCTION live_sessions(p_limit integer, p_worker_ids text[]); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) TO ql_readonly;
GRANT ALL ON FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) TO ql_runtime;


--
-- Name: FUNCTION open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) TO ql_worker_ingress;


--
-- Name: FUNCTION prepare_task(p_project text, p_task text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.prepare_task(p_project text, p_task text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.prepare_task(p_project text, p_task text) TO ql_runtime;


--
-- Name: FUNCTION producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) TO ql_producer;


--
-- Name: FUNCTION producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) TO ql_producer;


--
-- Name: FUNCTION producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text) TO ql_producer;


--
-- Name: FUNCTION producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) TO ql_producer;


--
-- Name: FUNCTION producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer) TO ql_producer;


--
-- Name: FUNCTION producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) TO ql_producer;


--
-- Name: FUNCTION project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) TO ql_runtime;


--
-- Name: FUNCTION prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_runtime;
GRANT ALL ON FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_sweeper;


--
-- Name: FUNCTION prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_runtime;
GRANT ALL ON FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_sweeper;


--
-- Name: FUNCTION prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_runtime;
GRANT ALL ON FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) TO ql_sweeper;


--
-- Name: FUNCTION publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text) TO ql_runtime;


--
-- Name: FUNCTION pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb) TO ql_worker_ingress;


--
-- Name: FUNCTION pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb) TO ql_worker_ingress;


--
-- Name: FUNCTION queue_depth(); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.queue_depth() FROM PUBLIC;
GRANT ALL ON FUNCTION ql.queue_depth() TO ql_readonly;
GRANT ALL ON FUNCTION ql.queue_depth() TO ql_runtime;


--
-- Name: FUNCTION recent_denials(p_limit integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.recent_denials(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.recent_denials(p_limit integer) TO ql_readonly;
GRANT ALL ON FUNCTION ql.recent_denials(p_limit integer) TO ql_runtime;


--
-- Name: FUNCTION record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) TO ql_worker_ingress;


--
-- Name: FUNCTION record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) TO ql_runtime;


--
-- Name: FUNCTION register_worker(p_name text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.register_worker(p_name text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.register_worker(p_name text) TO ql_runtime;


--
-- Name: FUNCTION retry_run(p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.retry_run(p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.retry_run(p_run_id text) TO ql_runtime;


--
-- Name: FUNCTION revoke_certificate(p_serial text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.revoke_certificate(p_serial text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.revoke_certificate(p_serial text) TO ql_runtime;


--
-- Name: FUNCTION revoke_credential(p_credential_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.revoke_credential(p_credential_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.revoke_credential(p_credential_id text) TO ql_runtime;


--
-- Name: FUNCTION revoke_pool(p_worker_id text, p_pool text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) TO ql_runtime;


--
-- Name: FUNCTION revoke_project_token(p_token_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.revoke_project_token(p_token_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.revoke_project_token(p_token_id text) TO ql_runtime;


--
-- Name: FUNCTION revoked_certificates(p_after_seq bigint, p_limit integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) TO ql_worker_ingress;


--
-- Name: FUNCTION rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) TO ql_runtime;


--
-- Name: FUNCTION rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) TO ql_worker_ingress;


--
-- Name: FUNCTION run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) TO ql_readonly;
GRANT ALL ON FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) TO ql_runtime;


--
-- Name: FUNCTION run_state_counts(); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.run_state_counts() FROM PUBLIC;
GRANT ALL ON FUNCTION ql.run_state_counts() TO ql_readonly;
GRANT ALL ON FUNCTION ql.run_state_counts() TO ql_runtime;


--
-- Name: FUNCTION set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) TO ql_runtime;


--
-- Name: FUNCTION show_run(p_run_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.show_run(p_run_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.show_run(p_run_id text) TO ql_readonly;
GRANT ALL ON FUNCTION ql.show_run(p_run_id text) TO ql_runtime;


--
-- Name: FUNCTION status_snapshot(); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.status_snapshot() FROM PUBLIC;
GRANT ALL ON FUNCTION ql.status_snapshot() TO ql_readonly;
GRANT ALL ON FUNCTION ql.status_snapshot() TO ql_runtime;


--
-- Name: FUNCTION sweep_leases(p_batch integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.sweep_leases(p_batch integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.sweep_leases(p_batch integer) TO ql_runtime;
GRANT ALL ON FUNCTION ql.sweep_leases(p_batch integer) TO ql_sweeper;


--
-- Name: FUNCTION task_settings(p_task_id text); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.task_settings(p_task_id text) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.task_settings(p_task_id text) TO ql_readonly;
GRANT ALL ON FUNCTION ql.task_settings(p_task_id text) TO ql_runtime;


--
-- Name: FUNCTION throughput(p_minutes integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.throughput(p_minutes integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.throughput(p_minutes integer) TO ql_readonly;
GRANT ALL ON FUNCTION ql.throughput(p_minutes integer) TO ql_runtime;


--
-- Name: FUNCTION waiting_runs(p_limit integer); Type: ACL; Schema: ql; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql.waiting_runs(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION ql.waiting_runs(p_limit integer) TO ql_readonly;
GRANT ALL ON FUNCTION ql.waiting_runs(p_limit integer) TO ql_runtime;


--
-- Name: FUNCTION apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text) FROM PUBLIC;


--
-- Name: FUNCTION authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text) FROM PUBLIC;


--
-- Name: FUNCTION bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer) FROM PUBLIC;


--
-- Name: FUNCTION candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION certificate_serial(p_serial text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.certificate_serial(p_serial text) FROM PUBLIC;


--
-- Name: FUNCTION claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean) FROM PUBLIC;


--
-- Name: FUNCTION claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean) FROM PUBLIC;


--
-- Name: FUNCTION class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION close_drained_session(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.close_drained_session() FROM PUBLIC;


--
-- Name: FUNCTION credential_first_use(p_credential_id text, p_predecessor_id text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) FROM PUBLIC;


--
-- Name: FUNCTION digest_equal(p_a bytea, p_b bytea); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea) FROM PUBLIC;


--
-- Name: FUNCTION dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text) FROM PUBLIC;


--
-- Name: FUNCTION epoch_ms(p_t timestamp with time zone); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.epoch_ms(p_t timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean) FROM PUBLIC;


--
-- Name: FUNCTION idle_view_notify(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.idle_view_notify() FROM PUBLIC;


--
-- Name: FUNCTION json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text) FROM PUBLIC;


--
-- Name: FUNCTION lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean) FROM PUBLIC;


--
-- Name: FUNCTION lease_json(l ql_private.run_leases); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_json(l ql_private.run_leases) FROM PUBLIC;


--
-- Name: FUNCTION lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text) FROM PUBLIC;


--
-- Name: FUNCTION lease_projection(p_lease_id bigint); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_projection(p_lease_id bigint) FROM PUBLIC;


--
-- Name: FUNCTION lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean) FROM PUBLIC;


--
-- Name: FUNCTION lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts) FROM PUBLIC;


--
-- Name: FUNCTION log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) FROM PUBLIC;


--
-- Name: FUNCTION matching_classes(p_capabilities jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.matching_classes(p_capabilities jsonb) FROM PUBLIC;


--
-- Name: FUNCTION offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions) FROM PUBLIC;


--
-- Name: FUNCTION offer_projection(p_lease_id bigint); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.offer_projection(p_lease_id bigint) FROM PUBLIC;


--
-- Name: FUNCTION parse_uuid(p_value text, p_field text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.parse_uuid(p_value text, p_field text) FROM PUBLIC;


--
-- Name: FUNCTION placement_class_of(p_revision_id uuid); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.placement_class_of(p_revision_id uuid) FROM PUBLIC;


--
-- Name: FUNCTION placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer) FROM PUBLIC;


--
-- Name: FUNCTION pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION pool_of(p_pool text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.pool_of(p_pool text) FROM PUBLIC;


--
-- Name: FUNCTION pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION producer_run(p_project_id uuid, p_run_id text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text) FROM PUBLIC;


--
-- Name: FUNCTION producer_task(p_project_id uuid, p_task text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.producer_task(p_project_id uuid, p_task text) FROM PUBLIC;


--
-- Name: FUNCTION producer_token(p_token_id text, p_token_digest bytea, p_scope text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) FROM PUBLIC;


--
-- Name: FUNCTION project_default_pool(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.project_default_pool() FROM PUBLIC;


--
-- Name: FUNCTION project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text) FROM PUBLIC;


--
-- Name: FUNCTION pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer) FROM PUBLIC;


--
-- Name: FUNCTION ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- Name: FUNCTION ready_priorities(p_limit integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.ready_priorities(p_limit integer) FROM PUBLIC;


--
-- Name: FUNCTION recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea) FROM PUBLIC;


--
-- Name: FUNCTION recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea) FROM PUBLIC;


--
-- Name: FUNCTION refuse_referenced_delete(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.refuse_referenced_delete() FROM PUBLIC;


--
-- Name: FUNCTION refuse_revision_change(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.refuse_revision_change() FROM PUBLIC;


--
-- Name: FUNCTION release_ungranted_leases(p_session_id uuid); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.release_ungranted_leases(p_session_id uuid) FROM PUBLIC;


--
-- Name: FUNCTION release_unstarted_leases(p_session_ids uuid[], p_reason text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text) FROM PUBLIC;


--
-- Name: FUNCTION require_digest(p_value bytea, p_field text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.require_digest(p_value bytea, p_field text) FROM PUBLIC;


--
-- Name: FUNCTION require_reason(p_value text, p_field text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.require_reason(p_value text, p_field text) FROM PUBLIC;


--
-- Name: FUNCTION run_default_pool(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.run_default_pool() FROM PUBLIC;


--
-- Name: FUNCTION scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer) FROM PUBLIC;


--
-- Name: FUNCTION semver_compare(p_a text, p_b text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.semver_compare(p_a text, p_b text) FROM PUBLIC;


--
-- Name: FUNCTION semver_parse(p_version text, p_field text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.semver_parse(p_version text, p_field text) FROM PUBLIC;


--
-- Name: FUNCTION semver_satisfies(p_version text, p_comparators jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb) FROM PUBLIC;


--
-- Name: FUNCTION session_claim_lock(s ql_private.worker_sessions); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions) FROM PUBLIC;


--
-- Name: FUNCTION session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean) FROM PUBLIC;


--
-- Name: FUNCTION session_live_leases(p_session_id uuid); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.session_live_leases(p_session_id uuid) FROM PUBLIC;


--
-- Name: FUNCTION session_projection(s ql_private.worker_sessions); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.session_projection(s ql_private.worker_sessions) FROM PUBLIC;


--
-- Name: FUNCTION settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer) FROM PUBLIC;


--
-- Name: FUNCTION signature_kid(p_signature text); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.signature_kid(p_signature text) FROM PUBLIC;


--
-- Name: FUNCTION task_default_pool(); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.task_default_pool() FROM PUBLIC;


--
-- Name: FUNCTION validate_capabilities(p_capabilities jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.validate_capabilities(p_capabilities jsonb) FROM PUBLIC;


--
-- Name: FUNCTION validate_placement(p_placement jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.validate_placement(p_placement jsonb) FROM PUBLIC;


--
-- Name: FUNCTION validate_result(p_result jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.validate_result(p_result jsonb) FROM PUBLIC;


--
-- Name: FUNCTION validate_result_limits(p_limits jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.validate_result_limits(p_limits jsonb) FROM PUBLIC;


--
-- Name: FUNCTION validate_secret_refs(p_project text, p_spec jsonb); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb) FROM PUBLIC;


--
-- Name: FUNCTION waiting_classes(p_due_by timestamp with time zone); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.waiting_classes(p_due_by timestamp with time zone) FROM PUBLIC;


--
-- Name: FUNCTION xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8) FROM PUBLIC;


--
-- PostgreSQL database dump complete
--
