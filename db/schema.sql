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


ALTER FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) OWNER TO ql_owner;

--
-- Name: FUNCTION ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.ack_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_phase text, p_reason text) IS 'ql.ack_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
             p_offer_id, p_token_digest, p_lease_version, p_phase,
             p_reason DEFAULT NULL) -> jsonb

Purpose: the lease ACKs of SPEC §5 /v1/leases/ack and §7, each one atomic
  transaction fenced by offer id + token digest + worker/session/generation
  + the lease version the worker last saw (the lease row fixes lease
  generation; every change bumps lease_version by one, the release by
  start_failed included):
  * starting      unstarted, unexpired live lease, attempt claimed ->
                  lease started_at = now, expires_at = now + the lease''s
                  TTL pinned at claim (run_leases.lease_ttl_seconds),
                  lease_version + 1; attempt -> starting; run -> starting;
                  one `run.starting` event.
  * running       started lease, attempt starting -> attempt running, run
                  running, lease_version + 1; one `run.running` event.
  * start_failed  unstarted or starting (not running) -> attempt failed with
                  reason (default `start_failed`), finished_at; lease released
                  `start_failed`, lease_version + 1; one
                  `attempt.failed` event; then ql_private.apply_retry (one of
                  `run.retry_scheduled` / `run.failed` / `run.cancelled`).
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
  p_token_digest (SHA-256 of the lease token), p_lease_version (the version
  of the last lease@v1 the worker received, >= 1), p_phase (starting |
  running | start_failed), p_reason (a reason code, only with start_failed).
Fences (ql_private.lease_prelude, which also answers replays and conflicts):
  the credential (ql_private.authenticate, action `lease.ack`), then
  ql_private.lease_open: offer id, worker, constant-time token digest,
  session/generation, lease live and unexpired, attempt, revision, then the
  lease version (ql_private.lease_open: the current version applies the ACK).
Returns {"status":"ok","lease":<lease@v1 projection>} after a change (its
  leaseVersion = p_lease_version + 1),
  {"status":"idempotent","lease":…} for an exact replay (writes nothing): the
  same ACK repeated after a lost answer, i.e. p_lease_version = current - 1
  and the current version was made by this phase (start_failed: with the
  same reason); the answer is the current lease, exactly what was lost;
  {"status":"conflict","category":…} (ql_private.lease_verdict: offer_foreign —
  also for an unknown offer id, token_mismatch, session_replaced,
  lease_expired, lease_terminal, attempt_changed, revision_drift; and
  stale_lease_version: any other version);
  or the denial envelope (ql_private.authenticate).
Writes: as above (lease, attempt, run, one event, the retry policy''s writes);
  nothing for a replay, a conflict or an illegal transition; one
  security_audit row when denied.
Locks: a first unlocked read answers replays, conflicts and illegal
  transitions without any lock or write. A change then locks attempt, run and
  lease in the order of ql_private.lease_prelude / lease_open (`attempt_run_lease`, the order of
  claims and ql.cancel_run, so none of them can deadlock with it) and re-checks
  every fence on the locked rows by clock_timestamp(). The sweeper never waits
  for these locks (SKIP LOCKED); a lease it already holds is seen released.
Idempotency: exact replay as above; anything else is a conflict or QL020.
Errors: QL001 malformed ids/digest, generation NULL or < 1, lease version
  NULL or < 1, unknown phase,
  malformed reason, or a reason with phase starting/running;
  QL020 illegal transition at the current version (running before starting,
  starting after starting, start_failed after running) — nothing is written.
Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
  so a plan a pooled connection made while the lease tables were small (a
  sequential scan of run_leases) does not stay with it as they grow.
Caller: ql_worker_ingress.';


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
    -- Authenticated, locked and fenced in one go (ql_private.lease_prelude): an
    -- append writes whenever it is accepted, so an unlocked first read would save
    -- nothing but on a conflict. A `log` change is never a replay.
    v_state := ql_private.lease_prelude(
        p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
        v_offer_id, v_token_digest, p_lease_version, 'lease.log', 'log',
        'attempt_lease_share');
    IF v_state.answer IS NOT NULL THEN
        RETURN v_state.answer;
    END IF;
    v_lease := v_state.lease;
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

COMMENT ON FUNCTION ql.append_log(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_offset bigint, p_chunk text) IS 'ql.append_log(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
              p_generation, p_offer_id, p_token_digest, p_lease_version,
              p_offset, p_chunk) -> jsonb

Purpose: append a chunk of a running command''s combined output to its
  attempt''s live log (SPEC §15.1 `POST /v1/leases/log`). The log is the
  UTF-8 bytes of the chunks in order; p_offset is where the worker believes
  this chunk starts, in bytes. The server appends only at its stored length:
  * p_offset = stored length: appended (status ok). An empty chunk there
    changes nothing (status idempotent).
  * the chunk repeats stored bytes (p_offset < stored length and its bytes
    equal the stored ones from p_offset on, ending at or before the stored
    length): unchanged (status idempotent) — a chunk whose answer was lost,
    sent again.
  * anything else (a gap: p_offset past the stored length; different bytes;
    a chunk that overlaps the stored end): {"status":"conflict",
    "category":"log_offset","storedBytes":N} and nothing is written; the
    worker resumes from N (the ingress answers 409 log_offset {offset: N}).
  Cap (SPEC §15.2): the attempt''s log keeps at most limit_bytes bytes, the
  task''s logLimitBytes pinned on the lease at its claim (run_leases.
  log_limit_bytes, copied to the log header by the first append). A chunk
  crossing it is cut at the last character boundary at or below it, the
  rest dropped and the log marked truncated; from then on every chunk at or
  past the stored length is dropped (status ok, nothing written) and the
  answer says truncated: true (the worker stops sending; the command runs
  on). A replay of the crossing chunk (its stored part equal) is
  idempotent.
  Answers {"status":"ok"|"idempotent","storedBytes":N,"truncated":bool}, the
  log''s state after the call.
Inputs: the lease proof as ql.heartbeat_lease (p_credential_id,
  p_secret_digest, p_worker_id, p_session_id, p_offer_id, p_generation >= 1,
  p_token_digest, p_lease_version >= 1); p_offset >= 0; p_chunk a string of
  at most 65536 bytes in UTF-8.
Fences (ql_private.lease_prelude, which also answers conflicts):
  the credential (ql_private.authenticate, action `lease.log`), then
  ql_private.lease_open (offer, worker, constant-time token digest,
  session/generation, live unexpired lease, attempt, revision) and the lease
  version, which must be the current one: an append is fenced by it but never
  bumps it (SPEC §15.1), so a heartbeat''s bump in between answers
  stale_lease_version and the worker sends again with the version it now
  holds. Only a STARTED lease appends (after the starting ACK).
Returns the answer above | {"status":"conflict","category":…} (lease_verdict
  categories, stale_lease_version, log_offset) | the denial envelope.
Writes: one attempt_log_chunks row and the attempt_logs header (created by
  the first append: run, pinned cap) per appended chunk; nothing for a
  replay, a dropped chunk, a conflict or an error; one security_audit row
  when denied.
Locks: in the lifecycle order (docs/LIFECYCLE.md "Locks"): attempt FOR KEY
  SHARE, then lease FOR KEY SHARE (ql_private.lease_open
  `attempt_lease_share`), then the attempt''s log header FOR NO KEY UPDATE.
  The shared locks let heartbeats and other appends pass but not a change of
  the attempt (completion, start failure, loss, cancel: attempt FOR UPDATE),
  so no chunk lands after its attempt ended; the header lock serializes the
  appends of one attempt (two at the same offset: one appends, the other
  then sees the new length: replay if it carried the same bytes, else
  log_offset). Nothing is locked after the header.
Idempotency: replays as above; the lease is not touched.
Errors: QL001 malformed ids/digest, generation or lease version NULL or < 1,
  p_offset NULL or < 0 (COLUMN offset), p_chunk NULL (COLUMN chunk); QL002
  p_chunk over 65536 bytes (COLUMN chunk); QL020 the lease is not started
  (a chunk before the starting ACK). Nothing is written on any error.
Planning: as ql.heartbeat_lease (generic plans, no sequential scans, no JIT).
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.authenticate_worker(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_action text) IS 'ql.authenticate_worker(p_credential_id, p_secret_digest, p_worker_id, p_action) -> jsonb

Purpose: stand-alone credential check for ingress actions that have no
  database work of their own (or that a replica caches for <= 5 s, SPEC §5).
  Returns {"status":"ok"} or the denial envelope of ql_private.authenticate.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret, 32 bytes; the
  secret itself never reaches the database), p_worker_id (lowercase canonical
  UUID: the worker the ingress authenticated by certificate), p_action (the
  audited action name, ^[a-z][a-z0-9_.]{0,63}$).
Fences: the credential (ql_private.authenticate: exists, secret matches in
  constant time, not revoked, belongs to p_worker_id).
Writes: nothing when allowed; one security_audit row when denied.
Locks: none.
Idempotency: read-only when allowed; each denial is its own audit fact.
Errors: QL001 p_worker_id not a lowercase canonical UUID, or malformed action.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.cancel_run(p_run_id text) IS 'ql.cancel_run(p_run_id text) -> jsonb {runId, state, cancelRequested}

Purpose: cancel a run (SPEC §7, §8 `admin run cancel`).
  * queued/dispatching and no started live lease: cancelled now. The run ->
    ''cancelled'' (finished_at, cancel_requested), its current attempt ->
    ''cancelled'' (unless already terminal), a live unstarted lease released with
    reason ''cancelled'' (the pending offer then recovers as lease_terminal), one
    `run.cancelled` event.
  * started (starting/running, or a started live lease): the worker must stop
    it, so only cancel_requested = true and one `run.cancel_requested` event;
    the worker learns it from its lease heartbeat.
  * terminal (succeeded/failed/cancelled), or cancel already requested: returns
    the state unchanged and writes nothing.
Inputs: p_run_id (lowercase canonical UUID).
Fences: none beyond the run''s own state (the control plane is trusted).
Writes: as above: at most the run, its current attempt, its live lease and one
  event, whose payload names the acting database role (`actor`: session_user,
  the login role that called; inside SECURITY DEFINER current_user is the
  owner) (SPEC §9.5).
Locks, in the pull path''s order so the two cannot deadlock: the current
  attempt FOR UPDATE (a concurrent claim, which locks it with SKIP LOCKED,
  either finished first or skips this run), then the run FOR NO KEY UPDATE,
  then the live lease (UPDATE) (ql_private.lock_run_attempt). If the run
  moved to another attempt between reading and locking, those locks are
  rolled back and it starts again with the new attempt (never attempt after
  run).
Idempotency: yes (see terminal case); a second call never adds an event.
Errors: QL001 malformed run id; QL004 unknown run.
Caller: ql_runtime (control plane), ql.producer_cancel_run.';


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

COMMENT ON FUNCTION ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer) IS 'ql.cancel_runs(p_task_id text, p_state text, p_wait_ms integer DEFAULT 5000)
  -> jsonb {cancelled, notCancelled: [{runId, state, reason}]}

Purpose: bulk cancel (SPEC §9.5 `admin run cancel --task ID --state queued`):
  every run of the task that is `queued` when the call starts is `cancelled`
  when it returns, or listed in notCancelled. Each is cancelled as
  ql.cancel_run cancels a queued run: the run -> ''cancelled''
  (cancel_requested, finished_at), its current attempt -> ''cancelled''
  (reason cancelled, finished_at), one `run.cancelled` event each
  ({attemptId, leaseReleased, offerId?, actor: session_user, bulk: true}).
  Scheduled runs (due later) are queued too and are cancelled with the rest.
  Only `queued` is supported; runs in flight at the start are cancelled one
  by one with ql.cancel_run (their worker must be told).
  Two passes. (1) Set-based: one statement takes the set (the task''s queued
  runs, runs_task_state_seq, on the statement''s snapshot: "queued when the
  call started") and locks, cancels and records every run whose attempt and
  run it can lock at once (SKIP LOCKED). (2) Each run of the set it could not
  take (another transaction held it: a claim, a sweep, ql.cancel_run, a
  second bulk cancel) is then waited for, in queue order, within what is
  left of p_wait_ms: locked through ql_private.lock_run_attempt and decided
  on the locked rows. Still queued, or claimed meanwhile but not started
  (dispatching, unstarted lease): cancelled, the unstarted lease released
  `cancelled` (its offer then recovers as lease_terminal). Cancelled
  meanwhile by someone else: done, not counted. Started meanwhile
  (starting|running) or finished: listed, reason `started` | `finished`
  (left alone: a started run is cancelled with ql.cancel_run, which tells
  its worker). Not lockable before the bound: listed, reason `locked`,
  nothing written for it.
Inputs: p_task_id (lowercase canonical UUID), p_state (''queued''), p_wait_ms
  0..60000 (default 5000): how long, in all, pass 2 may wait for locks.
Fences: the task exists; each run is re-checked on its locked rows.
Writes: the runs, their current attempts, a released unstarted lease, one
  event per cancelled run; nothing for a listed run.
Locks: in the lifecycle order attempt -> run (-> lease) (docs/LIFECYCLE.md
  "Locks"). First an advisory transaction lock on the task''s bulk cancel
  (two bulk cancels of one task queue instead of each holding half the set
  and waiting for the other''s half), waited for within p_wait_ms; then pass
  1: attempt + run FOR NO KEY UPDATE SKIP LOCKED in one statement (never
  waits); pass 2: per run, the attempt FOR UPDATE then the run FOR NO KEY
  UPDATE, each wait bounded by lock_timeout = the time left (a deadlock
  detected on one of them gives that wait up and tries again while time is
  left). lock_timeout is this function''s own setting, restored on return.
Idempotency: a second call finds no queued run: {cancelled: 0, notCancelled: []}.
Errors: QL001 malformed task id (COLUMN taskId), a state other than queued
  (COLUMN state); QL006 p_wait_ms out of 0..60000 (COLUMN waitMs); QL004
  unknown task (COLUMN taskId); nothing changed on error. A run that could
  not be cancelled is no error: it is listed (the admin command exits 1).
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.close_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) IS 'ql.close_session(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                 p_generation) -> jsonb

Purpose: end a session on the worker''s request (SPEC §5 /v1/sessions/close).
  Authenticates (action `session.close`), then sets state ''closed'' and
  closed_at, and releases the session''s unstarted live leases with reason
  `session_closed` so their runs become candidates again at once. Started
  leases stay live (the run is executing; its lease lifecycle decides).
  An expired but still active session IS closed (not QL012): closing is the
  worker giving the session up, and doing it now frees its pending offers
  without waiting for the sweeper.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id (lowercase canonical UUIDs), p_generation (>= 1).
Fences: the credential (ql_private.authenticate); the session exists for this
  worker, with exactly this generation, not closed by a replacement.
Returns {"status":"ok","session":{...session@v1 projection}} or the denial envelope.
Writes: the session row (state, closed_at) and the released leases; nothing
  when already closed; one security_audit row when denied.
Locks: the session row FOR UPDATE, which waits for in-flight claims holding
  the fence lock (session_fence lock=true, FOR NO KEY UPDATE) so the release
  sees their leases, and makes later claims re-check and find the session
  closed; then attempt -> run -> lease per released lease
  (ql_private.release_unstarted_leases, the lifecycle order).
Idempotency: closing an already closed session of the right generation (not
  replaced by a newer one) returns ok with its projection and writes nothing.
Errors: QL001 malformed ids, generation NULL or < 1; QL010 no such session
  for this worker; QL011 generation differs, or the session was closed by a
  replacement (a newer generation exists).
Caller: ql_worker_ingress.';


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


ALTER FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) OWNER TO ql_owner;

--
-- Name: FUNCTION complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb); Type: COMMENT; Schema: ql; Owner: ql_owner
--

COMMENT ON FUNCTION ql.complete_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb) IS 'ql.complete_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                  p_generation, p_offer_id, p_token_digest, p_lease_version,
                  p_outcome,
                  p_exit_code DEFAULT NULL, p_reason DEFAULT NULL,
                  p_result DEFAULT NULL) -> jsonb

Purpose: the completion of a STARTED lease (SPEC §5 /v1/leases/complete, §7),
  one atomic transaction fenced by offer id + token digest +
  worker/session/generation + the lease version the worker last saw
  (ql_private.lease_open; a lease past expires_at belongs to the sweeper and
  answers lease_expired). Attempt starting|running:
  * succeeded  attempt succeeded (exit_code, finished_at); run succeeded
               (finished_at); lease released `completed`; one `run.succeeded`.
  * failed     attempt failed (exit_code, reason default `failed`); lease
               released `completed`; one `attempt.failed`; then the retry
               policy (ql_private.apply_retry): one `run.retry_scheduled` (new
               attempt, run queued), `run.failed` or — cancel requested —
               `run.cancelled`.
  * cancelled  only when the run is cancel-requested (the worker stopped it
               after learning so from its heartbeat): attempt cancelled
               (reason default `cancelled`), run cancelled, lease released
               `cancelled`; one `run.cancelled`.
  The completion bumps lease_version by one like every other change (SPEC §7:
  the answer carries version + 1), so its repetition is recognized by version.
  The optional result (SPEC §9.3: {exitCode?, durationMs, outputTail,
  outputBytes}, ql_private.validate_result) is stored on the attempt with the
  completion (attempts.result); ql.show_run shows it.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
  p_token_digest (SHA-256 of the lease token), p_lease_version (the version
  of the last lease@v1 the worker received, >= 1), p_outcome (succeeded | failed |
  cancelled), p_exit_code (0 or NULL with succeeded), p_reason (a reason code;
  not with succeeded), p_result (NULL or the result object; checked before
  anything else is read, so a bad one never reaches the lease).
Fences (ql_private.lease_prelude, which also answers replays and conflicts):
  the credential (ql_private.authenticate, action `lease.complete`), then
  ql_private.lease_open (offer, worker, constant-time token digest,
  session/generation, live unexpired lease, attempt, revision, lease version).
Returns {"status":"ok","lease":<lease@v1 projection>} |
  {"status":"idempotent","lease":…} for an exact replay: p_lease_version is
  the version the completion consumed (current - 1) and the lease was
  released by a completion with the same outcome, exit code, reason and
  result (writes nothing; answers the current lease, what the lost answer
  carried) | {"status":"conflict","category":…} (lease_verdict categories; a
  different completion of an already completed lease, or one at another
  version, is `lease_terminal`; a live lease at another version is
  `stale_lease_version`) | the denial envelope.
Writes: lease (released), attempt, run or the retry policy''s writes, one event;
  nothing for a replay, a conflict or an illegal transition; one
  security_audit row when denied.
Locks: an unlocked first read answers replays, conflicts and QL020 without a
  lock; a change locks attempt, run and lease in the order of
  ql_private.lease_prelude / lease_open (`attempt_run_lease`, the order of claims and
  ql.cancel_run) and re-checks.
Idempotency: exact replay as above (the worker journals the completion with
  its result before the first send, so its repetition carries the same bytes).
Errors: QL001 malformed ids/digest, generation NULL or < 1, lease version NULL
  or < 1, unknown outcome,
  malformed reason, a reason with outcome succeeded, or succeeded with a
  non-zero exit code, a malformed result (COLUMN ''result''); QL020 the lease is not started (complete before the
  starting ACK), or outcome cancelled without a cancel request — nothing is
  written.
Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
  so a plan a pooled connection made while the lease tables were small (a
  sequential scan of run_leases) does not stay with it as they grow.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.configure_task(p_task_id text, p_lease_ttl_s integer, p_max_attempts integer, p_retry_base_ms integer, p_retry_cap_ms integer, p_enabled boolean, p_log_limit_bytes integer) IS 'ql.configure_task(p_task_id text, p_lease_ttl_s integer DEFAULT NULL,
                  p_max_attempts integer DEFAULT NULL,
                  p_retry_base_ms integer DEFAULT NULL,
                  p_retry_cap_ms integer DEFAULT NULL,
                  p_enabled boolean DEFAULT NULL,
                  p_log_limit_bytes integer DEFAULT NULL) -> jsonb

Purpose: change a task''s run policy (SPEC §9.1 `admin task configure`, also
  the flags of `admin task publish`). NULL leaves a setting unchanged. Returns
  the resulting settings, the object of ql.task_settings: {taskId, leaseTtlS,
  maxAttempts, retryBaseMs, retryCapMs, enabled, logLimitBytes}.
  New settings apply to attempts claimed afterwards: the claim reads the
  lease TTL and the log cap (logLimitBytes, SPEC §15.2) from the task and
  pins them on the lease (ql_private.claim_candidate), the retry policy reads
  max attempts and backoff when an attempt ends (ql_private.apply_retry);
  nothing is copied at enqueue. A disabled task refuses new enqueues
  (ql.enqueue_runs); runs already queued stay queued.
Inputs: p_task_id (lowercase canonical UUID); bounds of the given values:
  p_lease_ttl_s 5..86400 (leaseTtlS), p_max_attempts 1..100 (maxAttempts),
  p_retry_base_ms 100..3600000 (retryBaseMs), p_retry_cap_ms
  retryBaseMs..86400000 (retryCapMs), the cap checked against the resulting
  base when either is given (a base raised above the stored cap is reported
  on retryBaseMs when no cap is given), p_log_limit_bytes 1024..67108864
  (logLimitBytes).
Fences: the task exists.
Writes: the task row (only when something changes). No event: events are run
  facts, and nothing secret is involved.
Locks: the task row FOR NO KEY UPDATE (two configures of one task serialize,
  so the base/cap pair is checked on what is stored).
Idempotency: the same call twice leaves the same settings.
Errors: QL001 malformed task id (COLUMN taskId); QL006 a value out of its
  bounds (COLUMN = its wire field); QL004 unknown task (COLUMN taskId);
  nothing is changed on any error.
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.confirm_credentials(p_credential_ids text[], p_secret_digests bytea[], p_worker_ids text[]) IS 'ql.confirm_credentials(p_credential_ids, p_secret_digests, p_worker_ids) -> text[]

Purpose: re-confirm, in one read-only statement, the credentials an ingress
  replica''s idle view holds in its cache (service/idle_view.py). SPEC §5 lets
  a replica trust a confirmed credential for at most 5 s; without this, every
  cached worker''s next pull after 5 s went to the database only to
  re-authenticate, which at the default cadence (a pull every 2-3 s) was about
  every second idle pull. The replica sends the aging entries of its cache
  together, at most a few times a second, on its LISTEN connection.
Inputs: three arrays of equal length 0..1024, position i describing one cache
  entry: p_credential_ids[i] (^[a-z0-9]{16}$), p_secret_digests[i] (the
  SHA-256 the replica holds, 32 bytes), p_worker_ids[i] (the worker the
  replica authenticated by certificate, lowercase canonical UUID).
Returns: the credential ids (a subset of p_credential_ids, in input order)
  that ql_private.authenticate would allow for their worker right now: the
  credential exists, its digest matches (ql_private.digest_equal, constant
  time), it is not revoked nor expired (SPEC §16.2), it belongs to that
  worker, and the worker is not disabled. Every other entry is simply left out: the replica drops it and
  the worker''s next request meets the full check (which audits a denial).
Fences: the same credential facts as ql_private.authenticate.
Writes: none (no audit row either: nothing is denied here; zero WAL).
Locks: none (plain reads of worker_credentials and workers by primary key).
Idempotency: read-only.
Errors: QL001 arrays NULL, of different lengths or longer than 1024, or an
  element NULL or malformed (a caller bug: the replica only sends what the
  database confirmed before).
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.create_pool(p_project text, p_name text) IS 'ql.create_pool(p_project text, p_name text) -> jsonb {poolId, project, name, created}

Purpose: `admin pool create --project P --name N` (SPEC §13.1). A pool belongs
  to one project; the project is created when it does not exist yet (with its
  `default` pool, migration 0019''s projects_default_pool trigger).
Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_name
  (^[a-z0-9][a-z0-9._-]{0,62}$).
Fences: the names.
Writes: the project row (first use), one pools row; nothing when the pool
  exists.
Locks: none beyond the unique indexes (INSERT ON CONFLICT DO NOTHING + re-read:
  a concurrent creator wins and this call reads its committed row).
Idempotency: an existing pool is returned with created = false.
Errors: QL001 bad project (COLUMN project) or pool name (COLUMN name).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea, p_scopes text[], p_expires_in_s bigint) IS 'ql.create_project_token(p_project text, p_token_id text, p_token_digest bytea,
                        p_scopes text[], p_expires_in_s bigint DEFAULT NULL) -> jsonb

Purpose: `admin token create --project P --scope ... [--expires-in D]` (SPEC
  §13.4). The CLI generates the token `qlp_<p_token_id>_<secret>` with a CSPRNG
  and prints it once; only p_token_digest, the SHA-256 of the whole token
  string, reaches the database. The project is created when it does not exist
  yet (with its default pool, like ql.create_pool), so a token can be made
  before the project''s first publish.
  Returns {tokenId, project, scopes, createdAtMs, expiresAtMs} (scopes sorted,
  duplicates dropped; expiresAtMs null = never). Never the digest.
Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_token_id
  (^[a-z0-9]{16}$), p_token_digest (32 bytes), p_scopes (1..5 of enqueue,
  read, cancel, retry, log), p_expires_in_s (NULL = never, else 1..
  315360000 = 10 years).
Fences: the inputs; a token id already used is refused.
Writes: one project_tokens row (created_by = session_user); the project row
  (and its default pool) on first use.
Locks: none beyond the unique indexes.
Idempotency: none (each call is a new token).
Errors: QL001 bad project (COLUMN project), token id (COLUMN tokenId), digest
  (COLUMN tokenDigest), scope (COLUMN scope); QL006 p_expires_in_s out of
  bounds (COLUMN expiresIn); QL001 token id already used (COLUMN tokenId).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.delete_secret(p_project text, p_name text) IS 'ql.delete_secret(p_project text, p_name text) -> jsonb {project, name, version, deleted}

Purpose: `admin secret delete --project P --name NAME` (SPEC §14.1): remove a
  secret (its ciphertext goes with the row). A revision that names it stays
  as published; a run of it is then answered `secret_missing` by
  ql.lease_secrets, and a new publish naming it is refused.
Inputs: p_project, p_name (^[a-z][a-z0-9_.-]{0,63}$).
Fences: the secret exists.
Returns {project, name, version (the deleted one), deleted: true}.
Writes: deletes the secrets row; one security_audit row (action
  secret.delete, reason secret_deleted, actor session_user, detail
  {project, name, version}).
Locks: the secret row (DELETE).
Idempotency: none: a second delete is QL004.
Errors: QL001 malformed (COLUMN project|name), QL004 no such secret (COLUMN name).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.disable_worker(p_worker_id text, p_drain boolean) IS 'ql.disable_worker(p_worker_id text, p_drain boolean DEFAULT false) -> jsonb
  {workerId, disabled: true, drain, sessionsClosed, sessionsDraining,
   leasesReleased}

Purpose: take a worker out of service (SPEC §9.5 `admin worker disable`).
  Sets workers.disabled_at; from then on ql_private.authenticate refuses every
  credential of the worker with the denial envelope reason `worker_disabled`,
  httpStatus 403 (audited like every denial), until ql.enable_worker. Its
  sessions that are not closed are closed the way ql.close_session closes
  one: unstarted live leases released (`session_closed`, runs re-queued at
  once), state closed, closed_at; started leases stay live (their lease
  lifecycle decides, but with their session closed they can no longer
  heartbeat or complete and end as `lost`). One `worker.disabled` event
  (events.worker_id; payload workerId, drain, sessionsClosed,
  sessionsDraining, leasesReleased, actor = session_user) when anything
  changed.
  With drain, each ACTIVE session drains instead of closing
  (ql_private.drain_session, as ql.end_session with drain): unstarted leases
  released, no new offer, started leases may still ACK running, heartbeat and
  complete, the session closes with its last one (at once when none runs).
  The credentials are refused all the same (worker_disabled) for session.open
  and offer.pull, and for everything once no draining session is left;
  while one is, ql_private.authenticate lets through only the calls that end
  started work (session heartbeat/close, lease ACK/heartbeat/complete), which
  their fences keep to that session''s started leases: no new work, ever.
  sessionsClosed counts the sessions closed (with drain: those with nothing
  running), sessionsDraining those left draining. A session already draining
  is left as it is with drain, and closed without it (the escalation).
  Ingress replicas learn it within their NOTIFY latency: closing a session
  fires ''s:<workerId>'' (migration 0005 trigger) and this function sends
  ''c:<credentialId>'' for each credential of the worker on channel
  ql_dispatch, so every replica''s idle view drops what it believed about the
  worker and its credentials (ids only in the payloads).
Inputs: p_worker_id (lowercase canonical UUID); p_drain (NULL = false).
Fences: the worker exists.
Writes: the worker row (when not yet disabled), its open sessions and their
  released leases, one event; NOTIFYs at commit.
Locks: the worker row FOR NO KEY UPDATE, each open session FOR UPDATE (which
  waits for a claim holding the session''s fence lock, as ql.close_session),
  then attempt -> run -> lease per released lease
  (ql_private.release_unstarted_leases); with drain also FOR SHARE on each
  draining session''s live leases (ql_private.drain_session).
Idempotency: disabling a disabled worker without open sessions (with drain:
  without active sessions) changes nothing, writes no event and returns
  sessionsClosed 0, leasesReleased 0.
Errors: QL001 malformed worker id (COLUMN workerId); QL004 unknown worker
  (COLUMN workerId); nothing changed on error.
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.enable_worker(p_worker_id text) IS 'ql.enable_worker(p_worker_id text) -> jsonb {workerId, disabled: false}

Purpose: put a disabled worker back in service (SPEC §9.5 `admin worker
  enable`): workers.disabled_at := NULL, so its credentials that are not
  revoked authenticate again (it opens a new session itself). One
  `worker.enabled` event (events.worker_id; payload workerId, actor =
  session_user) when it was disabled; ''c:<credentialId>'' is sent on
  ql_dispatch for each of its credentials, so ingress replicas drop a cached
  refusal.
Inputs: p_worker_id (lowercase canonical UUID).
Fences: the worker exists.
Writes: the worker row and one event (nothing when already enabled).
Locks: the worker row FOR NO KEY UPDATE.
Idempotency: enabling an enabled worker changes nothing and writes no event.
Errors: QL001 malformed worker id (COLUMN workerId); QL004 unknown worker
  (COLUMN workerId).
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.end_session(p_session_id text, p_drain boolean) IS 'ql.end_session(p_session_id text, p_drain boolean DEFAULT false) -> jsonb
  {sessionId, workerId, state: "closed"|"draining", drain, leasesReleased,
   leasesRunning}

Purpose: the operator closes a worker session (SPEC §9.5 `admin session
  close`).
  Without drain, the way ql.close_session closes it for the worker: unstarted
  live leases released (`session_closed`, their runs re-queued at once),
  state closed, closed_at; started leases stay live but can no longer
  heartbeat or complete (their session is gone: 409 session_replaced), so
  they end as `lost` at expiry. The worker''s next call gets session_closed
  (409) and it opens a new session. One `session.closed` event
  (events.worker_id; payload sessionId, workerId, generation,
  leasesReleased, drain false, actor = session_user). A draining session is
  closed the same way (the escalation of a drain).
  With drain (an active session; ql_private.drain_session): no new offer from
  now on (a pull answers 409 session_draining, QL015), unstarted live leases
  released as above, started leases run on — their attempts may still ACK
  running, heartbeat and complete — and the session is closed when the last
  of them ends (ql_private.close_drained_session), at once when none is
  running, or lapses at its normal expiry. One `session.draining` event
  (payload sessionId, workerId, generation, leasesReleased, leasesRunning,
  state, drain true, actor). A session already draining: no-op.
  The session UPDATE fires ''s:<workerId>'' on ql_dispatch (migration 0005).
Inputs: p_session_id (lowercase canonical UUID); p_drain (NULL = false).
Fences: the session exists.
Writes: the session row, the released leases, runs re-queued, one event;
  nothing when the session is already closed (or, with drain, draining).
Locks: the session row FOR UPDATE (waits for a claim holding its fence lock,
  as ql.close_session), then attempt -> run -> lease per released lease;
  with drain also FOR SHARE on the remaining live leases
  (ql_private.drain_session).
Idempotency: closing a closed session (or draining a draining one) is a
  no-op returning the same shape with leasesReleased 0 (no event).
Errors: QL001 malformed session id (COLUMN sessionId); QL004 unknown session
  (COLUMN sessionId).
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) IS 'ql.enqueue_runs(p_task_id text, p_priority integer, p_count integer,
                p_not_before_ms bigint DEFAULT NULL, p_delay_ms bigint DEFAULT NULL,
                p_key text DEFAULT NULL) -> jsonb {runIds, existing}

Purpose: queue `p_count` runs of a task (SPEC §8 `admin run enqueue`, §9.2
  scheduled and idempotent enqueue). Each run is pinned to the task''s current
  execution revision, state ''queued'', runtime-owned, with its first attempt
  (attempt_no 1, executor ''remote_worker'', state ''claimed'') set as
  runs.current_attempt_id; one `run.queued` event per run. runIds are returned
  in queue order (queue_seq). Each run records its revision''s placement class
  (ql_private.placement_class_of, which may add one placement_classes row) for
  runs_class_keyset.
  Scheduling: p_delay_ms (from now) or p_not_before_ms (epoch ms) give the
  time before which the runs are not offered. A time in the future makes them
  scheduled: runs.due_at = that time (outside the candidate keysets, in
  runs_due; candidate_page reads them once due, the sweeper promotes them) and
  the attempt''s not_before = the same time. A time not in the future (delay
  0, a not-before in the past) = ready now (due_at NULL, not_before now). The
  event carries dueAtMs when scheduled.
  Idempotency key: p_key names the run within its task while the run row is
  retained (unique partial index runs_idempotency_key). A key that already
  names a run of this task returns {runIds: [that run], existing: true} and
  writes nothing (no run, no event), whatever the other arguments; else the
  run is inserted with INSERT ... ON CONFLICT DO NOTHING, so the same key sent
  by many connections at once queues exactly one run: the losers wait for the
  winner''s commit, then read its id (existing: true).
  Without a key: set-based, one statement inserts all runs, attempts and
  events (ids are generated up front, so current_attempt_id is written with the
  run and no run row is updated; attempts.run_id''s foreign key is checked at
  the end of that statement).
Inputs: p_task_id (lowercase canonical UUID), p_priority (smallint range),
  p_count (1..10000; exactly 1 with a key), p_delay_ms (0..31536000000, i.e.
  up to a year), p_not_before_ms (0..now + 31536000000; not with p_delay_ms),
  p_key (1..128 characters, no control characters).
Fences: the task exists; for new runs it is enabled and has a published
  revision.
Writes: p_count runs (each carrying the task''s pool, SPEC §13.1), attempts (each with the task''s retry policy pinned:
  max_attempts, retry_base_ms, retry_cap_ms as configured now, SPEC §9.1)
  and run.queued events; at most one placement_classes row; nothing when the
  key names an existing run.
Locks: none beyond the foreign-key checks'' FOR KEY SHARE on the task and
  revision rows (and, with a key, the wait of ON CONFLICT on a concurrent
  insert of the same key); a concurrent publish may make a newer revision
  current, and these runs stay pinned to the one read here (either order is a
  valid history).
Idempotency: by (task, key) while the run is retained; none without a key.
Errors (COLUMN = the wire field): QL001 malformed task id (taskId), priority
  NULL or outside smallint (priority), count NULL or < 1 (count), both delay
  and not-before given (delayMs), malformed key or key with count <> 1 (key),
  task disabled or without a current revision (taskId); QL002 count > 10000
  (count); QL006 delay or not-before out of bounds (delayMs, notBeforeMs);
  QL004 unknown task (taskId).
Caller: ql_runtime (control plane), ql.producer_enqueue.';


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

COMMENT ON FUNCTION ql.expiring_counts(p_within_s bigint) IS 'ql.expiring_counts(p_within_s bigint) -> jsonb {credentials, certificates}

Purpose: what the ingress exports on /metrics (SPEC §16.3): how many worker
  credentials and control-plane-issued certificates expire within
  p_within_s (the counts of ql.expiring_identities, which the ingress''s role
  may not call: it reads no names). Each ingress process reads it once a
  minute on its certificate-revocation connection.
Inputs: p_within_s 1 .. 31536000.
Returns: {credentials, certificates}, each counted up to 10000.
Writes: nothing. Locks: none.
Errors: QL006 (COLUMN withinS) out of bounds.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.expiring_identities(p_within_s bigint, p_limit integer) IS 'ql.expiring_identities(p_within_s bigint DEFAULT 1209600, p_limit integer DEFAULT 100) -> jsonb

Purpose: the worker credentials and client certificates that expire soon
  (SPEC §16.3: `qinglong status`, the console and /metrics show those that
  expire within 14 days — the default window).
  * credentials: not revoked, expires_at in (now, now + window], and not
    already replaced (no live successor rotated from it: a rotated
    credential''s 24 h grace is no operator''s concern);
  * certificates the control plane issued (ql_private.worker_certificates):
    not revoked, not_after in (now, now + window], and not already renewed
    (no live certificate of the same worker issued after it: a renewal
    replaces the older one whatever its lifetime, so a certificate renewed
    with a short validity shows up itself).
  Both soonest first, through the partial expiry indexes of migrations 0028
  and 0029.
Inputs: p_within_s 1 .. 31536000 (a year; NULL = 14 d), p_limit 1 .. 1000
  (NULL = 100).
Returns: {withinS, credentials: [{credentialId, workerId, worker, expiresAtMs}],
  certificates: [{serial, workerId, worker, notAfterMs}], credentialsTotal,
  certificatesTotal (each counted up to 10000), truncated}. Never a digest.
Writes: nothing. Locks: none.
Errors: QL006 (COLUMN withinS / limit) out of bounds.
Caller: ql_readonly, ql_runtime, ql.expiring_counts, ql.status_snapshot.';


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

COMMENT ON FUNCTION ql.grant_pool(p_worker_id text, p_pool text) IS 'ql.grant_pool(p_worker_id text, p_pool text) -> jsonb {workerId, pool, granted}

Purpose: `admin worker grant --worker ID --pool P/N` and `admin worker create
  … --pool P/N` (SPEC §13.1): the worker may take the runs of pool P/N from now
  on. p_pool ''*'' grants every pool of every project, present and future
  (workers.all_pools; single-tenant and development use).
Inputs: p_worker_id (lowercase canonical UUID), p_pool (''P/N'' or ''*'').
Fences: the worker exists; the pool exists.
Writes: one worker_pool_grants row, or workers.all_pools for ''*'', and one
  `worker.pool_granted` event (events.worker_id; payload workerId, pool,
  actor = session_user); nothing when already granted (granted = false).
Locks: the worker row FOR NO KEY UPDATE (serializes with ql.revoke_pool).
Idempotency: granting a held grant changes nothing.
Errors: QL001 malformed worker id (COLUMN workerId) or pool (COLUMN pool);
  QL004 unknown worker (COLUMN workerId) or pool (COLUMN pool).
Caller: ql_runtime (control plane).';


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
    -- Pass 1 authenticates and decides on an unlocked read; pass 2 (only when the
    -- heartbeat applies) locks the lease and decides again on it
    -- (ql_private.lease_prelude).
    FOR v_pass IN 1 .. 2 LOOP
        v_state := ql_private.lease_prelude(
            p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
            v_offer_id, v_token_digest, p_lease_version, 'lease.heartbeat', 'heartbeat',
            CASE v_pass WHEN 2 THEN 'lease' END, v_lease);
        IF v_state.answer IS NOT NULL THEN
            RETURN v_state.answer;
        END IF;
        v_lease := v_state.lease;
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

COMMENT ON FUNCTION ql.heartbeat_lease(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) IS 'ql.heartbeat_lease(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                   p_generation, p_offer_id, p_token_digest,
                   p_lease_version) -> jsonb

Purpose: keep a STARTED lease alive (SPEC §5 /v1/leases/heartbeat, §7) and tell
  the worker whether its run was cancelled. One fenced transaction: offer id +
  token digest + worker/session/generation, then the lease version (both
  ql_private.lease_open). Extends expires_at to clock_timestamp() + the lease
  TTL pinned on the lease by its claim (run_leases.lease_ttl_seconds: a task
  configured since does not reach a live lease, SPEC §9.1), bumps lease_version, records heartbeat_at and
  heartbeat_version (= the new lease_version). Writes no event (heartbeats are
  not run facts).
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id, p_offer_id (lowercase canonical UUIDs), p_generation (>= 1),
  p_token_digest (SHA-256 of the lease token), p_lease_version (required,
  >= 1): the version the worker holds (the last lease@v1 it received):
  * equal to the current version: the heartbeat is applied;
  * current - 1 while the current version was produced by a heartbeat
    (heartbeat_version = lease_version): the retry of a heartbeat whose answer
    was lost; answered {"status":"idempotent"} with the current projection
    (exactly what the lost answer carried) and NO write — deliberately not
    extended again, so a retry loop can never keep a lease alive on its own;
  * anything else: {"status":"conflict","category":"stale_lease_version"}.
Fences (ql_private.lease_prelude, which also answers replays and conflicts):
  the credential (ql_private.authenticate, action `lease.heartbeat`),
  then ql_private.lease_open (offer, worker, token digest, session/generation,
  live lease, attempt, revision), then the lease version.
Expiry: a started lease whose expires_at <= clock_timestamp() is never extended
  (conflict `lease_expired`): from that instant the sweeper owns it. Both sides
  decide on the same locked row (the heartbeat''s lease lock vs the sweeper''s
  FOR UPDATE SKIP LOCKED with re-check), so no lease is ever both extended and
  lost.
Returns {"status":"ok","lease":<lease@v1 + cancelRequested>} | idempotent |
  {"status":"conflict","category":…} (lease_verdict categories, plus
  stale_lease_version) | the denial envelope.
Writes: the lease row only (expires_at, lease_version, heartbeat_at,
  heartbeat_version); nothing for a replay or a conflict; one security_audit
  row when denied.
Locks: only the lease row (ql_private.lease_prelude / lease_open `lease`: FOR NO KEY UPDATE,
  then the UPDATE), after an unlocked first read that answers conflicts and
  replays without any lock. The attempt and run are only read: every change of
  a started lease''s attempt (completion, start failure, loss) also releases the
  lease under its lock.
Idempotency: see p_lease_version.
Errors: QL001 malformed ids/digest, generation NULL or < 1, lease_version
  NULL or < 1; QL020 the lease is not started (heartbeat before the starting ACK).
Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
  so a plan a pooled connection made while the lease tables were small (a
  sequential scan of run_leases) does not stay with it as they grow.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.heartbeat_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint) IS 'ql.heartbeat_session(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                     p_generation) -> jsonb

Purpose: keep a session alive (SPEC §5 /v1/sessions/heartbeat). Authenticates
  (action `session.heartbeat`), then extends expires_at to clock_timestamp() +
  session TTL and sets heartbeat_at, only while the session fence holds —
  or while the session is draining (ql.end_session / ql.disable_worker with
  drain): a draining session takes no new offer but lives on while its
  started leases run, so its worker keeps it alive the same way (for a
  disabled worker, ql_private.authenticate allows this call only while it has
  a draining session). The answer then carries `"draining": true` in the
  envelope (not in the session projection): the ingress must not remember a
  draining session in its idle view as one that may pull.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id (lowercase canonical UUIDs), p_generation (>= 1).
Fences: the credential (ql_private.authenticate); the session fence (owned,
  exact generation, active, unexpired) as the UPDATE''s own condition, and
  ql_private.session_fence to name the failing one.
Returns {"status":"ok","session":{...session@v1 projection}} (plus
  "draining": true for a draining session) or the denial envelope.
Writes: the session row (expires_at, heartbeat_at); one security_audit row
  when denied.
Locks: the session row FOR NO KEY UPDATE, through the UPDATE itself. An idle
  pull takes no session lock, so heartbeats and idle pulls never wait for each
  other; a claiming pull (session_fence lock=true) holds the same mode for its
  short transaction. A concurrent open/close (FOR UPDATE) makes the UPDATE
  wait, re-check the row''s newest version and, finding it closed, fall through
  to the fence, which raises.
Idempotency: repeating it only moves expires_at forward.
Errors: QL001 malformed ids, generation NULL or < 1; QL010 no such session
  for this worker; QL011 generation differs or session replaced; QL013
  closed; QL012 expired, active or draining (an expired session is not
  revived: re-open).
Caller: ql_worker_ingress, ql.heartbeat_sessions (one call per batch item).';


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

COMMENT ON FUNCTION ql.heartbeat_sessions(p_items jsonb) IS 'ql.heartbeat_sessions(p_items jsonb) -> jsonb

Purpose: many session heartbeats (SPEC §5 /v1/sessions/heartbeat) in one
  database call: an ingress replica batches the heartbeats that arrive within
  a few milliseconds (10,000 workers heartbeating every 20 s would
  otherwise be 500 calls/s). Each item runs ql.heartbeat_session itself
  (authenticate, fence, extend: the same logic, not a copy) in its own
  subtransaction, so one item''s error rolls back that item only. Returns a
  JSON array in item order: each element is exactly what ql.heartbeat_session
  returned for that item ({"status":"ok","session":{...}} or the denial
  envelope), or {"status":"error","sqlstate":...} for what it raised
  (QL001/QL010-QL013 or anything else), which the ingress maps exactly as for
  the single call.
Inputs: p_items, a JSON array of 1..64 {"credentialId", "secretDigest": <64
  hex>, "workerId", "sessionId", "generation"}. At most 64 items: one
  subtransaction id each stays within PostgreSQL''s per-backend subxid cache, so
  other backends'' snapshots never overflow to pg_subtrans.
Fences: per item, those of ql.heartbeat_session.
Writes: per item, those of ql.heartbeat_session.
Locks: each item''s session row (UPDATE), as ql.heartbeat_session. Items are
  processed in session id order (a deterministic lock order between concurrent
  batches, so two batches cannot deadlock); the answer keeps the input order.
Idempotency: as ql.heartbeat_session (expires_at only moves forward).
Errors: QL001 p_items not a non-empty array of objects; QL002 more than 64
  items. Per-item errors are answered, not raised.
Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
  so a plan a pooled connection made while the lease tables were small (a
  sequential scan of run_leases) does not stay with it as they grow.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.idle_probe() IS 'ql.idle_probe() -> jsonb

Purpose: the database answer an ingress replica forms its idle view from
  (service/idle_view.py). In ONE statement (one snapshot):
    * the head of the candidate keyset (runs_candidate_keyset, at most 65
      ready queued runs in key order, each probed for its current attempt by
      primary key): is any of them dispatchable now (attempt claimed,
      remote_worker, not_before passed), and the earliest future not_before
      among them (the time-based wake-up: no NOTIFY marks a backoff ending);
    * the scheduled runs (runs_due, SPEC §9.2: delayed enqueues and retries in
      backoff): one index probe for a run already due (a candidate until the
      sweeper promotes it), one for the earliest future due_at — the wake-up
      the idle view sleeps until, however many runs are scheduled;
    * whether any live unstarted lease exists (run_leases_unstarted_expiry):
      a worker whose pull response was lost replays its offer id and must get
      that offer back (SPEC 3.3 recover-first), and expired unstarted offers
      are candidates too, so while one exists no pull may be answered idle
      without the database.
  Returns {"idle": bool, "reason": null|"candidate"|"unstarted_lease"|
  "truncated", "nowMs": db clock, "wakeAtMs": earliest future not_before of
  the head or due_at of a scheduled run, or null}. idle=true iff no queued run
  of the head is dispatchable, no scheduled run is due, the head is
  not truncated (more than 64 queued runs: too many to prove idle in bounded
  time, so the answer is "not idle" and pulls go to the database), and no live
  unstarted lease exists.
Inputs: none.
Fences: none (it answers for every worker of the replica at once).
Cost: bounded (<= 65 index entries + 65 primary-key probes + three partial
  index probes), independent of queue depth, scheduled runs and history.
Writes: none (read-only: zero WAL).
Locks: none.
Idempotency: read-only.
Errors: none.
Caller: ql_worker_ingress (the replica''s idle view, a few calls a second per
  replica).';


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

COMMENT ON FUNCTION ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea, p_ttl_s bigint) IS 'ql.issue_credential(p_worker_id text, p_credential_id text, p_secret_digest bytea,
                    p_ttl_s bigint DEFAULT NULL) -> jsonb

Purpose: attach a bearer credential to a worker (SPEC §5, §8). The caller
  generates the id and the secret and sends only SHA-256 of the secret''s 43
  ASCII bytes; the secret never reaches the database.
Inputs: p_worker_id (lowercase canonical UUID), p_credential_id
  (^[a-z0-9]{16}$), p_secret_digest (32 bytes), p_ttl_s (the lifetime,
  10 s .. 3650 d, SPEC §16.2 `--credential-ttl`; NULL = never expires).
Fences: the worker exists; the credential id is new.
Returns {credentialId, workerId, expiresAtMs (null: never)}.
Writes: one worker_credentials row.
Locks: the worker row FOR KEY SHARE (via the existence check), so the worker
  cannot vanish underneath.
Idempotency: none; re-issuing an existing id is refused (QL001), never a
  silent overwrite of its digest.
Errors: QL001 malformed worker id / credential id not ^[a-z0-9]{16}$ /
  digest not 32 bytes / credential id already exists; QL006 (COLUMN
  credentialTtlS) p_ttl_s outside 10 .. 315360000; QL004 unknown worker.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.label_worker(p_worker_id text, p_labels jsonb, p_remove text[], p_self_labels boolean) IS 'ql.label_worker(p_worker_id text, p_labels jsonb DEFAULT ''{}'',
                p_remove text[] DEFAULT ''{}'', p_self_labels boolean DEFAULT NULL)
  -> jsonb {workerId, labels, selfLabels, sessionsDraining, leasesReleased}

Purpose: record the labels an operator vouches for (SPEC §13.2, `admin worker
  create|label --label k=v`, `--remove k`, `--self-labels`). ql.open_session
  accepts a session''s declared labels only when each is granted here (same
  key, same value, byte for byte), unless the worker has self_labels.
  p_labels grants (or re-grants with a new value) each key -> value; p_remove
  takes the named grants away (a key not granted is ignored); p_self_labels
  true/false switches self-labels on/off, NULL leaves it as it is.
  A change takes effect at the next session open, and also at once for the
  worker''s ACTIVE sessions: when self_labels is off after the change, each
  active session whose declared labels are no longer all granted drains
  (ql_private.drain_session, as `admin session close --drain`: no new offer,
  unstarted leases released `session_closed` and re-queued at once, started
  runs may finish; the session closes with its last lease). Its worker then
  has to open a new session, which is checked against the grants.
  One `worker.labels_changed` event (events.worker_id; payload workerId,
  granted and removed keys (no values), selfLabels, sessionsDraining,
  leasesReleased, actor = session_user) when anything changed.
Inputs: p_worker_id (lowercase canonical UUID); p_labels a JSON object (NULL =
  {}) of keys ^[a-z0-9][a-z0-9._/-]{0,62}$ to string values of 1..128
  characters without control or invisible characters (the capabilities''
  label rules, SPEC §4.4); p_remove keys (NULL = none); a key may not be both
  granted and removed; at most 32 labels granted to a worker after the call.
Fences: the worker exists.
Writes: worker_labels rows (deleted, inserted, updated), the worker row
  (self_labels), drained sessions and their released leases, one event.
  NOTIFY ''s:<workerId>'' at commit by the session trigger when one drains.
Locks: the worker row FOR NO KEY UPDATE (which serializes with ql.open_session
  of the worker: an open sees the grants before or after the change, never a
  part of it), then each active session FOR UPDATE (waits for a claim holding
  the session''s fence lock), then drain_session''s locks.
Idempotency: repeating a call changes nothing, writes no event and answers the
  same labels and selfLabels (sessionsDraining 0, leasesReleased 0).
Errors (nothing changed): QL001 malformed worker id (COLUMN workerId), labels
  not an object / bad key / value not a string, empty or with a control
  character (COLUMN labels), bad key in p_remove or a key both granted and
  removed (COLUMN remove); QL002 a value over 128 characters, more than 32
  labels (COLUMN labels); QL004 unknown worker (COLUMN workerId).
Caller: ql_runtime (control plane).';


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
    -- `read` (ql_private.lease_prelude): the version must be the current one; a
    -- heartbeat's retry is no delivery either (stale_lease_version).
    v_state := ql_private.lease_prelude(
        p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
        v_offer_id, v_token_digest, p_lease_version, 'lease.secrets', 'read');
    IF v_state.answer IS NOT NULL THEN
        RETURN v_state.answer;
    END IF;
    v_lease := v_state.lease;
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

COMMENT ON FUNCTION ql.lease_secrets(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_lease_version bigint) IS 'ql.lease_secrets(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                 p_generation, p_offer_id, p_token_digest, p_lease_version) -> jsonb

Purpose: the secrets of a STARTED lease (SPEC §14.3, /v1/leases/secrets): after
  its `starting` ACK the executor asks for the secrets its run''s revision
  names (spec.secrets {ENV_NAME: secret-name}); the answer carries the
  project''s WRAPPED data key and each secret''s ciphertext, never a value: the
  ingress unwraps and decrypts them in memory with its key-encryption key
  (service/secrets_crypto.py), which the database never sees.
Inputs: as ql.heartbeat_lease: p_credential_id, p_secret_digest (SHA-256 of
  the secret), p_worker_id, p_session_id, p_offer_id (lowercase canonical
  UUIDs), p_generation (>= 1), p_token_digest (SHA-256 of the lease token),
  p_lease_version (>= 1, the version the worker holds: exactly the current
  one; the call does not change it).
Fences, in order, on one snapshot (no row lock: the call changes no lease):
  ql_private.lease_prelude (change `read`): the credential
  (ql_private.authenticate, action `lease.secrets`);
  ql_private.lease_open (offer, worker, constant-time token digest,
  session/generation and the session live, lease live and unexpired,
  attempt, revision: the lease_verdict categories), then the lease version
  (any other version, a heartbeat''s retry included: stale_lease_version);
  then the lease is started (else `not_started`), its worker still holds a
  grant of the run''s pool (all_pools or a worker_pool_grants row; else
  `pool_revoked`), and every named secret exists (else `secret_missing`).
Returns {"status":"ok", "runId", "projectId", "dataKey": {keyId, kekId,
  nonce, wrappedKey} | null (no secret named), "secrets": [{env, name,
  version, keyId, nonce, ciphertext}] (env order)} — bytes as lowercase hex;
  | {"status":"conflict","category":…} | the denial envelope.
Writes: one security_audit row per delivery (action lease.secrets, outcome
  allowed, reason secrets_delivered, detail {runId, offerId, names: the
  secret names, each once, in C order}: names only, never a value or ciphertext); nothing
  for a conflict; one security_audit row when denied. Never the lease: its
  version, expiry and heartbeat stay as they were.
Locks: none (plain reads; the audit row is an insert).
Idempotency: every delivery is its own audited fact; the answer is the same
  while nothing changes.
Errors: QL001 malformed ids/digest, generation or lease version NULL or < 1.
Planning: as ql.heartbeat_lease (generic plans, no sequential scans, no JIT).
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.list_data_keys() IS 'ql.list_data_keys() -> jsonb {keys: [{projectId, keyId, kekId, nonce, wrappedKey}]}

Purpose: what `admin secret rotate-kek` re-wraps (SPEC §14.1): every
  project''s wrapped data key (bytes as lowercase hex), in key id order. Only
  wrapped keys: without the key-encryption key file they reveal nothing.
Inputs: none. Fences: none. Writes: none (STABLE). Locks: none.
Errors: none.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.list_project_tokens(p_project text) IS 'ql.list_project_tokens(p_project text DEFAULT NULL) -> jsonb {tokens: [...]}

Purpose: `admin token list [--project P]` (SPEC §13.4): {tokens: [{tokenId,
  project, scopes, state, createdAtMs, createdBy, expiresAtMs, revokedAtMs}]},
  newest first, at most 1000. state: active | expired | revoked (revoked
  wins). Never the digest (nor, since it is never stored, the token).
Inputs: p_project (NULL = every project; else a project name: an unknown one
  lists nothing).
Fences: none. Writes: none (STABLE). Locks: none.
Errors: QL001 malformed project (COLUMN project).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.list_runs(p_task_id text, p_states text[], p_limit integer, p_after text) IS 'ql.list_runs(p_task_id text DEFAULT NULL, p_states text[] DEFAULT NULL,
             p_limit integer DEFAULT 100, p_after text DEFAULT NULL) -> jsonb

Purpose: one keyset page of runs, newest first (queue_seq DESC), for `admin
  run list` and the console (SPEC §9.4): {runs: [{runId, taskId, state,
  priority, queuedAtMs, notBeforeMs, attempts, updatedAtMs}], next}.
  `attempts` = the current attempt''s number; `notBeforeMs` = the run''s due
  time when scheduled, else its current attempt''s not_before (null without
  one); `next` = an opaque cursor (the last row''s queue_seq as decimal text)
  to pass as p_after for the next page, null at the end.
Cost: index-driven for every filter combination and bounded by the page,
  whatever is stored: one backward range scan per state — of runs_state_seq
  (state, queue_seq) without a task, runs_task_state_seq (task_id, state,
  queue_seq) with one — each stopping after p_limit + 1 rows, merged and cut
  to p_limit + 1 (PostgreSQL cannot scan `state = ANY (...)` in key order, so
  the states are a LATERAL loop, at most seven descents); then one
  primary-key probe per listed run, its current attempt, task, project and
  pool. No count of anything, no OFFSET.
Inputs: p_task_id (NULL = all tasks, else a lowercase canonical UUID),
  p_states (NULL or empty = all; each one of queued, dispatching, starting,
  running, succeeded, failed, cancelled; duplicates ignored), p_limit
  1..1000, p_after (NULL = from the newest, else a cursor of a previous page).
Fences: none (an operator''s read). An unknown task id lists nothing.
Writes: none (STABLE: one snapshot, no write possible). Locks: none.
Idempotency: read-only.
Errors: QL001 malformed task id (COLUMN taskId), unknown state (COLUMN
  state), malformed cursor (COLUMN after); QL006 limit out of 1..1000 (COLUMN
  limit).
Caller: ql_readonly, ql_runtime, ql.producer_list_runs.';


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

COMMENT ON FUNCTION ql.list_secrets(p_project text) IS 'ql.list_secrets(p_project text) -> jsonb {project, secrets: [...]}

Purpose: `admin secret list --project P` (SPEC §14.1): the secrets of a
  project by name: {project, secrets: [{name, version, createdAtMs,
  updatedAtMs}]}, in name order (C collation). Never a value, a ciphertext
  or a key.
Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$; an unknown project
  lists nothing).
Fences: none. Writes: none (STABLE). Locks: none.
Errors: QL001 malformed project (COLUMN project).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.list_workers(p_limit integer, p_after text) IS 'ql.list_workers(p_limit integer DEFAULT 1000, p_after text DEFAULT NULL) -> jsonb

Purpose: the workers and their sessions, for `admin worker list` and the
  console (SPEC §9.4): {workers: [{workerId, name, disabled, allPools,
  pools: ["P/N", ...], poolsCapped, selfLabels,
  grantedLabels: {key: value} (SPEC §13.2, ql.label_worker), credentials:
  [{credentialId, state: "active"|"revoked"|"expired" (SPEC §16.2)}],
  session: {sessionId,
  generation, state, labels, slots, liveLeases, lastSeenAtMs} | null}], next}.
  Workers in id order, one keyset page; `next` = the last listed worker id
  (pass it as p_after), null at the end. `session` is the worker''s open
  session: the active one (at most one, worker_sessions_one_active), else a
  draining one (an operator drain, SPEC §9.5: `state` says which, and
  liveLeases what it still runs; worker_sessions_draining); labels come from its
  capabilities; liveLeases = its unreleased leases (started or not, expired
  or not: what the sweeper has not released yet); lastSeenAtMs = its last
  heartbeat (the open time before the first one). Credentials: the newest
  100 of the worker, oldest first, id and state only. Pools (SPEC §13.1):
  allPools = the `--pool ''*''` grant (every pool, present and future); pools
  = its explicit grants as `P/N`, sorted, at most 100 (the first 100 by pool
  id; poolsCapped when it holds more). Never a secret, a
  secret digest or a token digest.
Cost: one primary-key range of workers (<= p_limit + 1), then per worker one
  credentials range (worker_credentials_worker), one pool-grants range
  (worker_pool_grants primary key, <= 101 rows, each with its pool and
  project by primary key), one granted-labels range
  (worker_labels primary key, <= 32 rows), one open-session probe and
  one live-lease count (run_leases_session_live_counted, index-only).
Inputs: p_limit 1..1000 (default 1000), p_after (NULL or a worker id).
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL001 malformed cursor (COLUMN after); QL006 limit out of 1..1000
  (COLUMN limit).
Caller: ql_readonly, ql_runtime.';


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

COMMENT ON FUNCTION ql.live_sessions(p_limit integer, p_worker_ids text[]) IS 'ql.live_sessions(p_limit integer DEFAULT 200, p_worker_ids text[] DEFAULT NULL) -> jsonb

Purpose: the open (active or draining) worker sessions with what the console''s workers page and
  waiting panel show (SPEC §10): {sessions: [{workerId, worker, disabled,
  sessionId, generation, executors, labels, runtimes, slots, slotsUsed,
  slotsFree, lastSeenAtMs, expiresAtMs, expired, draining}], truncated}. Sessions by
  worker name (then session id), at most p_limit; `truncated` when more are
  active. With p_worker_ids, only the sessions of those workers (the console''s
  workers page asks for the workers it lists, one page at a time). slotsUsed counts the session''s live leases that hold a slot: started,
  or offered and not yet expired (the rule status_snapshot uses). lastSeenAtMs
  is the last heartbeat (the open time before the first one); `expired` = past
  expires_at and not yet closed by the sweeper. Capabilities are the worker''s
  own declaration (labels, runtimes, executors): never a secret, a digest or a
  token. `draining` marks a session that takes no new runs but still holds
  leases (its runs finish there): hiding it would hide where those run.
Cost: the active and draining sessions (worker_sessions_one_active and
  worker_sessions_draining, migration 0011; one probe each per listed worker
  id when given), each with its worker by
  primary key and one index-only count of run_leases_session_live_counted;
  sorted and cut to p_limit.
Inputs: p_limit 1..1000 (default 200); p_worker_ids NULL (all workers) or at
  most 1000 lowercase canonical UUIDs.
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL006 limit out of 1..1000 (COLUMN limit), more than 1000 worker ids
  (COLUMN workerIds); QL001 malformed worker id (COLUMN workerIds).
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql.open_session(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_capabilities_canonical bytea) IS 'ql.open_session(p_credential_id, p_secret_digest, p_worker_id,
                p_capabilities_canonical) -> jsonb

Purpose: admit a worker (SPEC §5 /v1/sessions). Authenticates (action
  `session.open`), validates the canonical capabilities bytes (<= 16 KiB UTF-8
  JSON object, no duplicate keys, then ql_private.validate_capabilities),
  stores them with their exact SHA-256 (`sha256:<hex>`, computed here), and
  opens a NEW session row with generation = previous max + 1 for the worker.
  A session still open for the worker (active or draining) is replaced: it is
  closed, and its unstarted live leases are released with reason
  `session_replaced`, so their pending offers answer 409 session_replaced.
  Started leases stay live: the run is really executing and its own lease
  lifecycle (heartbeat/expiry) decides its fate.
  Granted labels (SPEC §13.2): unless the worker has self_labels, every
  declared label must be granted to it (ql_private.worker_labels, ql.label_worker)
  with the same key and the same value, byte for byte; else QL016
  label_not_granted (403) naming the first such key (in C order) in the
  error''s DETAIL, and nothing is written (no session opened, none replaced).
  Executors, runtimes and slots stay self-declared.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id
  (lowercase canonical UUID), p_capabilities_canonical (the RFC 8785 bytes of
  qinglong/worker-capabilities@v1).
Fences: the credential (ql_private.authenticate); the capabilities document;
  the worker''s granted labels (read under the worker row lock, which
  ql.label_worker also takes: an open sees a label change whole or not at all).
Returns {"status":"ok","session":{workerId, sessionId, generation, expiresAtMs,
  capabilitiesDigest, heartbeatIntervalMs}} or the denial envelope.
Writes: the new session row; the replaced sessions (closed) and their released
  unstarted leases; one security_audit row when denied.
Locks: the worker row FOR NO KEY UPDATE, which serializes concurrent opens of
  one worker (so max(generation)+1 and the one-active index never race) but,
  unlike FOR UPDATE, does not block the FOR KEY SHARE that foreign-key checks
  of lease inserts take on the worker row. Then the open session rows FOR
  UPDATE, which waits for in-flight claims holding the session fence lock
  (ql_private.session_fence(..., true) = FOR NO KEY UPDATE), so the lease release
  below sees their leases; claims arriving later re-check and see it closed.
  The release takes attempt -> run -> lease per lease (the lifecycle order).
Idempotency: none; every successful call opens a new generation (the worker
  re-opens only when it has lost its session).
Errors: QL001 malformed workerId / bytes not a UTF-8 JSON object / invalid
  capabilities; QL002 bytes over 16 KiB or oversize sets; QL003 invalid SemVer
  (from ql_private.validate_capabilities); QL016 a declared label not granted
  (DETAIL = its key, a validated label key).
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.prepare_task(p_project text, p_task text) IS 'ql.prepare_task(p_project text, p_task text) -> jsonb {taskId, created}

Purpose: the id of task P/T, creating the project and the task (in the
  project''s default pool, without a revision) when missing (SPEC §16.1). A
  signed publish signs {taskId, kind, executor, spec, placement?}, so it
  needs the task''s id before ql.publish_revision creates the revision; the
  admin CLI calls this and then ql.publish_revision in ONE transaction, so a
  task without a revision is never visible on its own (were one left behind,
  an enqueue refuses it: QL001, no published revision).
Inputs: p_project, p_task (names ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$).
Fences: the name patterns.
Writes: the project (and its default pool, by trigger) and the task rows when
  missing; nothing for an existing task.
Locks: none beyond the inserts (ON CONFLICT DO NOTHING, then a re-read: a
  concurrent creator wins and this call answers its row).
Idempotency: an existing task -> its id, created=false, no writes.
Errors: QL001 bad project/task name.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'ql.producer_cancel_run(p_token_id text, p_token_digest bytea, p_run_id text) -> jsonb

Purpose: `POST /v1/runs/{id}/cancel` of the producer API (SPEC §13.4): exactly
  ql.cancel_run on a run of the token''s project (another project''s run is
  not_found, like an unknown one), answering the §9.4 show document
  (ql.show_run) as it is after the action.
Inputs: the token id and digest; p_run_id (lowercase canonical UUID).
Fences: token valid, unrevoked, unexpired, scope cancel; run in the token''s
  project; then those of ql.cancel_run.
Writes: as ql.cancel_run (its event names the acting login, session_user);
  nothing on any error.
Locks: as ql.cancel_run.
Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
  QL004 unknown or foreign run (COLUMN runId); then ql.cancel_run''s.
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text, p_priority integer, p_count integer, p_not_before_ms bigint, p_delay_ms bigint, p_key text) IS 'ql.producer_enqueue(p_token_id text, p_token_digest bytea, p_task text,
                    p_priority integer DEFAULT 0, p_count integer DEFAULT 1,
                    p_not_before_ms bigint DEFAULT NULL, p_delay_ms bigint DEFAULT NULL,
                    p_key text DEFAULT NULL) -> jsonb {runIds, existing}

Purpose: `POST /v1/runs` of the producer API (SPEC §13.4): queue runs of a
  task of the token''s project. The token must hold the scope `enqueue`
  (ql_private.producer_token); the task, an id or "<project>/<name>", must be
  the token''s project''s (ql_private.producer_task: another project''s task is
  not_found). Then exactly ql.enqueue_runs (scheduling, idempotency key,
  bounds, disabled/unpublished refusals, pools, events).
Inputs: the token id and the SHA-256 digest of the whole token string;
  p_task; the rest as ql.enqueue_runs.
Fences: token valid, unrevoked, unexpired, scope enqueue; task in the token''s
  project; then those of ql.enqueue_runs.
Writes: as ql.enqueue_runs (its run.queued events); nothing on any error.
Locks: as ql.enqueue_runs.
Idempotency: by key, as ql.enqueue_runs.
Errors: QL030 token_invalid, QL031 scope_missing; QL001/QL004 task (COLUMN
  task); then ql.enqueue_runs'' errors (QL001/QL002/QL006, COLUMN = the wire
  field: taskId there is `task` on this API).
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text, p_states text[], p_limit integer, p_after text) IS 'ql.producer_list_runs(p_token_id text, p_token_digest bytea, p_task text,
                      p_states text[] DEFAULT NULL, p_limit integer DEFAULT 100,
                      p_after text DEFAULT NULL) -> jsonb {runs, next}

Purpose: `GET /v1/runs?task=&state=&after=&limit=` of the producer API (SPEC
  §13.4): the §9.4 list document of ql.list_runs for one task of the token''s
  project (an id or "<project>/<name>"; another project''s task is not_found),
  or, without a task (p_task NULL), for every task of the token''s project
  (ql_private.project_runs_page: the same fields and pages over the index
  runs_project_state_seq, never another project''s run).
Inputs: the token id and digest; p_task (NULL = the whole project); p_states,
  p_limit, p_after as ql.list_runs.
Fences: token valid, unrevoked, unexpired, scope read; task (when given) or
  every run listed in the token''s project.
Writes: none. Locks: none.
Errors: QL030 token_invalid, QL031 scope_missing; QL001 task malformed, QL004
  unknown or foreign task (COLUMN task); then ql.list_runs'' (QL001
  state/after, QL006 limit).
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'ql.producer_retry_run(p_token_id text, p_token_digest bytea, p_run_id text) -> jsonb

Purpose: `POST /v1/runs/{id}/retry` of the producer API (SPEC §13.4): exactly
  ql.retry_run on a run of the token''s project (another project''s run is
  not_found, like an unknown one), answering the §9.4 show document
  (ql.show_run) as it is after the action.
Inputs: the token id and digest; p_run_id (lowercase canonical UUID).
Fences: token valid, unrevoked, unexpired, scope retry; run in the token''s
  project; then those of ql.retry_run.
Writes: as ql.retry_run (its event names the acting login, session_user);
  nothing on any error.
Locks: as ql.retry_run.
Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
  QL004 unknown or foreign run (COLUMN runId); then ql.retry_run''s.
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text, p_attempt_no integer, p_offset bigint, p_max_bytes integer) IS 'ql.producer_run_log(p_token_id text, p_token_digest bytea, p_run_id text,
                    p_attempt_no integer DEFAULT NULL, p_offset bigint DEFAULT 0,
                    p_max_bytes integer DEFAULT 1048576) -> jsonb

Purpose: `GET /v1/runs/{id}/log?offset=N[&attempt=N]` of the producer API
  (SPEC §13.4, §15.3): ql.run_log''s document {runId, attemptNumber, offset,
  text, storedBytes, logBytes, truncated, complete, ended} for a run of the
  token''s project only (another project''s run is not_found, like an unknown
  one). Following (`follow=1`) is the API calling this again from the next
  offset: every call checks the token anew, so a revoked token stops a follow.
Inputs: the token id and digest; p_run_id (lowercase canonical UUID);
  p_attempt_no (NULL = the run''s latest attempt), p_offset, p_max_bytes as
  ql.run_log.
Fences: token valid, unrevoked, unexpired, scope log; run in the token''s
  project (ql_private.producer_run).
Writes: none. Locks: none.
Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
  QL004 unknown or foreign run (COLUMN runId); then ql.run_log''s (unknown
  attempt, offset or max bytes out of bounds).
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) IS 'ql.producer_show_run(p_token_id text, p_token_digest bytea, p_run_id text) -> jsonb

Purpose: `GET /v1/runs/{id}` of the producer API (SPEC §13.4): the §9.4 show
  document of ql.show_run, for a run of the token''s project only (another
  project''s run is not_found, like an unknown one).
Inputs: the token id and digest; p_run_id (lowercase canonical UUID).
Fences: token valid, unrevoked, unexpired, scope read; run in the token''s
  project (ql_private.producer_run).
Writes: none. Locks: none.
Errors: QL030 token_invalid, QL031 scope_missing, QL001 malformed run id,
  QL004 unknown or foreign run (COLUMN runId).
Caller: ql_producer.';


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

COMMENT ON FUNCTION ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea, p_wrapped_key bytea) IS 'ql.project_data_key(p_project text, p_key_id text, p_kek_id text, p_nonce bytea,
                    p_wrapped_key bytea) -> jsonb

Purpose: the data key of a project''s secrets (SPEC §14.1), installed on first
  use. `admin secret set` generates a fresh AES-256 data key, wraps it with
  its key-encryption key (KEK, a key file the database never sees; AES-256-GCM
  with associated data binding project id and key id: service/secrets_crypto.py)
  and offers it here: a project without a data key gets this one, a project
  with one keeps it (the offered one is discarded). Answers the stored key
  either way, so the caller encrypts under the key the project really has.
  The project is created when it does not exist yet (with its default pool,
  like ql.create_pool).
Inputs: p_project (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), p_key_id (32 lowercase
  hex), p_kek_id (^[a-z0-9][a-z0-9._-]{0,63}$), p_nonce (12 bytes),
  p_wrapped_key (48 bytes: 32 + the GCM tag).
Fences: one KEK at a time: while any data key is wrapped by another KEK than
  p_kek_id (after `admin secret rotate-kek`, the old key file), nothing is
  installed (QL041 kek_mismatch), so no two KEKs are ever needed at once.
Returns {project, projectId, keyId, kekId, nonce, wrappedKey, created}
  (bytes as lowercase hex).
Writes: the project row (and its default pool) on first use; one
  project_data_keys row when the project had none. Nothing else.
Locks: none beyond the primary key (INSERT ... ON CONFLICT DO NOTHING: of two
  concurrent first calls one key wins, both answer it).
Idempotency: a project''s key, once stored, is answered unchanged.
Errors: QL001 malformed input (COLUMN project|keyId|kekId|nonce|wrappedKey);
  QL041 kek_mismatch (another KEK wraps the stored keys).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.prune_audit(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'ql.prune_audit(p_retain_s bigint, p_batch integer DEFAULT 1000,
               p_dry_run boolean DEFAULT false) -> jsonb {securityAudit, more}

Purpose: retention of the authentication audit (SPEC §9.6), one batch per
  call: security_audit rows whose occurred_at is older than now - p_retain_s,
  oldest first (security_audit_time), are deleted. Callers loop, one
  transaction per batch, while `more` (`qinglong runtime sweep
  --retain-audit`, `admin prune`). With p_dry_run the batch is only counted.
  A call that deleted rows leaves one audit row of its own (SPEC §13.6):
  action `audit.pruned`, outcome allowed, reason retention, actor =
  session_user (the login that called: the sweeper''s, an operator''s), detail
  {securityAudit: rows deleted, retainS, cutoffMs, batch}. The newest
  audit.pruned row is never deleted, so the last prune stays on record even
  after a `--retain-audit 0s` (whoever deletes it must first leave a newer
  one); a call that deleted only older audit.pruned rows leaves none, so
  retention does not feed itself.
Inputs: p_retain_s 0..3153600000 seconds (0 = everything up to now),
  p_batch 1..10000 rows (default 1000), p_dry_run (default false).
Fences: each row picked on its locked row; the newest audit.pruned row
  (security_audit_pruned, one probe) is left out of the batch.
Writes: deletes of the batch''s audit rows and, when any other than
  audit.pruned rows went, one audit.pruned row; none in a dry run.
Locks: the batch''s rows FOR UPDATE SKIP LOCKED (concurrent pruners split the
  work; a denial being written is a new row nobody waits for).
Idempotency: deleted rows are gone; the next call takes the next batch.
Errors: QL006 p_retain_s out of bounds (COLUMN retainAudit), p_batch out of
  1..10000 (COLUMN batch); nothing changed on error.
Caller: ql_runtime (`admin prune`), ql_sweeper (`qinglong runtime sweep`).';


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

COMMENT ON FUNCTION ql.prune_fleet(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'ql.prune_fleet(p_retain_s bigint, p_batch integer DEFAULT 1000,
               p_dry_run boolean DEFAULT false) -> jsonb
  {sessions, placementClasses, fleetEvents, more}

Purpose: retention of what the fleet leaves behind (SPEC §9.6, beside
  ql.prune_runs and ql.prune_audit), one batch of each per call:
  * worker sessions that ended longer than p_retain_s ago — closed ones by
    closed_at (worker_sessions_closed, oldest first), and active or draining
    ones whose session lease lapsed before the cutoff (their worker never came
    back) — except a session with a live lease (never pruned; the delete
    guard of migration 0017 refuses it too) and each worker''s newest session
    (its generation is where the next one counts on from, max + 1). Released
    leases keep the pruned session''s id as history;
  * placement classes (migration 0006) nothing references: no queued run
    (ready or scheduled, ql_private.waiting_classes), no run in flight
    (dispatching, starting, running; runs_state_seq), and not the class of a
    task''s current revision (what the next enqueue uses). Unused classes go
    at once, whatever their age: ql_private.placement_class_of creates a class
    again on first use (an operator retry of a run whose class went included);
  * events without a run (`worker.*`, `session.*`) older than the cutoff
    (events_fleet, oldest first).
  Callers loop, one transaction per batch, while `more` (a batch was full).
  With p_dry_run the same batches are only counted: nothing deleted or locked.
Inputs: p_retain_s 0..3153600000 seconds (the run retention: `--retain-runs`),
  p_batch 1..10000 rows of each kind (default 1000), p_dry_run (default false).
Fences: a session is picked on its locked row (still ended, still old, no live
  lease, not its worker''s newest); a class is re-checked unreferenced under
  its lock, with a snapshot taken after the lock.
Writes: deletes of the batch''s sessions, classes and fleet events; none in a
  dry run.
Locks: sessions and classes FOR UPDATE SKIP LOCKED: a claim (which holds its
  session row) or an enqueue (which holds its class row FOR KEY SHARE,
  ql_private.placement_class_of) is skipped, never waited for; a lookup that
  comes after the lock waits for this batch, finds the class gone and creates
  it again. Fleet events FOR UPDATE SKIP LOCKED (concurrent pruners split them).
Idempotency: deleted rows are gone; the next call takes the next batch.
Errors: QL006 p_retain_s out of bounds (COLUMN retainRuns), p_batch out of
  1..10000 (COLUMN batch); nothing changed on error.
Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime (`admin prune`).';


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

COMMENT ON FUNCTION ql.prune_runs(p_retain_s bigint, p_batch integer, p_dry_run boolean) IS 'ql.prune_runs(p_retain_s bigint, p_batch integer DEFAULT 1000,
              p_dry_run boolean DEFAULT false) -> jsonb
  {runs, attempts, leases, events, more}

Purpose: retention of run history (SPEC §9.6), one batch per call: terminal
  runs (succeeded, failed, cancelled) whose finished_at is older than now -
  p_retain_s, oldest first, are deleted with their attempts, leases and
  events; an idempotency key goes with its run row (its task may reuse it
  afterwards). Live runs (queued, dispatching, starting, running) are never
  touched, nor terminal runs without finished_at. Callers loop, one
  transaction per batch, while `more` (the batch was full), so no
  transaction is long (`qinglong runtime sweep --retain-runs`, `admin
  prune`). With p_dry_run the same batch is only counted: nothing is deleted
  and nothing locked.
Cost: index-driven: runs_terminal_finished (finished_at) over terminal runs
  picks the batch; attempts by (run_id, attempt_no), leases by (attempt_id,
  lease_generation), events by events_run (run_id, id). One statement deletes
  all four sets (no foreign-key check needs a table scan: 0010).
Inputs: p_retain_s 0..3153600000 seconds (0 = everything terminal; the
  upper bound, 100 years, keeps the interval arithmetic in range), p_batch
  1..10000 runs (default 1000), p_dry_run (default false).
Fences: each run is picked on its locked row (still terminal, still old, no
  attempt of it left unlocked).
Writes: deletes of the batch''s runs, attempts, leases, events; none in a dry run.
Locks: in the one lifecycle order attempt -> run -> lease (docs/LIFECYCLE.md
  "Locks"): every attempt of the batch''s runs FOR UPDATE SKIP LOCKED, then
  the runs FOR UPDATE SKIP LOCKED — a run any of whose attempts another
  transaction holds (a retry, a cancel, a completion, each of which locks the
  attempt and then waits for the run) is left for a later batch — then the
  leases by the delete (a heartbeat holding one waits for nothing prune
  holds). So pruning never waits on a claim or any writer of attempts or
  runs, cannot close a deadlock with ql.retry_run / ql.cancel_run, and
  concurrent pruners split the work. `more`: the batch was full before the
  skips and something was pruned (rows held right now wait for the next
  pass instead of spinning the caller''s loop).
Idempotency: a deleted run is gone; the next call takes the next batch.
Errors: QL006 p_retain_s out of bounds (COLUMN retainRuns), p_batch out of
  1..10000 (COLUMN batch); nothing changed on error.
Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime (`admin prune`).';


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

COMMENT ON FUNCTION ql.publish_revision(p_project text, p_task text, p_canonical bytea, p_pool text, p_signature text) IS 'ql.publish_revision(p_project text, p_task text, p_canonical bytea,
                    p_pool text DEFAULT NULL, p_signature text DEFAULT NULL) -> jsonb
  {taskId, revisionId, revision, contentDigest, created, pool, signatureKid}

Purpose: publish the execution content of a task (SPEC §2, §8 `admin task
  publish`; DESIGN "Execution revision content"). `p_canonical` is the RFC 8785
  bytes of {executor, kind, placement?, spec} produced by the publish
  compiler; the database hashes the bytes itself (content_digest = ''sha256:''
  || hex sha256), checks their shape and stores bytes + digest, so a digest
  can never disagree with the stored content. The project and task are created
  on first publish. Identical content (same digest as the task''s CURRENT
  revision) returns that revision with created=false; anything else becomes
  revision max+1 and the task''s current revision.
Pool (SPEC §13.1): the task publishes into one pool of its project, and its
  runs carry it (ql.enqueue_runs). p_pool ''P/N'' names it (P must be
  p_project: another project''s pool is refused, as is a missing one) and
  moves an existing task there (runs already queued keep their pool); NULL
  keeps an existing task''s pool and puts a new task in ''P/default''. The
  answer''s `pool` is the task''s pool after the call.
Signature (SPEC §16.1): p_signature is the detached compact JWS
  `header..signature` (EdDSA) the publisher made over the RFC 8785 bytes of
  {taskId, kind, executor, spec, placement?}; it is stored with the revision
  (signature_jws, and signature_kid from its protected header) and never
  verified here: the database holds no trusted key, the worker verifies. A
  signed publish needs the task id before signing: the admin CLI calls
  ql.prepare_task first, in the same transaction. Dedupe: content identical
  to the current revision is that revision (created=false) when p_signature
  is NULL (an unsigned re-publish never strips a signature) or equal to the
  stored one; a signature the current revision does not carry (signing
  unsigned content, re-signing with a new key) makes a new revision, since a
  stored revision never changes. `signatureKid` answers the stored revision''s
  kid (null: unsigned).
Inputs: p_project, p_task (names ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$),
  p_canonical (<= 96 KiB), p_pool (''P/N'' or NULL), p_signature (JWS or NULL).
Fences (the shape; the compiler''s JSON Schema validation is not trusted):
  keys exactly kind, executor, spec and optional placement; kind =
  ''qinglong/command@v1''; executor = ''remote_worker''; spec an object with keys
  from {schema, argv, env, secrets, cwd, timeoutS}, schema = ''qinglong/command@v1'',
  argv a non-empty array of strings, env (if present) an object of strings,
  secrets (if present, SPEC §14.2) {ENV_NAME: secret-name} naming secrets the
  project has, no ENV_NAME also in env (ql_private.validate_secret_refs: the
  revision pins names, never values; QL001 COLUMN secrets naming the one at
  fault),
  cwd (if present) a string, timeoutS a positive integer, and no placement
  inside spec; placement via ql_private.validate_placement.
Writes: on new content one execution_revisions row and the task''s
  current_revision_id (the project, its default pool and the task rows on
  first publish); the task''s pool_id when p_pool moves it; nothing on
  identical content in the same pool.
Locks: none on the identical-content fast path (a plain read: re-publishing
  the same content writes nothing at all, not even a row lock). Otherwise the
  task row FOR NO KEY UPDATE, which serializes concurrent publishes of one task
  (revision numbers and current_revision_id never race) without blocking the
  foreign-key checks of concurrent enqueues.
Idempotency: identical content -> same revision, created=false, no writes.
Errors: QL001 bad project/task name, bytes not a UTF-8 JSON object, wrong
  shape, pool not P/N, of another project or missing (COLUMN pool), a
  signature that is not a detached compact JWS with the protected header
  exactly {alg: EdDSA, kid} (COLUMN signature); QL002 bytes over 96 KiB or oversize placement sets; QL003 invalid
  SemVer in placement.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.pull_offer(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_id text, p_token_digest bytea, p_bounds jsonb) IS 'ql.pull_offer(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
              p_offer_id, p_token_digest, p_bounds DEFAULT NULL) -> jsonb

Purpose: one pull = claim or recover, in one call and one round trip (SPEC §3.3,
  R-PULL). The ingress passes the authenticated worker (certificate identity,
  already matched with the body), the credential id and the SHA-256 of its
  secret, and the SHA-256 of the worker''s lease token; plaintext never reaches
  the database.
  0. validate arguments; authenticate the credential (a denial is recorded in
     security_audit and returned as {status: denied, httpStatus, reason}) —
     before any candidate is touched;
  1. recover first, under a transaction advisory lock on the offer id (so a
     retry racing its own still-running first request waits for it): an
     existing lease with this offer id is replayed ({status: idempotent,
     offer}) or refused ({status: conflict, category});
  2. session fences (exists, owned, exact generation, active, unexpired,
     capabilities digest intact) and a free slot (else idle capacity_full);
     the offer-id probe of step 1, the session row and its live-lease count
     are read by ONE statement after the advisory lock (the checks are made
     on its values; only a failing fence calls ql_private.session_fence, for
     its precise error);
  3–4. bounded keyset scan, placement, atomic claim -> {status: offered, offer}
     or {status: idle, reason, stats, truncated}.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id, p_offer_id (lowercase canonical UUIDs; the offer id is the
  worker''s idempotency key), p_generation (>= 1), p_token_digest (SHA-256 of
  the lease token, 32 bytes), p_bounds ({pages, candidates, claimAttempts},
  NULL = defaults; ql_private.pull_bounds).
Fences: the credential; an existing offer id''s replay fences
  (ql_private.recover_fence); the session fence (the read above, with
  ql_private.session_fence''s checks and errors, and,
  on the locked row before a claim, ql_private.session_claim_lock); every
  candidate fence re-checked on the locked rows (ql_private.claim_candidate).
Writes: only a claim (lease + run -> dispatching + one run.dispatched event) or
  a denial audit row. Idle pulls and replays write nothing (zero WAL).
Locks: advisory xact lock on the offer id; see ql_private.scan_and_claim
  (session row FOR NO KEY UPDATE before the first claim) and
  ql_private.claim_candidate (run + attempt FOR NO KEY UPDATE SKIP LOCKED).
Idempotency: by offer id + token digest.
Planning: every statement below runs with a generic plan (planned once per
  connection, not per call) and sequential scans disabled, so each plan is the
  index path whatever the statistics said when it was made (a plan cached on
  an empty queue would otherwise stick to the connection once it fills).
  JIT is off: with sequential scans disabled a tiny table''s plan costs 1e10,
  far above jit_above_cost, and compiling it took ~30 ms of a sub-ms pull.
Errors: QL001 malformed argument; QL002 bound above cap; QL010 unknown
  session; QL011 session replaced / wrong generation; QL012 session expired;
  QL013 session closed; QL015 session draining (an operator drain: no new
  offer); QL014 capabilities digest mismatch.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.pull_offers(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_session_id text, p_generation bigint, p_offer_ids text[], p_token_digests bytea[], p_bounds jsonb) IS 'ql.pull_offers(p_credential_id, p_secret_digest, p_worker_id, p_session_id, p_generation,
               p_offer_ids, p_token_digests, p_bounds DEFAULT NULL) -> jsonb

Purpose: a batched pull (SPEC §18.1, R-BATCH): up to 16 (offer id, lease token)
  pairs of one session in one call and one round trip, each claimed or
  recovered by exactly the rules of a single pull (SPEC §3.3, ql.pull_offer),
  with ONE credential check and ONE read of the session for the batch.
  0. validate arguments (1–16 pairs, distinct offer ids, 32-byte digests);
     authenticate the credential once (a denial is recorded and returned as
     {status: denied, httpStatus, reason}) — before anything else is read;
  1. every offer id''s transaction advisory lock (the one ql.pull_offer takes),
     in offer-id order so two batches sharing ids never deadlock; then ONE
     statement reads which ids already have a lease, the session row and its
     live-lease count;
  2. recover first: each existing id is replayed (its same offer, rebuilt
     from the durable lease) or refused with its category
     (ql_private.recover_offer, the single pull''s step 1);
  3. only if a new id is left: the session fences and capabilities digest
     (as ql.pull_offer: a failing fence calls ql_private.session_fence for
     its precise error, raised for the whole batch) and the free slots
     (slots - live leases; none -> idle capacity_full);
  4. the new ids in request order, at most as many as free slots: each one
     is a single pull''s steps 3–4 (ql_private.scan_and_claim — bounded keyset
     scan, placement, the session row locked and its slots re-counted on the
     locked row before every claim, SKIP LOCKED claim with every candidate
     fence re-checked); the first idle answer ends the batch (a later id
     would find the same queue).
  A retry of the same batch returns the same offer for every id that was
  claimed (step 2) and tries the ids that were not (step 4).
Returns {status: batch, offers: [offer@v1 projection …] (replays and claims,
  in the order of their offer ids in the request), conflicts: [{offerId, category} …], idle: NULL |
  {reason, stats, truncated}, recovered: how many of the offers are replays
  (the single pull''s `idempotent`)} — idle is set when some new id was not claimed.
Inputs: p_credential_id, p_secret_digest (SHA-256 of the secret), p_worker_id,
  p_session_id (lowercase canonical UUIDs), p_generation (>= 1), p_offer_ids
  (1–16 distinct canonical UUIDs), p_token_digests (SHA-256 of each lease
  token, indexed like p_offer_ids), p_bounds (per claim, as ql.pull_offer;
  ql_private.pull_bounds).
Fences: the credential; each existing offer id''s replay fences
  (ql_private.recover_fence); the session fence (read once; re-checked on
  the locked row before each claim, ql_private.session_claim_lock); every
  candidate fence on the locked rows (ql_private.claim_candidate).
Writes: only claims (per claim: lease + run -> dispatching + one
  run.dispatched event) or a denial audit row. An idle batch and a batch of
  replays write nothing (zero WAL).
Locks: advisory xact locks on the offer ids; the session row FOR NO KEY
  UPDATE before the first claim; run + attempt FOR NO KEY UPDATE SKIP LOCKED.
Idempotency: by offer id + token digest, per pair.
Planning: as ql.pull_offer (generic plans, no sequential scans, no JIT).
Errors: QL001 malformed argument (count, duplicate id, digest, generation);
  QL002 bound above cap; QL010–QL015 session fences (only when a new id is
  to be claimed); QL014 capabilities digest mismatch.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.queue_depth() IS 'ql.queue_depth() -> jsonb

Purpose: the console overview''s queue panel (SPEC §10): how deep the ready
  queue is per priority and which tasks hold the not-yet-started runs,
  ready runs apart from scheduled ones (SPEC §9.2: not due yet).
  {byPriority: [{priority, runs, capped, oldestWaitingAgeMs}],
  scheduled: {runs, capped, nextDueAtMs, byPriority: [{priority, runs}]},
  byTask: [{taskId, project, task, pool, queued, ready, readyCapped,
  scheduled, scheduledCapped, dispatching, capped}], tasksWithRuns, cap,
  tasksExamined, tasksCapped}.
  byPriority: the ready runs (queued, due, runtime-owned, not
  cancel-requested: runs_candidate_keyset) of each priority, highest first,
  at most 16 priorities, each counted up to `cap` (1000), with the age of
  its oldest (first in dispatch order). The age counts from
  greatest(created_at, current attempt''s not_before), one primary-key
  probe: a retry or a promoted scheduled run waits from when it became ready.
  scheduled: the runs scheduled for later (queued, runtime-owned, not
  cancel-requested, due_at set: runs_due, not yet promoted by the sweeper),
  counted up to `cap`, the soonest due time, and the priorities of the
  `cap` + 1 due soonest (when `capped`, each priority''s count is a lower
  bound: the runs of that priority among the soonest).
  byTask: `ready` (queued, due_at NULL) and `scheduled` (queued, due_at set)
  are a task''s queued runs split, each counted up to `cap` (xCapped when it
  has more); `pool` the task''s pool as P/N.
  byTask: per task its queued and dispatching runs, each counted up to
  `cap`, the 20 deepest listed (tasksWithRuns = how many tasks have any).
  Only the first 1000 tasks by id are examined (tasksExamined; tasksCapped
  when there are more, and the page says so): the per-task probes must not
  grow with the number of tasks.
  The page needs orders of magnitude, not exact totals past a thousand: caps
  keep a page ≤ 100 ms with 1,000,000 runs stored (ql.status_snapshot counts
  to 100,000 and costs hundreds of milliseconds on such a queue; `qinglong
  status` is where the larger counts are).
Cost: a loose index scan of runs_candidate_keyset (one descent per distinct
  priority, <= 16), each priority''s range read up to cap + 1 entries; per
  task two ranges of runs_task_state_seq (task_id, state, queue_seq) and two
  of runs_task_queued_due (task_id, due_at) (ready: due_at NULL; scheduled:
  due_at set) of at most cap + 1 entries each, and its pool and project by
  primary key, for at most 1000 tasks; one range of runs_due of at most cap
  + 1 entries (each with its priority): bounded by 16 x cap + cap +
  min(tasks, 1000) probes and the queued/dispatching runs they hold.
Inputs: none.
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: none.
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql.recent_denials(p_limit integer) IS 'ql.recent_denials(p_limit integer DEFAULT 20) -> jsonb

Purpose: the console overview''s latest authentication denials (SPEC §10):
  {denials: [{atMs, action, reason, workerId, credentialId}], windowS,
  scanned, capped}, newest first, at most p_limit, of the last 24 hours. The
  credential id is the public half of a credential (what an operator revokes
  by); the audit table holds no secret, digest or token, so none can be shown.
Cost: one backward range of security_audit_time (occurred_at) over the
  window, reading at most 10000 audit rows (allowed ones included): `capped`
  when the scan stopped there before finding p_limit denials.
Inputs: p_limit 1..100 (default 20).
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL006 limit out of 1..100 (COLUMN limit).
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql.record_auth_denial(p_credential_id text, p_worker_id text, p_action text, p_reason text) IS 'ql.record_auth_denial(p_credential_id, p_worker_id, p_action, p_reason) -> void

Purpose: store a denial the ingress decided in process, before any credential
  lookup could run (missing_credential, malformed_credential, identity_mismatch
  between certificate, credential and body), so security_audit holds every
  denial (SPEC §2, §5).
Inputs: come from an unauthenticated request, so they are stored only when
  harmless: p_credential_id only when it matches ^[a-z0-9]{16}$, p_worker_id
  only when it is a lowercase canonical UUID, otherwise NULL. Never a secret,
  digest or request body. p_action ^[a-z][a-z0-9_.]{0,63}$, p_reason
  ^[a-z][a-z0-9_]{0,63}$ (the security_audit CHECK: a reason category has no
  dots).
Fences: none (the denial is the ingress''s decision).
Writes: one security_audit row.
Locks: none.
Idempotency: none; every call is a separate audit fact.
Errors: QL001 when p_action or p_reason is malformed.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint) IS 'ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint)
  -> jsonb {workerId, serial, notAfterMs}

Purpose: note a client certificate the control plane issued for a worker
  (`admin worker create`, `admin worker renew-cert`, SPEC §16.3), so its
  expiry can be shown (status, console, /metrics) and a revocation by serial
  names its worker. The certificate itself never reaches the database.
Inputs: p_worker_id (lowercase canonical UUID), p_serial (hex, any case,
  colons optional: ql_private.certificate_serial), p_not_after_ms (the
  certificate''s notAfter, epoch ms, > 0).
Fences: the worker exists; the serial is new or already recorded for the
  same worker with the same notAfter.
Writes: one worker_certificates row and one `worker.certificate_issued`
  event (payload serial, notAfterMs, actor) — nothing on a repeat.
Locks: the worker row FOR KEY SHARE; the certificate row (INSERT).
Idempotency: recording the same (worker, serial, notAfter) again returns the
  same answer and writes nothing.
Errors: QL001 malformed worker id (COLUMN workerId), serial (COLUMN serial),
  notAfterMs NULL or <= 0 (COLUMN notAfterMs), or the serial already recorded
  otherwise (COLUMN serial); QL004 unknown worker.
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.register_worker(p_name text) IS 'ql.register_worker(p_name text) -> jsonb {workerId}

Purpose: create a worker identity (SPEC §8 `admin worker create`); its id goes
  into the worker certificate''s SAN and its credentials.
Inputs: p_name, ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (a label, not a key).
Fences: none.
Writes: one workers row.
Locks: none.
Idempotency: none; names are labels, not keys, so each call is a new worker.
Errors: QL001 p_name NULL or not ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.retry_run(p_run_id text) IS 'ql.retry_run(p_run_id text) -> jsonb {runId, attemptId, attemptNo, state}

Purpose: the operator''s retry (SPEC §9.5 `admin run retry`): a run that ended
  `failed` (its last attempt failed or was lost with no attempt left) or
  `cancelled` gets a new attempt (attempt_no = the run''s highest + 1, state
  `claimed`, the previous attempt''s executor, not_before now) and is queued
  again at once: state `queued`, current_attempt_id -> the new attempt,
  cancel_requested reset, finished_at and due_at NULL, its placement class
  looked up again (ql_private.placement_class_of; unused classes are
  pruned). The run keeps its pinned revision, priority and queue position
  (queue_seq). One `run.retried` event (attempt =
  the new one; payload attemptId, attemptNo, previousAttemptId,
  previousState, actor). The requeue fires the idle view''s ''q'' NOTIFY
  (migration 0005), so idle replicas ask the database again.
Inputs: p_run_id (lowercase canonical UUID).
Fences: the run is failed or cancelled and holds no live lease; its task is
  enabled (a disabled task refuses new work, SPEC §9.1: read as enqueue
  reads it, without a lock on the task).
Writes: one attempt (the task''s retry policy as configured now pinned on it:
  max_attempts, retry_base_ms, retry_cap_ms), the run, one event; nothing
  when refused.
Locks: the current attempt FOR UPDATE, then the run FOR NO KEY UPDATE
  (ql_private.lock_run_attempt: the lifecycle order attempt -> run of
  ql.cancel_run and the lease calls; a claim, the sweeper and prune never wait
  for them); when the current attempt moved in between, those locks are
  rolled back and taken again on the new one.
Idempotency: none — each call on a failed/cancelled run adds an attempt; a
  second call right after the first finds the run queued and is refused.
Errors: QL001 malformed run id (COLUMN runId); QL004 unknown run (COLUMN
  runId); QL020 the run is not failed or cancelled (queued, in flight or
  succeeded), or still holds a live lease; QL022 task_disabled (COLUMN
  taskId) the run''s task is disabled. Nothing is written on any error.
Caller: ql_runtime, ql.producer_retry_run.';


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

COMMENT ON FUNCTION ql.revoke_certificate(p_serial text) IS 'ql.revoke_certificate(p_serial text) -> jsonb {serial, workerId, revokedAtMs, revoked}

Purpose: refuse a worker client certificate at every ingress (SPEC §16.3
  `admin cert revoke --serial S`). The TLS handshake cannot know a revocation;
  every ingress process holds the set of revoked serials
  (qinglong.service.cert_revocation), learns a new one from the NOTIFY this
  sends (channel ql_certificates, payload the canonical serial) and re-reads
  ql.revoked_certificates every 2 s as well, and refuses every request made
  over a connection whose certificate is revoked (401 certificate_revoked).
Inputs: p_serial, hex as `openssl x509 -serial` prints it, any case, with or
  without colons (ql_private.certificate_serial canonicalizes it). A serial
  the control plane never issued (another CA''s certificate) is revoked all
  the same; workerId is then null.
Fences: none (a revocation is always allowed).
Writes: one certificate_revocations row (revoked_by = session_user), the
  matching worker_certificates row''s revoked_at, and for a known certificate
  one `worker.certificate_revoked` event (payload serial, actor); NOTIFY at
  commit. Only the first time.
Locks: the revocation row (INSERT ... ON CONFLICT), the certificate row (UPDATE).
Idempotency: revoking a revoked serial writes and notifies nothing and returns
  the first revokedAtMs with revoked false.
Errors: QL001 (COLUMN serial) NULL, not hex, more than 20 octets.
Caller: ql_runtime.';


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

COMMENT ON FUNCTION ql.revoke_credential(p_credential_id text) IS 'ql.revoke_credential(p_credential_id text) -> jsonb {credentialId, revokedAtMs}

Purpose: stop a credential from authenticating (SPEC §8 `admin credential
  revoke`). Authentication reads revoked_at inside every worker-facing call,
  so the revocation applies to the next request after commit (well within
  the 5 s bound of SPEC §5).
Inputs: p_credential_id, ^[a-z0-9]{16}$.
Fences: the credential exists.
Writes: the credential''s revoked_at (only the first time).
Locks: the credential row (UPDATE).
Idempotency: revoking an already revoked credential returns the original
  revokedAtMs and writes nothing.
Errors: QL001 credential id not ^[a-z0-9]{16}$; QL004 unknown credential.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.revoke_pool(p_worker_id text, p_pool text) IS 'ql.revoke_pool(p_worker_id text, p_pool text) -> jsonb
  {workerId, pool, revoked, leasesReleased}

Purpose: `admin worker revoke --worker ID --pool P/N` (SPEC §13.1): the worker
  takes no new run of the pool from the commit on, and its UNSTARTED leases of
  the pool are released at once (reason `grant_revoked`, runs re-queued); its
  started ones may finish. ''*'' withdraws the all-pools grant (explicit grants
  stay; unstarted leases of pools not explicitly granted are released).
How a claim in flight cannot slip past it: a claim re-checks the grant in
  its one claim statement (ql_private.claim_candidate) while holding its
  session row FOR NO KEY UPDATE (ql_private.session_claim_lock) until its
  commit. This function removes the grant first, then locks each open session
  of the worker FOR UPDATE — waiting for such a claim to commit — and only
  then looks for unstarted leases, in a statement whose snapshot sees that
  claim''s lease. A claim that locks the session after this function does
  re-checks the grant after its commit and finds it gone.
Inputs: p_worker_id (lowercase canonical UUID), p_pool (''P/N'' or ''*'').
Fences: the worker exists; the pool exists.
Writes: the grant row deleted (or workers.all_pools := false), released
  leases and their runs (-> queued), and one `worker.pool_revoked` event
  (events.worker_id; payload workerId, pool, leasesReleased, actor =
  session_user) when anything changed.
Locks: the worker row FOR NO KEY UPDATE; each open (active or draining)
  session FOR UPDATE, in generation order; then attempt -> run -> lease per
  released lease (ql_private.release_ungranted_leases, docs/LIFECYCLE.md
  "Locks").
Idempotency: revoking a grant not held changes nothing (revoked = false), but
  still releases unstarted leases the worker holds no grant for.
Errors: QL001 malformed worker id (COLUMN workerId) or pool (COLUMN pool);
  QL004 unknown worker (COLUMN workerId) or pool (COLUMN pool).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.revoke_project_token(p_token_id text) IS 'ql.revoke_project_token(p_token_id text) -> jsonb {tokenId, project, revokedAtMs, revoked}

Purpose: `admin token revoke --token-id ID` (SPEC §13.4). The token is refused
  from the next producer call on: every ql.producer_* function reads the row
  (ql_private.producer_token), no cache in between.
Inputs: p_token_id (^[a-z0-9]{16}$).
Fences: the token exists.
Writes: project_tokens.revoked_at = now when not revoked yet; nothing when
  it was (revoked = false, the first revocation''s time is returned).
Locks: the token row (UPDATE).
Idempotency: yes.
Errors: QL001 malformed id (COLUMN tokenId); QL004 unknown token (COLUMN tokenId).
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer) IS 'ql.revoked_certificates(p_after_seq bigint, p_limit integer) -> jsonb {serials, lastSeq}

Purpose: what an ingress process needs to refuse revoked worker certificates
  (SPEC §16.3): the serials revoked after the last one it holds, oldest first.
  Each process calls it when ql_certificates notifies and every 2 s anyway
  (qinglong.service.cert_revocation); revocations are never deleted, so the
  sequence is complete and an idle call reads one index probe.
Inputs: p_after_seq (>= 0; 0 = from the start), p_limit 1..10000.
Returns: {serials: [canonical serial, ...] (<= p_limit, by seq), lastSeq: the
  seq of the last one returned, or p_after_seq when none}. A full page means
  more may follow: call again after lastSeq.
Writes: nothing. Locks: none (index range scan of certificate_revocations_seq_key).
Errors: QL001 p_after_seq NULL or negative, p_limit NULL or outside 1..10000.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) IS 'ql.rewrap_data_keys(p_old_kek_id text, p_new_kek_id text, p_keys jsonb) -> jsonb

Purpose: `admin secret rotate-kek` (SPEC §14.1): replace the wrap of EVERY
  project''s data key at once, in this one transaction: the CLI unwrapped each
  key (ql.list_data_keys) with the old key-encryption key file and wrapped it
  with the new one; the data keys themselves (and so every ciphertext) stay.
  From the commit on, only the new KEK unwraps anything.
Inputs: p_old_kek_id, p_new_kek_id (^[a-z0-9][a-z0-9._-]{0,63}$, different);
  p_keys: [{keyId, nonce, wrappedKey}] (hex; nonce 12 bytes, wrappedKey 48),
  exactly one entry per stored data key.
Fences: every stored key is wrapped by p_old_kek_id and p_keys names exactly
  the stored keys (a key created or rotated since the CLI read them: QL040
  secret_conflict, nothing written; the CLI reads again).
Returns {oldKekId, kekId, rewrapped: <count>}.
Writes: kek_id, nonce, wrapped_key, updated_at of every project_data_keys row;
  one security_audit row (action secret.rotate_kek, reason kek_rotated,
  actor session_user, detail {oldKekId, kekId, keys}).
Locks: every project_data_keys row FOR UPDATE (in key id order), so a
  concurrent ql.project_data_key insert waits or is seen.
Idempotency: none: a repeat (the keys now carry p_new_kek_id) is QL041.
Errors: QL001 malformed (COLUMN kekId|keys), QL041 kek_mismatch (a stored key
  is wrapped by another KEK than p_old_kek_id), QL040 secret_conflict.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.rotate_credential(p_credential_id text, p_secret_digest bytea, p_worker_id text, p_new_credential_id text, p_new_secret_digest bytea) IS 'ql.rotate_credential(p_credential_id, p_secret_digest, p_worker_id,
                     p_new_credential_id, p_new_secret_digest) -> jsonb

Purpose: a worker replaces its own credential (SPEC §16.2, POST
  /v1/credentials/rotate, mTLS + the current credential). The ingress
  generates the new id and secret and sends only the secret''s SHA-256; the
  database never sees a secret.
Inputs: p_credential_id, p_secret_digest, p_worker_id: the presented
  credential and the certificate''s worker, checked by ql_private.authenticate
  (action credential.rotate); p_new_credential_id (^[a-z0-9]{16}$, new),
  p_new_secret_digest (32 bytes).
Returns: {"status":"ok", credential: {workerId, credentialId, issuedAtMs,
  expiresAtMs (null: never), previousCredentialId, previousExpiresAtMs}} or
  the denial envelope of ql_private.authenticate.
Fences: the presented credential (authenticate: exists, secret, not revoked,
  not expired, this worker, worker not disabled).
Writes: the new worker_credentials row (the presented one''s ttl_s, expires_at
  = now + ttl_s, rotated_from = the presented one); the presented one''s
  expires_at becomes at most now + 24 h (it stays valid until the new one is
  first used: ql_private.credential_first_use); an earlier successor of the
  presented credential that was never used is revoked (a worker that lost the
  answer, or crashed before writing it, rotates again). One
  `worker.credential_rotated` event (credential ids only). NOTIFY ql_dispatch
  ''c:<presented>'' (its expiry moved). A denial writes its one audit row only.
Locks: the presented credential''s row FOR UPDATE (concurrent rotations of
  one credential serialize), then its unused successors (UPDATE).
Idempotency: none: every call issues a new credential and revokes the
  previous unused one, so a retry after a lost answer converges.
Errors: QL001 malformed worker id / new id / new digest, or the new id
  exists.
Caller: ql_worker_ingress.';


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

COMMENT ON FUNCTION ql.run_log(p_run_id uuid, p_attempt_no integer, p_offset bigint, p_max_bytes integer) IS 'ql.run_log(p_run_id uuid, p_attempt_no integer DEFAULT NULL,
           p_offset bigint DEFAULT 0, p_max_bytes integer DEFAULT 1048576) -> jsonb
  {runId, attemptNumber, offset, text, storedBytes, logBytes, truncated,
   complete, ended}

Purpose: one page of an attempt''s live log (SPEC §15.3), for `admin run log`,
  the console''s run page, `qinglong run log` and, through
  ql.producer_run_log, `GET /v1/runs/{id}/log`. A follower calls it again
  from offset + the byte length of the text it got until `ended`.
  * attemptNumber: p_attempt_no, or the run''s latest attempt when NULL.
  * text: the stored log from byte p_offset on, at most p_max_bytes bytes of
    it, cut back to whole UTF-8 characters ('''' at the end of what is stored).
  * storedBytes: the length in bytes of the log stored so far (0 when the
    attempt never sent any); truncated: bytes past the task''s
    logLimitBytes were dropped (SPEC §15.2).
  * logBytes: the byte length of the whole output as the executor reported
    it with the completion (result.logBytes, SPEC §15.2); null while the
    attempt runs, and for an attempt that ended without it (lost, start
    failed, cancelled before it started, or an older worker).
  * ended: the attempt is in a final state (succeeded, failed, cancelled,
    lost): nothing will be appended any more.
  * complete: the stored log is the whole log: the attempt ended, reported
    logBytes, and stored all of them (storedBytes = logBytes). A log
    shorter than logBytes — cut at the cap (truncated) or missing chunks —
    or of an attempt that ended without logBytes, is never complete (SPEC
    §15.2: never shown as a complete log); readers say which.
Cost: a primary-key probe of the run, one probe of attempts (run_id,
  attempt_no), of attempt_logs, and a range of the chunks'' primary key
  bounded by p_max_bytes (ql_private.log_bytes). One snapshot (STABLE): the
  header and the chunks read agree.
Inputs: p_run_id; p_attempt_no >= 1 or NULL; p_offset 0..storedBytes, at
  the start of a character (an offset a previous page answered always is);
  p_max_bytes 4..16777216 (4: room for any one character, so a follower
  always advances).
Fences: none (an operator''s or a granted reader''s read; the producer''s
  project fence is ql.producer_run_log''s). Writes: none. Locks: none.
Idempotency: read-only.
Errors: QL001 NULL run id (COLUMN runId); QL004 unknown run (COLUMN runId),
  unknown attempt of a known run (COLUMN attempt); QL006 p_attempt_no < 1
  (COLUMN attempt), p_offset outside 0..storedBytes or inside a character
  (COLUMN offset), p_max_bytes out of bounds (COLUMN maxBytes).
Caller: ql_readonly, ql_runtime, ql.producer_run_log.';


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

COMMENT ON FUNCTION ql.run_state_counts() IS 'ql.run_state_counts() -> jsonb

Purpose: the console overview''s "runs by state" (SPEC §10): {states:
  [{state, runs, capped, estimate}], cap}, one entry per run state in
  lifecycle order (queued, dispatching, starting, running, succeeded, failed,
  cancelled). `runs` is exact up to `cap` (1000); past it `capped` is true
  and `estimate` is the planner''s count for that state (the state''s
  most-common-value frequency in pg_stats times pg_class.reltuples of runs,
  kept fresh by the queue tables'' autovacuum settings; null when ANALYZE has
  no frequency for it). A console page must render in <= 100 ms with
  1,000,000 runs stored, so nothing here counts a whole state; the cap is
  1000 (as ql.queue_depth''s), not 10000: in a busy window the newest rows
  are not all-visible, and counting 10000 of them (heap visits) was the
  overview''s largest read in the busy-window bench.
Cost: seven index-only range scans of runs_state_seq (state, queue_seq),
  each stopping after cap + 1 entries, plus two catalog probes when capped.
Inputs: none.
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: none.
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text, p_nonce bytea, p_ciphertext bytea) IS 'ql.set_secret(p_project text, p_name text, p_version integer, p_key_id text,
              p_nonce bytea, p_ciphertext bytea) -> jsonb

Purpose: `admin secret set --project P --name NAME` (SPEC §14.1): store a new
  version of a secret, ENCRYPTED by the caller (AES-256-GCM under the
  project''s data key, ql.project_data_key; associated data = project id,
  name, version, key id: service/secrets_crypto.py). The database never
  sees the value.
Inputs: p_project (an existing project with a data key), p_name
  (^[a-z][a-z0-9_.-]{0,63}$), p_version (the version this call writes: 1
  for a new secret, else the current version + 1 — the caller encrypted
  with it in the associated data), p_key_id (the project''s data key id),
  p_nonce (12 bytes), p_ciphertext (a value of 8 B - 16 KiB + the 16-byte
  tag: 24 .. 16400 bytes).
Fences: the project has a data key and p_key_id is it; p_version is the
  next version (a concurrent set in between: QL040 secret_conflict, nothing
  written; the caller encrypts again with the new version).
Returns {project, name, version, createdAtMs, updatedAtMs}. Never a value.
Writes: the secrets row (insert, or the new version in place); one
  security_audit row (action secret.set, reason secret_set, actor
  session_user, detail {project, name, version}).
Locks: the secret row (INSERT ... ON CONFLICT DO UPDATE with the version
  guard): two concurrent sets of the same version — one wins, one QL040.
Idempotency: none (each call writes a version).
Errors: QL001 malformed (COLUMN project|name|version|keyId|nonce), QL002
  ciphertext size outside 24 .. 16400 bytes (COLUMN value), QL004 project
  without a data key (COLUMN project), QL040 secret_conflict.
Caller: ql_runtime (control plane).';


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

COMMENT ON FUNCTION ql.show_run(p_run_id text) IS 'ql.show_run(p_run_id text) -> jsonb

Purpose: one run in detail, for `admin run show` and the console (SPEC §9.4):
  {run: {runId, taskId, projectId, project, taskName, pool, state, priority,
         queuedAtMs, notBeforeMs, attempts, updatedAtMs, finishedAtMs,
         cancelRequested, executionRevisionId, key},
   attempts: [{attemptId, number, state, workerId, sessionId, claimedAtMs,
               startedAtMs, finishedAtMs, exitCode, reason, result}],
   events: [{type, atMs, ...payload fields..., attemptId}]}.
  Attempts in number order (at most the latest 200), each with the worker,
  session, claim and start time of its latest lease (null when never
  claimed) and its stored completion result (SPEC §9.3). `project` and
  `taskName` name the run''s project and task, `pool` is the pool the run
  carries as `P/N` (SPEC §13.1). Events oldest first,
  at most the latest 200; each is its payload with `type`, `atMs` and
  `attemptId` added. No token, secret or digest of either is ever stored in a
  lease projection read here or in an event payload (events CHECK), so none
  is returned.
Cost: one primary-key probe of the run, its task, project and pool, one range of attempts (run_id, attempt_no), one
  latest-lease probe per attempt ((attempt_id, lease_generation)), one range
  of events (events_run) — bounded by the caps above.
Inputs: p_run_id (lowercase canonical UUID).
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL001 malformed run id (COLUMN runId); QL004 unknown run (COLUMN runId).
Caller: ql_readonly, ql_runtime, ql.producer_cancel_run, ql.producer_retry_run,
  ql.producer_show_run.';


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

COMMENT ON FUNCTION ql.status_snapshot() IS 'ql.status_snapshot() -> jsonb

Purpose: the operator''s glance (SPEC §8 `qinglong status`): queue depth by
  priority and by task, the oldest waiting run, live sessions with their slot
  use, live leases by state, and authentication denials of the last hour by
  reason. Every part reads through a partial or time index and every count
  and list is capped, so a snapshot stays cheap on a deep queue (about 30 ms
  at 1M queued runs, docs/OPERATIONS.md):
  * queue total: an index scan of the partial candidate index
    runs_candidate_keyset stopping at 100000 rows; past that `capped` is true
    and `estimate` is the index''s planner row count (pg_class.reltuples, kept
    fresh by the queue tables'' autovacuum settings of migration 0002);
  * per priority (at most 64): a loose index scan finds the distinct
    priorities (one descent each), each counted up to 10000, with the age of
    its oldest waiting (`queued`, and due if it was scheduled) run, the first
    one in index order;
  * per task: counts over runs_task_state_seq (task_id, state, …), queued and
    dispatching only, each up to 10000; the top 50 tasks listed, the rest summed;
  * sessions and leases: the active-session and live-lease partial indexes
    (bounded by the number of workers and their slots); the session list is
    capped at 50 (oldest heartbeat first: the ones an operator looks at);
  * denials: security_audit_time, at most 100000 rows of the last hour
    (`capped` says when the window held more).
  * notificationQueueUsage: pg_notification_queue_usage(), the fraction of
    the cluster''s LISTEN/NOTIFY queue in use. A listener that holds a
    transaction open pins the queue; at 1.0 every commit that fires the
    idle-view triggers fails (docs/OPERATIONS.md says what to do).
  * expiring: ql.expiring_identities(14 d, 20): worker credentials and
    issued certificates that expire within 14 days (SPEC §16.3), soonest first.
  Queue terms: `runs` = not yet started (queued or dispatching, runtime-owned,
  not cancel-requested, i.e. the candidate index); `offered` = of those, held
  by a live unstarted unexpired lease; `waiting` = runs - offered.
Inputs: none.
Fences: none (an operator''s read).
Writes: none (no lock, no WAL).
Locks: none.
Idempotency: read-only.
Errors: none.
Caller: ql_readonly (monitoring), ql_runtime (`qinglong status`, the demo).';


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

COMMENT ON FUNCTION ql.sweep_leases(p_batch integer) IS 'ql.sweep_leases(p_batch integer DEFAULT 500) -> jsonb

Purpose: lease expiry (SPEC §7), one bounded batch per call, stateless and
  safe on every replica at once. Takes up to `p_batch` live leases whose
  expires_at <= clock_timestamp() (index run_leases_live_expiry, oldest first)
  with FOR UPDATE SKIP LOCKED, so concurrent sweepers split the work and never
  wait for each other or for a worker''s call; the row lock re-checks the
  expiry on the newest row version, so a lease a heartbeat just extended is
  not taken. For each lease it then locks the attempt (FOR UPDATE SKIP LOCKED)
  and the run (FOR NO KEY UPDATE SKIP LOCKED); when either is busy (a claim,
  an ACK or a cancel holds it) the lease is left for the next pass (`skipped`).
  The sweeper never waits for a lock, so it cannot take part in a deadlock.
  * unstarted (never ACKed): lease released `expired`; the attempt stays
    `claimed`; a `dispatching` run goes back to `queued` (decision: the run
    state says "an offer is outstanding" only while one is; the run is a
    candidate either way, and a later claim takes lease_generation + 1). No
    event (a claim superseding an expired offer writes none either). A
    cancel-requested run (not reachable through ql.cancel_run, handled for
    safety) is cancelled instead: attempt + run cancelled, `run.cancelled`.
  * started: attempt -> `lost` (reason `lease_expired`, finished_at), lease
    released `lost`, one `attempt.lost` event, then ql_private.apply_retry:
    a new attempt (`run.retry_scheduled`), `run.failed` when attempts are
    exhausted, or `run.cancelled` when the run is cancel-requested.
  Then it promotes scheduled runs that came due (SPEC §9.2): up to p_batch
  queued runs with due_at <= now (index runs_due, oldest due first, FOR NO KEY
  UPDATE SKIP LOCKED) get due_at := NULL, which puts them into the candidate
  keysets; until then candidate_page reads them from runs_due (bounded).
Inputs: p_batch, 1..5000 leases (and up to as many promotions) per call
  (default 500).
Fences: each lease re-checked on its locked row (still live, still expired);
  each promoted run on its locked row (still queued, still due).
Returns {"expired", "lost", "retried", "failed", "cancelled", "skipped",
  "promoted", "more"}: counts of this batch; `more` = a batch was full (call
  again now).
Writes: per lease as above (lease, attempt, run, at most one event each, and
  the retry policy''s writes); runs.due_at of the promoted runs (no event).
Locks: the leases FOR UPDATE SKIP LOCKED, then per lease its attempt FOR
  UPDATE SKIP LOCKED and its run FOR NO KEY UPDATE SKIP LOCKED (see above).
  Lease first is against the lifecycle order attempt -> run -> lease
  (docs/LIFECYCLE.md "Locks") and allowed only because no lock here is
  waited for: a function that never waits cannot be part of a deadlock.
Idempotency: a released lease is never taken again; each lost attempt is
  retried at most once (attempt lock + UNIQUE (run_id, attempt_no)).
Errors: QL001 batch NULL or < 1; QL002 batch > 5000.
Caller: ql_sweeper (`qinglong runtime sweep`), ql_runtime.';


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

COMMENT ON FUNCTION ql.task_settings(p_task_id text) IS 'ql.task_settings(p_task_id text) -> jsonb

Purpose: a task''s run policy (SPEC §9.1): {taskId, leaseTtlS, maxAttempts,
  retryBaseMs, retryCapMs, enabled, logLimitBytes} — the object
  ql.configure_task returns (logLimitBytes: the live-log cap, SPEC §15.2).
Inputs: p_task_id (lowercase canonical UUID).
Fences: none (an operator''s read).
Writes: none. Locks: none. Idempotency: read-only (one primary-key probe).
Errors: QL001 malformed task id (COLUMN taskId); QL004 unknown task (COLUMN
  taskId).
Caller: ql_readonly, ql_runtime.';


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

COMMENT ON FUNCTION ql.throughput(p_minutes integer) IS 'ql.throughput(p_minutes integer DEFAULT 15) -> jsonb

Purpose: the console''s throughput chart (SPEC §10): per minute of the last
  p_minutes minutes (the current, partial minute last), the runs dispatched
  (leases claimed: one lease row per dispatch, its claimed_at), succeeded and
  failed (terminal runs by finished_at): {minutes: [{minuteMs, dispatched,
  succeeded, failed, estimated}], fromMs, capped: {dispatched, finished},
  cap}. Every minute of the window is listed, zeros included, so the chart''s
  x axis is fixed.
  Bounded per minute: each series reads at most `cap` (1000) rows of each
  minute, oldest first. A minute that holds more is extrapolated from the
  rate of its first `cap` rows: count = cap x (minute''s length, up to now) /
  (time from the minute''s start to its cap-th row); its `estimated` is true
  and `capped` says which series had such a minute (the page marks the
  figures ≈). Why: a busy window (100,000+ dispatches in 15 minutes) read
  whole cost hundreds of milliseconds, past the page''s 100 ms; rows read now
  stay <= 2 x p_minutes x cap however busy the window. The rows of a busy
  minute are not all-visible yet, so no index-only scan would save the
  heap visits; reading fewer rows does.
Cost: per minute, one range of run_leases_claimed (claimed_at, migration
  0011) and one of runs_terminal_finished (finished_at, terminal runs), each
  stopping after cap rows.
Inputs: p_minutes 1..60 (default 15).
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL006 minutes out of 1..60 (COLUMN minutes).
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql.waiting_runs(p_limit integer) IS 'ql.waiting_runs(p_limit integer DEFAULT 20) -> jsonb

Purpose: the console overview''s "waiting" panel (SPEC §10): for the oldest
  waiting runs, whether any live session could take them. {runs: [{runId,
  taskId, task, project, priority, queuedAtMs, waitingMs, verdict,
  sessionsMatching, sessionsWithFreeSlots, mismatches: {executor, label,
  runtime}}], liveSessions, sessionsCapped, scanned, prioritiesCapped,
  capabilitiesCapped}.
  * The runs: queued (not offered), runtime-owned, not cancel-requested, due
    (not scheduled for later), oldest first by enqueue order (queue_seq); at
    most p_limit of them. They are taken where dispatch takes them, never
    from a scan of all queued runs (100,000 runs scheduled for later ahead of
    one ready run must not hide it): the head (first p_limit by queue_seq) of
    each ready priority in runs_candidate_keyset (at most 64 priorities; one
    index descent each, ql_private.ready_priorities; `prioritiesCapped` when
    more exist), plus the p_limit earliest-due runs of runs_due whose due time
    has passed (not yet promoted by the sweeper), merged by queue_seq.
    `scanned` = the index entries read for the head.
  * waitingMs: since the run became ready: greatest(created_at, its current
    attempt''s not_before) (one primary-key probe): a retry waits from its
    retry''s not_before, a promoted scheduled run from its due time (the
    sweeper clears due_at on promotion; created_at would overstate both).
  * The sessions: active, unexpired, of a worker that is not disabled (what a
    pull needs: ql.pull_offer refuses the others), at most 200 (most recently
    seen first; `sessionsCapped` when more were live).
  * The verdict of a run against a session is ql_private.placement_evaluate
    of the run''s placement class ({required} of its revision, migration 0006)
    against the session''s stored capabilities: the same evaluation the claim
    path makes (ql_private.matching_classes), so the panel cannot disagree
    with dispatch about who qualifies. It is computed once per distinct class
    and distinct session capabilities (sessions declaring the same
    capabilities share one evaluation), not per run; at most the 50 most
    recently seen distinct capability sets are evaluated
    (`capabilitiesCapped` when the live sessions have more; their counts are
    then lower bounds). Why 50: 20 classes x 200 distinct sessions measured
    ~100 ms of evaluations on a busy bench machine, the page''s whole budget.
    verdict: `no_live_session` (no session is live), `ready` (a matching
    session has a free slot: the next pull of that session can take it),
    `busy` (sessions match but all their slots are
    used), `no_match` (no live session satisfies the placement; `mismatches`
    counts the sessions by the first failing requirement, names only, never a
    label value or version).
Cost: a loose index scan of runs_candidate_keyset (<= 65 descents), each
  priority''s range read up to p_limit entries; one range of runs_due up to
  p_limit; the listed runs'' rows and current attempts by primary key; the
  active sessions (worker_sessions_one_active) with one live-lease count each
  (run_leases_session_live_counted), and classes x distinct capabilities
  evaluations (<= p_limit x 50; a fleet of identical workers: p_limit).
Inputs: p_limit 1..100 (default 20).
Fences: none (an operator''s read).
Writes: none (STABLE). Locks: none. Idempotency: read-only.
Errors: QL006 limit out of 1..100 (COLUMN limit).
Caller: ql_readonly (the console), ql_runtime.';


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

COMMENT ON FUNCTION ql_private.apply_retry(p_run_id uuid, p_attempt_id uuid, p_reason text) IS 'ql_private.apply_retry(run_id uuid, attempt_id uuid, reason text) -> text

Purpose: the bounded retry policy (SPEC §7), applied after the run''s current
  attempt ended without success (failed start, failed completion, lost lease).
  First match wins:
  * the run is cancel-requested: no new attempt; run -> ''cancelled''
    (finished_at), one `run.cancelled` event. Returns ''cancelled''.
  * attempt_no < the ended attempt''s max_attempts: a new attempt attempt_no
    + 1 (state ''claimed'', same executor; the task''s retry policy as
    configured now pinned on it), not_before = clock_timestamp() +
    full-jitter exponential backoff: min(retry_cap_ms, retry_base_ms *
    2^(attempt_no - 1)) * random() milliseconds, with the ended attempt''s
    own pinned base and cap (a task configure reaches only attempts created
    after it, SPEC §9.1); runs.current_attempt_id -> the new attempt, run ->
    ''queued'' with due_at = that not_before when it is in the future (a
    scheduled run: out of the candidate keyset, found through runs_due once
    due and promoted by the sweeper; NULL = ready at once), one
    `run.retry_scheduled` event (attempt_id = the new attempt; payload
    previousAttemptId, attemptNo, reason, delayMs, notBeforeMs). Returns
    ''retried''.
  * otherwise: run -> ''failed'' (finished_at), one `run.failed` event. Returns
    ''failed''.
Preconditions (the caller''s job, checked here as a guard): the caller holds the
  attempt row FOR UPDATE and the run row FOR NO KEY UPDATE, the attempt is the
  run''s current attempt and already terminal (failed|lost|cancelled), and the
  run is not terminal. The UNIQUE (run_id, attempt_no) constraint makes a
  double retry of one attempt impossible even if a caller forgot its locks.
Caller: ql.ack_lease (start_failed), ql.complete_lease (failed),
  ql.sweep_leases (lost). Locks: none of its own beyond the rows it writes.
Idempotency: none by itself; callers only reach it once per attempt because
  the attempt leaves its live state in the same transaction.
SQLSTATEs: QL020 when the preconditions do not hold (a caller bug: nothing
  is written).';


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

COMMENT ON FUNCTION ql_private.authenticate(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_action text) IS 'ql_private.authenticate(credential_id, secret_digest, worker_id, action) -> jsonb

Purpose: the credential check every worker-facing function starts with (SPEC
  §5: authenticate -> authorize -> audit -> act). Returns NULL when the caller
  may act as worker_id; otherwise stores ONE low-sensitivity row in
  ql_private.security_audit and returns the denial envelope
  {"status":"denied","httpStatus":401|403,"reason":...}. Denials are returned,
  not raised, so the audit row commits with the caller''s transaction.
  Reasons, checked in this order so a caller without the secret learns nothing
  about the credential''s state:
    malformed_credential 401  id not ^[a-z0-9]{16}$, or digest not 32 bytes
    unknown_credential   401  no such credential (a dummy constant-time compare
                              still runs, so timing does not reveal existence)
    bad_secret           401  digest differs (ql_private.digest_equal)
    revoked_credential   401  revoked_at set
    expired_credential   401  expires_at passed (SPEC §16.2: its lifetime,
                              or a rotated credential''s 24 h / first use of
                              its successor)
    worker_mismatch      403  the credential belongs to another worker
    worker_disabled      403  the worker is disabled (ql.disable_worker, SPEC
                              §9.5): every credential of it is refused until
                              ql.enable_worker — with one exception, for a
                              worker disabled with drain: while it has a
                              draining, unexpired session, the calls that
                              only let started work end are allowed
                              (session.heartbeat, session.close, lease.ack,
                              lease.heartbeat, lease.complete, lease.log,
                              lease.secrets: a started run still needs its
                              secrets to start its command).
                              Their own
                              fences keep them to the draining session''s
                              STARTED leases (ql_private.lease_verdict:
                              an unstarted lease of a draining session
                              answers session_draining); session.open and
                              offer.pull stay refused: no new work, ever.
  The audit row holds time, the credential id only when well-formed, the worker
  id, the action, outcome ''denied'' and the reason: never a secret or a digest.
Caller: ql.authenticate_worker, ql.open_session, ql.heartbeat_session,
  ql.close_session, ql.pull_offer, ql.pull_offers, ql.rotate_credential,
  ql_private.lease_prelude (the lease calls; all from SECURITY DEFINER
  functions, so this runs as ql_owner).
Locks: none (plain read of worker_credentials and the worker''s row, one
  statement: the disabled flag costs one primary-key probe more; a disabled
  worker''s drain exception one probe of worker_sessions_draining). Writes: nothing when allowed
  (an idle pull must write nothing) — except the first use of a rotated
  credential (ql_private.credential_first_use: its first_used_at, its
  predecessor''s expires_at, row locks on both) —, exactly one audit row when denied.
Idempotency: read-only when allowed; each denial is its own audit fact.
SQLSTATEs: QL001 when worker_id is NULL or action is not ^[a-z][a-z0-9_.]{0,63}$
  (caller bugs, not authentication outcomes).';


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

COMMENT ON FUNCTION ql_private.bound_value(p_bounds jsonb, p_key text, p_default integer, p_cap integer) IS 'ql_private.bound_value(bounds jsonb, key text, default integer, cap integer) -> integer

Purpose: read one integer bound; absent -> default.
Caller: ql_private.pull_bounds.
SQLSTATEs: QL001 not an integer or < 1; QL002 above the cap (named in the message).';


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
          WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
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
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
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
          WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.candidate_page(after_priority, after_seq, after_id, limit, now, snapshot, own)
  -> SETOF candidate rows

Purpose: one keyset page of dispatch candidates (SPEC §3.1, R-CAND), in
  priority DESC, queue_seq, id order. Returns up to `limit + 1` rows so the
  caller can report `truncated` exactly.
Candidate: run runtime-owned, not cancel-requested, queued|dispatching; its
  current attempt `claimed`, executor remote_worker, not_before passed; and no
  live lease that is started or still unexpired (by clock_timestamp()). Both
  sources below satisfy the lease half by construction; claim_candidate
  re-checks everything on the locked rows anyway.
Three sources, merged in key order:
  * ready `queued` runs (due_at IS NULL): one range scan of
    runs_candidate_keyset on the ascending key (-priority, queue_seq, id), the
    keyset position a single row comparison (ql_private.keyset_after, the one
    definition every candidate scan uses, inlined into this query);
  * scheduled `queued` runs that came due (due_at <= now, SPEC §9.2): read
    through runs_due in due_at order, at most 4 x (limit + 1) of them, then
    filtered by the keyset position. Runs not yet due sit in runs_due beyond
    `now` and are never read, so 100,000 future runs ahead of ready ones cost a
    pull nothing; the sweeper promotes due runs (due_at := NULL) into the
    keyset within seconds, so this source normally holds a handful;
  * `dispatching` runs whose live lease expired unstarted: found through
    run_leases_unstarted_expiry. Every path that releases a lease without a
    successor re-queues its run, so a dispatching run always has a live
    unstarted lease, and only the expired ones are candidates — a scan never
    walks past the offers currently in flight. The sweeper re-queues expired
    offers within seconds; until it does, a page considers the 4 x (limit + 1)
    that expired first (index order), so its cost stays bounded however many
    offers expired at once (measured: a pull walking 13k expired offers took
    20 ms).
The attempt (and, for expired offers, the run) is probed per row through a
  LATERAL subquery with LIMIT, which the planner cannot flatten or reorder: the
  scan is driven by the keyset index even when statistics are stale (e.g. right
  after a bulk enqueue, before autovacuum analyzed it), where a freely planned
  join was measured at >200 ms a pull.
Rows being claimed right now are skipped: a row whose xmax is a transaction
  still in progress in `snapshot` (the caller''s pg_current_snapshot(); `own` =
  its own xid, never counted; see ql_private.xid_in_progress) has been locked
  or updated by a concurrent claim. Skipping it here, without taking a
  lock, is what SKIP LOCKED does inside the raw claim''s index scan — so
  concurrent pulls spread over the queue head instead of all evaluating the
  same rows and losing the race to each other — while an idle pull still
  writes nothing (a row lock would write WAL). It is only a hint: the claim
  re-checks everything under FOR NO KEY UPDATE SKIP LOCKED.
`now` is the caller''s clock_timestamp(), passed in (the default reads it):
  LANGUAGE sql without SET clauses and without a volatile call in the body, so
  the planner inlines it into the caller''s query. The caller (ql.pull_offer)
  pins the plan: a generic plan made once per connection with sequential
  scans disabled, so the plan is the ordered keyset index scan whatever the
  statistics said when it was made — a plan cached while the queue was empty
  (seq scan + sort) would otherwise stick to the connection after it fills.
No OFFSET, no sort of the queue (docs/EXPLAIN.md).
Caller: ql_private.scan_and_claim. Locks: none. Read-only: an idle pull
  generates no WAL. SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.certificate_serial(p_serial text) IS 'ql_private.certificate_serial(p_serial text) -> text

Purpose: the canonical form of a certificate serial number (SPEC §16.3): hex
  as `openssl x509 -serial` prints it, in any case, with or without colons
  (and with or without its `serial=` prefix), becomes lowercase hex without
  colons or leading zeros (''0'' for zero). What ql_private.worker_certificates
  and ql_private.certificate_revocations store, and what the ingress compares
  (qinglong.service.cert_revocation.serial_hex gives the same text).
Inputs: p_serial, at most 128 characters.
Returns: the canonical serial (1..40 hex digits: a serial has at most 20 octets).
Writes: nothing. Locks: none. Pure.
Errors: QL001 (COLUMN serial) NULL, empty, not hex, or more than 20 octets.
Caller: ql.revoke_certificate, ql.record_certificate.';


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

COMMENT ON FUNCTION ql_private.claim_candidate(s ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_offer_id uuid, p_token_digest bytea, OUT offer jsonb, OUT consumed integer, OUT locked boolean) IS 'ql_private.claim_candidate(session, run_ids, scores, offer_id, token_digest)
  -> (offer jsonb, consumed integer, locked boolean)

Purpose: the atomic claim of SPEC §3.3 step 3. `run_ids` are passing
  candidates in claim order (priority DESC, placementScore DESC, queue order),
  `scores` their placement scores. ONE statement locks the first of them whose
  run and current attempt can both be locked — FOR NO KEY UPDATE SKIP LOCKED on
  both rows, attempt then run (the one lifecycle order), so a row a competing
  replica holds is skipped, never waited for —
  and that still passes every candidate fence on the locked rows, by
  clock_timestamp(): run queued|dispatching, runtime-owned, not
  cancel-requested, due (runs.due_at NULL or passed, SPEC §9.2); attempt
  current, `claimed`, executor remote_worker, not_before passed; the session''s
  worker holds a grant for the run''s pool (workers.all_pools or a
  worker_pool_grants row, SPEC §13.1) — read in the same statement, while the
  caller holds the session row, which ql.revoke_pool waits for after removing
  a grant. A `dispatching` run is only claimable when its live lease
  expired unstarted: that lease is released here (`expired`); when it did not
  expire the race was lost. A `queued` run has no live lease (every release
  path re-queues; run_leases_one_live would refuse a second one).
Writes: one run_leases row (lease_generation = previous + 1; the task''s lease
  TTL pinned on it, lease_ttl_seconds: what the starting ACK and heartbeats of
  this lease extend it by, whatever the task is configured to later, SPEC
  §9.1; and its logLimitBytes, log_limit_bytes: the cap of this attempt''s
  live log, SPEC §15.2), the run -> dispatching (due_at cleared), exactly one `run.dispatched`
  event.
Returns `offer` = the offer@v1 projection built from the rows in hand
  (ql_private.offer_json, the same function a replay uses), NULL when nothing
  was claimed; `consumed` = how many of run_ids are done with (the position of
  the locked one, or all of them): those before it were passed over — locked
  by a competing claim or no longer candidates — and count as races; the
  locked one is the claim attempt (`locked`; a race too when its fences
  failed).
The session row must already be locked and re-verified by the caller, and the
  offer id serialized by ql.pull_offer''s advisory lock (so offer_id UNIQUE can
  only fire on a bug, and then aborts the pull rather than issue a second lease).
Planning: bitmap scans are off for this function. Planned on small-table
  statistics (a fresh install: and the generic plan then stays with the
  pooled connection), the join of the ids to runs became one BitmapOr over
  runs_state_seq (state queued OR dispatching) — a read of every queued run,
  scheduled ones included — instead of a primary-key probe per id;
  tests/sql/pull_offer.sql counts the runs rows a pull fetches. Without
  bitmaps the OR has no index path, so the probes are the plan. (Set here,
  not on ql.pull_offer: the due-run source of candidate_page needs no such
  help and measured worse with it.)
Caller: ql_private.claim_page.
SQLSTATEs: none raised.';


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

COMMENT ON FUNCTION ql_private.claim_page(p_session ql_private.worker_sessions, p_run_ids uuid[], p_scores integer[], p_priorities smallint[], p_offer_id uuid, p_token_digest bytea, p_attempts_left integer, p_session_locked boolean, OUT offer jsonb, OUT attempts integer, OUT races integer, OUT session_locked boolean, OUT capacity_full boolean) IS 'ql_private.claim_page(p_session, p_run_ids, p_scores, p_priorities, p_offer_id,
                      p_token_digest, p_attempts_left, p_session_locked)
  -> (offer, attempts, races, session_locked, capacity_full)

Purpose: the claim step of one keyset page of a pull (SPEC §3.2 claim order,
  §3.3 step 3). p_run_ids are the page''s passing candidates in scan order
  (priority DESC, queue order) with their placement scores and priorities. It
  puts a higher placementScore first within a priority (claim order: priority
  DESC, score DESC, queue order; a stable insertion sort, run only when the
  scores differ — without preferred terms they are all 0), then hands the rest
  of the list to ql_private.claim_candidate (ONE SKIP LOCKED statement per
  try) until a claim succeeds, the list is used up, or p_attempts_left claim
  attempts were made. Only equal-priority candidates on a later page can
  outscore one claimed here, since pages come in key order.
Inputs: p_session (the session row that passed its fences), p_run_ids,
  p_scores, p_priorities (the page''s passers, indexed alike, scan order),
  p_offer_id, p_token_digest (what the lease is written with), p_attempts_left
  (what is left of the pull''s claim-attempt budget), p_session_locked (whether
  this pull already holds the session lock).
Returns offer = the offer@v1 projection of the claim, NULL when nothing was
  claimed; attempts = candidates a claim locked and re-checked; races =
  candidates lost to a competing claim (passed over because locked or claimed
  since the scan, or locked but no longer passing its fences); session_locked
  = whether the pull now holds the session lock; capacity_full = the session
  had no free slot at the lock (nothing tried).
Fences: before its first claim attempt of the pull, the session row is locked
  and re-verified (ql_private.session_claim_lock: still active, same
  generation, unexpired, capabilities unchanged, a free slot), so concurrent
  pulls of one session can never exceed its slots and a replaced session can
  never gain a lease; every candidate fence is re-checked on the locked rows by
  ql_private.claim_candidate.
Writes: only a claim (ql_private.claim_candidate: one lease, the run ->
  dispatching, one run.dispatched event).
Locks: the session row FOR NO KEY UPDATE (once per pull, when
  p_session_locked is false); each try''s run + attempt FOR NO KEY UPDATE SKIP
  LOCKED.
Errors: QL010–QL014 from the session re-check.
Caller: ql_private.scan_and_claim (once per page that has passing candidates).';


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
            AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
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
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.class_candidate_page(p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.class_candidate_page(classes, after_priority, after_seq, after_id, limit,
                                now, snapshot, own) -> SETOF candidate rows

Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
  candidates restricted to the given placement classes (migration 0006), in
  the same priority DESC, queue_seq, id order and with the same candidate
  conditions as ql_private.candidate_page. Each class is one range scan of
  runs_class_keyset (equality on the class, row comparison on the key:
  ql_private.keyset_after, inlined),
  limited to limit + 1; the per-class heads are merged and cut to limit + 1.
  Cost: two index descents per class, whatever is queued in other classes —
  this is how a pull jumps over a head of runs its session cannot take.
Two sources per class, merged in key order as in candidate_page:
  * ready `queued` runs (due_at IS NULL): runs_class_keyset, a range scan on
    (class, key);
  * scheduled `queued` runs that came due (due_at <= now): runs_class_due
    (migration 0017) in due_at order, at most 4 x (limit + 1) per class, then
    filtered by the keyset position — so a due run the session can take is
    found behind any head of due runs it cannot, without waiting for the
    sweeper''s promotion; runs not yet due are never read.
  An offer that expired unstarted behind a blocked head is not here: the
  sweeper re-queues it within seconds and it is then a ready run.
Rows a concurrent claim holds are passed over without a lock
  (ql_private.xid_in_progress), as in candidate_page.
Inlinable SQL (no SET clause, nothing volatile in the body).
Caller: ql_private.scan_and_claim.
Locks: none. Read-only. SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.close_drained_session() IS 'ql_private.close_drained_session() -> trigger

Purpose: end a draining session with its last lease (SPEC §9.5 drain,
  ql_private.drain_session). Runs AFTER UPDATE of run_leases for each lease
  that was started and is released now (completion, start failure, loss,
  cancellation; trigger run_leases_close_drained, migration 0018, whose WHEN
  keeps every other lease update — claims, ACKs, heartbeats, unstarted
  releases — free of any call). When the lease''s session is `draining` and no
  live lease of it is left, the session is closed (state closed, closed_at)
  and one `session.drained` event is written (events.worker_id; payload
  sessionId, workerId, generation). The session UPDATE notifies
  ''s:<workerId>'' (migration 0005), and the worker''s next session heartbeat
  answers 409 session_closed, after which it opens a new session (or, when
  disabled, is refused).
Cost on the hot path: one primary-key probe of worker_sessions per released
  started lease; an active session is neither locked nor written.
Locks: the draining session row FOR NO KEY UPDATE (only when it reads
  `draining`), so two leases of one session ending at once serialize here and
  the later one sees the earlier one released; taken after the caller''s
  attempt -> run -> lease locks. No deadlock: whoever holds a draining
  session''s row (a session heartbeat, ql.end_session / ql.disable_worker /
  ql.open_session closing it) never waits for one of its started leases
  (only ql_private.drain_session waits for leases, and it runs on an active
  session, whose row this function does not lock).
Writes: at most the session row and one event.
Idempotency: a session already closed (or not draining) is left alone.
Errors: none of its own.
Caller: trigger on ql_private.run_leases (run_leases_close_drained only).';


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

COMMENT ON FUNCTION ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) IS 'ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) -> void

Purpose: the first successful authentication of a rotated credential (SPEC
  §16.2) retires its predecessor: the old credential stays valid only "until
  the new one is first used or 24 h pass". Records first_used_at on the new
  credential (so this runs once) and moves the predecessor''s expires_at to
  now; NOTIFY ql_dispatch ''c:<predecessor>'' so every ingress replica''s idle
  view drops what it believed about the old credential.
Inputs: p_credential_id (the rotated credential, authenticated by the caller),
  p_predecessor_id (its rotated_from).
Writes: the two worker_credentials rows (only while first_used_at is NULL).
Locks: the new credential''s row, then the predecessor''s (UPDATE, in that order).
Idempotency: a second call (a concurrent first use) changes nothing.
Errors: none of its own.
Caller: ql_private.authenticate (as ql_owner).';


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

COMMENT ON FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea) IS 'ql_private.digest_equal(a bytea, b bytea) -> boolean

Purpose: compare two digests in time independent of where they differ, so
  response timing cannot be used to guess a stored token or secret digest
  byte by byte.
How: one expression. Both digests become bit strings of their full length
  (hex, then varbit) and are XOR-ed; bit_count of the result is 0 only when
  they are equal. Every step (encode, the varbit input, #, bit_count) walks
  all bytes whatever their values, with no early exit — unlike `=` on bytea
  (memcmp), which stops at the first difference. (The varbit input branches
  on each hex digit''s class, digit or letter, of each value on its own:
  never on whether, or where, the two digests agree.)
Why one SQL expression: LANGUAGE sql, IMMUTABLE, no SET clause, so the
  planner inlines it into the caller''s expression (the credential check runs
  on every worker call); the earlier 32-step plpgsql loop cost ~8x as much.
NULL or different lengths compare unequal (the CASE keeps the XOR, which
  needs equal lengths, from running then). No SQLSTATEs.
Caller: ql.confirm_credentials, ql_private.authenticate, ql_private.lease_verdict,
  ql_private.producer_token.
Locks: none. Pure.';


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

COMMENT ON FUNCTION ql_private.dispatchable_attempt(p_attempt_id uuid, p_now timestamp with time zone) IS 'ql_private.dispatchable_attempt(attempt_id uuid, now_ts timestamptz) -> SETOF integer

Purpose: the attempt half of the candidate rule (SPEC §3.1): one row when the
  attempt is `claimed`, executor remote_worker and its not_before has passed
  at `now_ts`; no row otherwise. Used as `CROSS JOIN LATERAL` in
  candidate_page: a set-returning SQL function with LIMIT is inlined as a
  LATERAL subquery the planner keeps as a per-row index probe.
Why no `SET search_path`: a SET clause prevents inlining; all references are
  schema-qualified and it is not SECURITY DEFINER.
Caller: ql_private.candidate_page, ql_private.class_candidate_page,
  ql_private.pool_candidate_page, ql_private.pool_class_candidate_page,
  ql_private.pool_ready_candidate_page, ql_private.ready_candidate_page.
Locks: none. Read-only. SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.drain_session(p_session_id uuid, OUT released integer, OUT running integer, OUT state text) IS 'ql_private.drain_session(p_session_id uuid) -> (released integer, running integer, state text)

Purpose: start draining a session (ql.end_session / ql.disable_worker with
  drain, SPEC §9.5): it takes no new offer from now on (the session fence
  answers QL015 session_draining), its unstarted live leases are released
  (`session_closed`, runs re-queued at once, ql_private.release_unstarted_leases),
  and its STARTED leases run on: their attempts may still ACK running,
  heartbeat and complete (ql_private.lease_verdict lets a started lease of a
  draining session pass). The session is closed when its last live lease is
  released (ql_private.close_drained_session, the run_leases trigger of
  migration 0018) — at once here when none is left — or it lapses at its
  normal expiry when its worker stops heartbeating it.
Inputs: p_session_id, an `active` session the caller holds FOR UPDATE (so no
  claim of it is in flight, and none can start: claims take the session row
  FOR NO KEY UPDATE and then find it draining).
Returns: released (unstarted leases released), running (live leases left,
  all started), state (`draining`, or `closed` when running = 0).
Writes: the released leases and their runs, the session row (state; closed_at
  when closed at once). The caller writes the event.
Locks: attempt -> run -> lease per released lease (release_unstarted_leases),
  then FOR SHARE on the session''s remaining live leases: that waits for any
  lease change in flight (an ACK, heartbeat, completion or sweep holding the
  lease row) and re-reads the row after it, so the count sees a completion that
  committed meanwhile. Together with the trigger (which locks the session
  only once it reads `draining`, i.e. after this transaction committed) that
  leaves no window in which the last lease ends unseen and the session stays
  draining with nothing left. No deadlock: the lease holders this waits for
  never wait for the session row while it still reads `active`.
Idempotency: none here (the callers skip a session already draining).
Errors: QL001 the session is not active (a caller bug).
Caller: ql.end_session, ql.disable_worker, ql.label_worker (a revoked label).';


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

COMMENT ON FUNCTION ql_private.epoch_ms(p_t timestamp with time zone) IS 'ql_private.epoch_ms(t timestamptz) -> bigint

Purpose: the wire representation of a time (integer milliseconds since the
  epoch, SPEC §4), truncated toward the past so a projection never claims a
  later instant than the database recorded.
STABLE, not IMMUTABLE: extract(epoch FROM timestamptz) is only STABLE, and
  the planner inlines a SQL function only when its body is no more volatile
  than declared.
Why no `SET search_path`: a SET clause stops the planner from inlining a SQL
  function, and this runs several times per projection; inlined it is a plain
  expression. It is not SECURITY DEFINER and only uses pg_catalog functions,
  resolved under the pinned search_path of its (definer) callers.
Caller: any function (projections and answers).
Locks: none. Pure. NULL in, NULL out.';


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

COMMENT ON FUNCTION ql_private.idle_result(p_reason text, p_pages integer, p_candidates integer, p_claim_attempts integer, p_races integer, p_mismatches jsonb, p_truncated boolean) IS 'ql_private.idle_result(reason, pages, candidates, claim_attempts, races, mismatches, truncated) -> jsonb

Purpose: the `idle` envelope of a pull (SPEC §4.2) in one place, so every idle
  path reports the same stats shape. reason ∈ no_candidates | placement_mismatch
  | capacity_full | contention.
Caller: ql.pull_offer, ql.pull_offers, ql_private.scan_and_claim.
Pure.
plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
call, a plpgsql one keeps its plan for the session (this is on the pull hot path).';


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

COMMENT ON FUNCTION ql_private.idle_view_notify() IS 'ql_private.idle_view_notify() -> trigger

Purpose: the NOTIFY half of the ingress idle view (migration 0005).
  Sends on channel `ql_dispatch`, once per distinct payload per transaction
  (PostgreSQL folds duplicate notifications of one transaction):
    TG_ARGV[0] = ''queue''      -> ''q''
    TG_ARGV[0] = ''credential'' -> ''c:<credential_id>'' (old and new row)
    TG_ARGV[0] = ''session''    -> ''s:<worker_id>''     (old and new row)
  Payloads are ids only: never a secret, a digest or a token.
Caller: trigger on ql_private.runs, trigger on ql_private.attempts, trigger on
  ql_private.worker_credentials, trigger on ql_private.worker_sessions (the triggers
  of migration 0005; their WHEN clauses keep the claim path and session heartbeats
  from ever calling it).
Locks: none here; the notification queue lock is taken at COMMIT of the
  calling transaction (which is why the claim path must never notify).
Idempotency: notifications are hints; receiving one twice only invalidates a
  replica''s view twice. SQLSTATEs: QL001 on an unknown TG_ARGV[0] (a bug).';


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

COMMENT ON FUNCTION ql_private.json_object_from_bytes(p_bytes bytea, p_max_bytes integer, p_field text) IS 'ql_private.json_object_from_bytes(bytes bytea, max_bytes integer, field text) -> jsonb

Purpose: the write boundary for canonical JSON documents (capabilities,
  execution revision content). The bytes are what gets hashed and stored, so
  they are checked before anything else trusts them: at most max_bytes, valid
  UTF-8, one JSON object, and no duplicate object key at any depth (SPEC §4:
  duplicates are refused; jsonb alone would silently keep the last one, so the
  check walks the order- and duplicate-preserving json form).
Caller: ql.open_session, ql.publish_revision, ql_private.signature_kid.
Locks: none. Pure.
SQLSTATEs: QL001 NULL, invalid UTF-8, not JSON, not an object, duplicate key,
  or a \u0000 escape (not representable in jsonb); QL002 over max_bytes or
  nested too deeply for the parser. The message names the field, never content.';


--
-- Name: keyset_after(smallint, bigint, uuid, smallint, bigint, uuid); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT (-(p_priority::integer), p_queue_seq, p_id)
           > (coalesce(-(p_after_priority::integer), -2147483648),
              coalesce(p_after_seq, -9223372036854775808),
              coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
$$;


ALTER FUNCTION ql_private.keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid) OWNER TO ql_owner;

--
-- Name: FUNCTION keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid) IS 'ql_private.keyset_after(p_priority, p_queue_seq, p_id, p_after_priority,
                        p_after_seq, p_after_id) -> boolean

Purpose: THE keyset position of the dispatch candidate scans (SPEC §3.1,
  R-CAND): true when the run keyed (p_priority, p_queue_seq, p_id) comes
  after the position (p_after_priority, p_after_seq, p_after_id) in claim
  order, priority DESC, queue_seq, id — one row comparison on the ascending
  key (-priority, queue_seq, id), the key of the keyset indexes
  (runs_candidate_keyset, runs_class_keyset, runs_pool_keyset,
  runs_pool_class_keyset). A NULL position (the first page) is before every
  run: each NULL part stands for the smallest value of its type.
Why a function that costs nothing: LANGUAGE sql, IMMUTABLE, one expression,
  each parameter used once, no SET clause, not SECURITY DEFINER, not STRICT:
  the planner inlines it into the calling query before planning, so the scan
  sees the row comparison itself and uses it as the `Index Cond` of the
  keyset index (docs/EXPLAIN.md) — a plpgsql helper, or any of the above
  broken, would be a per-row filter and read the queue from its head. Every
  scan''s ORDER BY -(priority::integer), queue_seq, id must stay the same key.
Inputs: the run''s priority, queue_seq, id; the position''s (NULL: none).
Writes: none. Locks: none. Errors: none.
Caller: ql_private.candidate_page, ql_private.ready_candidate_page,
  ql_private.class_candidate_page, ql_private.pool_candidate_page,
  ql_private.pool_ready_candidate_page, ql_private.pool_class_candidate_page.';


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

COMMENT ON FUNCTION ql_private.lease_answer(p_lease ql_private.run_leases, p_state text, p_cancel_requested boolean) IS 'ql_private.lease_answer(p_lease, p_state, p_cancel_requested) -> jsonb

Purpose: the `qinglong/lease@v1` body (without `schema`, which the ingress
  adds; SPEC §4.7) from values the caller holds: the lease fields of the offer
  projection (ql_private.lease_json: same names and values as offer@v1
  `lease`), plus `state` = the state of the lease''s own attempt (not the run''s
  current one: after a retry the old lease still reports its failed attempt),
  `startedAtMs` (null before the starting ACK) and `cancelRequested` (the run''s
  flag; how a started worker learns of a cancel). The one definition of that
  shape: ql_private.lease_projection reads the rows and calls it; a lifecycle
  call that just changed the lease (UPDATE … RETURNING) answers with it
  directly, without reading the rows again.
Never contains the lease token or its digest (R-LEASE-2).
Inputs: the lease row; its attempt''s state; its run''s cancel flag.
Writes: none. Locks: none. Errors: none. SQL, so it is inlined.
Caller: ql_private.lease_projection, ql.ack_lease, ql.heartbeat_lease,
  ql.complete_lease.';


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

COMMENT ON FUNCTION ql_private.lease_json(l ql_private.run_leases) IS 'ql_private.lease_json(lease) -> jsonb

Purpose: the `lease` object of the wire contract from a run_leases row —
  {runId, attemptId, workerId, sessionId, sessionGeneration, leaseGeneration,
  leaseVersion, offerId, claimedAtMs, expiresAtMs, updatedAtMs} — the one
  definition behind offer@v1 `lease` (ql_private.offer_json) and lease@v1
  (ql_private.lease_projection, which adds state/startedAtMs/cancelRequested).
Never contains the lease token or its digest (R-LEASE-2).
Pure SQL expression, inlined by the planner.
Caller: ql_private.offer_json, ql_private.lease_answer.
SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.lease_open(p_offer_id uuid, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_lease_version bigint, p_change text, p_lock text, p_seen ql_private.run_leases, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer, OUT category text) IS 'ql_private.lease_open(p_offer_id, p_worker_id, p_session_id, p_generation,
                      p_token_digest, p_lease_version, p_change, p_lock DEFAULT NULL,
                      p_seen DEFAULT NULL)
  -> (lease, attempt, run, ttl, category)

Purpose: the opening every lease lifecycle call shares once it has parsed and
  authenticated its caller (ql.ack_lease, ql.heartbeat_lease,
  ql.complete_lease; SPEC §7; ql.append_log, SPEC §15.1): find the lease by offer id, take the row locks
  the call''s change needs in the one order below, and read the lease, its
  attempt, its run, the lease TTL pinned on the lease by its claim
  (run_leases.lease_ttl_seconds: what a starting ACK or a heartbeat extends
  the lease by; a later task configure does not reach it, SPEC §9.1), its
  session, its revision''s digest and so the fence
  verdict (ql_private.lease_verdict) in ONE statement, so one snapshot, taken
  after those locks. The caller then decides on what it got:
  answer a conflict or an exact replay, raise an illegal transition, or apply
  its change. The lease version is fenced here too, once, for all three
  callers (SPEC §7, see "Version fence" below). Callers read twice: first
  with p_lock NULL (replays, conflicts and illegal transitions are answered
  without a lock or a write: a row lock writes WAL), then, only when a change
  is due, with the lock the change needs, and decide again on the locked rows.
Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest:
  the caller''s proof, already parsed (and the worker authenticated);
  p_lease_version: the version the worker last saw (NOT NULL, >= 1: the
  callers check it before authenticating); p_change: the change the request
  asks for, `starting` | `running` | `start_failed` | `heartbeat` |
  `complete` | `log` (an append to the live log: it never bumps the
  version, so no request is ever a `log` replay of one); p_lock:
    NULL                 no row lock (the first, deciding read);
    ''lease''              the lease row FOR NO KEY UPDATE only: a lease
                         heartbeat changes the lease alone, and every change of a
                         started lease''s attempt (completion, start failure,
                         loss) also releases the lease under the lease''s lock,
                         so no such change can slip in under the heartbeat; the
                         run is only read (its cancel flag is reported as found);
    ''attempt_run_lease''  attempt FOR UPDATE, then run FOR NO KEY UPDATE, then
                         lease FOR UPDATE: an ACK or a completion changes all
                         three.
    ''attempt_lease_share'' attempt FOR KEY SHARE, then lease FOR KEY SHARE: a
                         log append changes neither, but must not overlap
                         any change of the attempt (a completion, a start
                         failure, a loss: each takes the attempt FOR UPDATE
                         and releases the lease FOR UPDATE), so a chunk is
                         stored either before the attempt ends or not at
                         all. KEY SHARE does not conflict with a heartbeat
                         (the lease''s FOR NO KEY UPDATE) nor with another
                         append; the appends of one attempt serialize on its
                         log header (ql.append_log).
  p_seen: the lease row the caller''s first (unlocked) read answered; its id,
  attempt and run never change once written, so they name the rows to lock
  without reading them again. NULL: they are read by the offer id first.
Lock order (why attempt -> run -> lease): it is the order of every other
  writer that waits for these rows: ql.cancel_run and
  ql_private.release_unstarted_leases (session replaced or closed) take the
  attempt, then the run, then the lease. An ACK or completion taking the lease
  first and then waiting for the attempt, while a cancel holding the attempt
  waits for the lease, would deadlock; in one order they queue instead. A
  claim (ql_private.claim_candidate) takes run and attempt with SKIP LOCKED,
  never waiting for them, and only then an expired lease; the sweeper
  (ql.sweep_leases) locks everything with SKIP LOCKED and never waits: neither
  can close a cycle with this order. The re-read after locking is what
  prevents the lost update: a sweeper marking the attempt lost, a cancel or a
  concurrent ACK committed between the first read and the lock is seen, and
  the caller decides again on it.
Version fence (after lease_verdict, on the same snapshot; only when the fences
  answered NULL or lease_terminal): every applied change bumps lease_version
  by one, releases by a completion or start failure included, so the version
  a request carries says which change it follows.
  * p_lease_version = lease_version: the category stays (NULL: the caller may
    apply its change; lease_terminal: nothing is left to change).
  * p_lease_version = lease_version - 1 and the change that produced the
    current version is p_change: category `replay` (the request repeated
    after its answer was lost; the caller answers the current lease, writes
    nothing, and for start_failed/complete first checks the details it made
    were the same ones). The last change is read off the rows, so it needs no
    column of its own: released `completed`/`cancelled` -> complete; released
    `start_failed` -> start_failed; heartbeat_version = lease_version ->
    heartbeat; started and the attempt starting | running -> that ACK (while
    live, a started lease only ever changes by these four, so the first one
    that matches is the last one made). Version 1 is the claim''s own.
  * anything else: `stale_lease_version` on a live lease; a released lease
    keeps `lease_terminal` (the more useful answer).
  Why here: a repeated heartbeat must never extend a lease twice, and an ACK
  or completion the worker decided on an older lease must not be applied to
  a newer one; one rule for the three callers keeps them in step.
Why one statement (not one per row plus the fences'' own four): measured per
  ACK, the two reads were a third of the call (docs/BENCHMARKS.md).
Fences: ql_private.lease_verdict with the lifecycle rules (offer_foreign,
  token_mismatch by constant-time compare, session_replaced, lease_expired,
  lease_terminal, attempt_changed, revision_drift; a live lease past
  expires_at or one released `lost` -> lease_expired). An unknown offer id
  answers one row with NULL lease, attempt and run and category
  `offer_foreign`: exactly what another worker''s offer answers, so a caller
  learns nothing about offers that are not its own.
Writes: none (row locks only, when p_lock is given).
Locks: as p_lock says; nothing with p_lock NULL.
Idempotency: read-only.
Errors: QL001 p_lock not NULL, ''lease'', ''attempt_run_lease'' or
  ''attempt_lease_share'', p_change not one of the six, p_lease_version NULL, p_seen of another offer (caller bugs).
Caller: ql_private.lease_prelude (the start of every lease call: ack and
  complete lock attempt_run_lease, heartbeat lease, append_log
  attempt_lease_share, lease_secrets nothing).';


--
-- Name: lease_prelude(text, bytea, uuid, uuid, bigint, uuid, bytea, bigint, text, text, text, ql_private.run_leases, text, integer, text, jsonb); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text DEFAULT NULL::text, p_seen ql_private.run_leases DEFAULT NULL::ql_private.run_leases, p_outcome text DEFAULT NULL::text, p_exit_code integer DEFAULT NULL::integer, p_reason text DEFAULT NULL::text, p_result jsonb DEFAULT NULL::jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_open record;
BEGIN
    IF p_change IS NULL OR p_change NOT IN ('starting', 'running', 'start_failed', 'heartbeat',
                                            'complete', 'log', 'read') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'change must be starting, running, start_failed, heartbeat, complete, log or read';
    END IF;
    IF p_seen.id IS NULL THEN
        answer := ql_private.authenticate(p_credential_id, p_secret_digest, p_worker_id,
                                          p_action);
        IF answer IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    v_open := ql_private.lease_open(
        p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest, p_lease_version,
        CASE p_change WHEN 'read' THEN 'heartbeat' ELSE p_change END, p_lock, p_seen);
    lease := v_open.lease;
    attempt := v_open.attempt;
    run := v_open.run;
    ttl := v_open.ttl;
    IF v_open.category IS NULL THEN
        RETURN;
    ELSIF v_open.category <> 'replay' THEN
        answer := jsonb_build_object('status', 'conflict', 'category', v_open.category);
    ELSIF p_change = 'read' THEN
        answer := jsonb_build_object('status', 'conflict', 'category', 'stale_lease_version');
    ELSIF (p_change = 'start_failed' AND attempt.reason IS DISTINCT FROM p_reason)
          OR (p_change = 'complete'
              AND (lease.release_reason = CASE p_outcome WHEN 'cancelled' THEN 'cancelled'
                                                         ELSE 'completed' END
                   AND attempt.state = p_outcome
                   AND attempt.exit_code IS NOT DISTINCT FROM p_exit_code
                   AND attempt.reason IS NOT DISTINCT FROM p_reason
                   AND attempt.result IS NOT DISTINCT FROM p_result) IS NOT TRUE) THEN
        -- The change that made the current version, but not with these details.
        answer := jsonb_build_object('status', 'conflict', 'category', 'lease_terminal');
    ELSE
        answer := jsonb_build_object('status', 'idempotent',
                                     'lease', ql_private.lease_projection(lease.id));
    END IF;
END
$$;


ALTER FUNCTION ql_private.lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text, p_seen ql_private.run_leases, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer) OWNER TO ql_owner;

--
-- Name: FUNCTION lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text, p_seen ql_private.run_leases, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer); Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON FUNCTION ql_private.lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text, p_seen ql_private.run_leases, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer) IS 'ql_private.lease_prelude(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
                         p_generation, p_offer_id, p_token_digest, p_lease_version,
                         p_action, p_change, p_lock DEFAULT NULL, p_seen DEFAULT NULL,
                         p_outcome DEFAULT NULL, p_exit_code DEFAULT NULL,
                         p_reason DEFAULT NULL, p_result DEFAULT NULL)
  -> (answer, lease, attempt, run, ttl)

Purpose: THE common start of the lease endpoints (ql.ack_lease,
  ql.heartbeat_lease, ql.complete_lease, ql.append_log, ql.lease_secrets),
  once each has parsed and checked its own inputs: authenticate the
  credential, open the lease (ql_private.lease_open: find it by offer id,
  take the row locks p_lock names, read lease, attempt, run and TTL in one
  snapshot, decide with ql_private.lease_verdict and the lease version
  fence) and answer what ends the call without a change. `answer` NULL: the
  caller may go on with the rows (its own illegal-transition checks, then its
  change); otherwise the caller returns `answer` as it is:
  * the denial envelope of ql_private.authenticate;
  * {"status":"conflict","category":<lease_open''s category>};
  * a replay (the request repeated after its answer was lost):
    {"status":"idempotent","lease":<ql_private.lease_projection>} when the
    change that made the current version is the one asked for, with the same
    details for `start_failed` (the attempt''s reason = p_reason) and
    `complete` (release reason completed | cancelled as p_outcome implies,
    attempt state = p_outcome, exit code, reason, result = p_exit_code,
    p_reason, p_result: IS NOT DISTINCT FROM); else
    {"status":"conflict","category":"lease_terminal"}; for p_change `read`
    {"status":"conflict","category":"stale_lease_version"}.
  The callers that change something read twice, as lease_open says: first
  with p_lock NULL and p_seen NULL (authenticates, answers replays and
  conflicts without a lock or a write), then, only when a change is due,
  with the lock and p_seen = the lease the first read answered, and decide
  again on the locked rows. Model: ql_private.lease_verdict +
  ql_private.lease_open (decide unlocked, lock in one stated order, decide
  again).
Inputs: p_credential_id, p_secret_digest: the credential (checked by
  ql_private.authenticate with p_action, e.g. `lease.ack`) — only when
  p_seen is NULL: a call''s first read; the locked re-read (p_seen given: the
  lease that first read answered) does not authenticate again.
  p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest,
  p_lease_version: the caller''s proof, already parsed and range-checked.
  p_change: lease_open''s change (`starting` | `running` | `start_failed` |
  `heartbeat` | `complete` | `log`), or `read` (ql.lease_secrets: opened as
  `heartbeat`, so the version must be exactly the current one, and a
  heartbeat''s retry is no delivery either: stale_lease_version).
  p_lock, p_seen: as ql_private.lease_open. p_outcome, p_exit_code,
  p_reason, p_result: the details a replay must match (see above); ignored
  for the other changes.
Lock order: ql_private.lease_open''s, unchanged: nothing with p_lock NULL;
  `attempt_run_lease` attempt FOR UPDATE -> run FOR NO KEY UPDATE -> lease
  FOR UPDATE (the order of ql.cancel_run and release_unstarted_leases, so
  none of them can deadlock); `lease` the lease FOR NO KEY UPDATE only;
  `attempt_lease_share` attempt FOR KEY SHARE -> lease FOR KEY SHARE
  (docs/LIFECYCLE.md). Nothing else is locked here.
Writes: one security_audit row when the credential is denied
  (ql_private.authenticate); nothing else (row locks only).
Idempotency: read-only but for the denial''s audit row.
Errors: QL001 p_change not one of the seven, and lease_open''s (unknown lock
  mode, NULL lease version, p_seen of another offer: caller bugs);
  ql_private.authenticate''s.
Caller: ql.ack_lease, ql.heartbeat_lease, ql.complete_lease, ql.append_log,
  ql.lease_secrets.';


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

COMMENT ON FUNCTION ql_private.lease_projection(p_lease_id bigint) IS 'ql_private.lease_projection(lease_id bigint) -> jsonb

Purpose: the `qinglong/lease@v1` body of a lease as stored now (without
  `schema`, which the ingress adds; SPEC §4.7): reads the lease, its attempt
  and its run and answers ql_private.lease_answer (the shape: lease fields,
  `state` of the lease''s own attempt, `startedAtMs`, `cancelRequested`).
Never contains the lease token or its digest (R-LEASE-2). plpgsql (not SQL)
  so its plan is cached per session.
Caller: ql_private.lease_prelude (replays), ql.ack_lease, ql.complete_lease
  (changes that went through the retry policy).
Locks: none. Read-only. SQLSTATEs: none (NULL when the lease does not exist).';


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

COMMENT ON FUNCTION ql_private.lease_verdict(p_lease ql_private.run_leases, p_session ql_private.worker_sessions, p_attempt ql_private.attempts, p_run ql_private.runs, p_revision_digest text, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea, p_now timestamp with time zone, p_lifecycle boolean) IS 'ql_private.lease_verdict(p_lease, p_session, p_attempt, p_run, p_revision_digest,
                         p_worker_id, p_session_id, p_generation, p_token_digest,
                         p_now, p_lifecycle) -> text

Purpose: THE fence verdict on a lease, for an offer replay (SPEC §3.3 step 1,
  ql_private.recover_fence) and for every lease lifecycle call (ACK,
  heartbeat, completion; SPEC §7, ql_private.lease_open). Returns the first
  failing conflict category, in this order, or NULL when every fence holds:
  1 offer_foreign     the lease belongs to another worker
  2 token_mismatch    the token digest differs (constant-time compare,
                      ql_private.digest_equal)
  3 session_replaced  other session/generation, or that session is no longer
                      active or draining and unexpired (replaced, closed or
                      lapsed), or the lease was released because its session
                      went away (replaced, or closed without drain)
    session_draining  the lease''s session is draining (ql.end_session /
                      ql.disable_worker with drain) and the lease never
                      started: the drain released it (or will not let it
                      start). A STARTED lease of a draining session passes
                      this fence: its attempt may still ACK running,
                      heartbeat and complete until it ends.
  4 lease_expired     released as expired, or unstarted and past expires_at
  5 lease_terminal    released for any other reason (completed, lost, …)
  6 attempt_changed   the run moved to another attempt, or the attempt left the
                      state the lease implies (claimed before start, starting/
                      running after)
  7 revision_drift    the run''s pinned revision or its digest differ from the
                      lease''s
  With p_lifecycle (an ACK, heartbeat or completion) one rule differs from a
  replay: a lease past its expires_at accepts no worker operation any more,
  started or not — from that instant it belongs to the sweeper — so a live
  lease past expires_at and a lease the sweeper released as `lost` both answer
  `lease_expired` (never `lease_terminal`): the worker''s answer does not depend
  on the sweeper''s timing.
Why a pure function of rows the caller read: the fences used to read the
  session, attempt, run and revision with four statements of their own, on
  every replay and twice per lifecycle call (before and after its row locks).
  The callers now read them with the lease in ONE statement (one snapshot,
  which also rules out a verdict mixed from two snapshots: a lease read live
  just before a sweeper commits and its attempt read `lost` just after), and
  this expression decides on them. SQL and IMMUTABLE with no query, so the
  planner inlines it into the caller''s statement; `p_now` is the caller''s
  clock_timestamp(), taken after its locks.
Inputs: the lease row; its session (by the lease''s session id), attempt (by
  the lease''s attempt id), run (by the lease''s run id) and the digest of the
  run''s pinned execution revision; the caller''s proof (p_worker_id,
  p_session_id, p_generation, p_token_digest); p_now; p_lifecycle.
Writes: none. Locks: none. Errors: none.
Caller: ql_private.recover_fence, ql_private.lease_open.';


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

COMMENT ON FUNCTION ql_private.lock_run_attempt(p_run_id uuid, OUT run ql_private.runs, OUT attempt ql_private.attempts) IS 'ql_private.lock_run_attempt(p_run_id uuid) -> (run, attempt)

Purpose: lock a run and its current attempt for an operator action
  (ql.cancel_run, ql.retry_run, ql.cancel_runs for a row its first pass
  could not take), in the one lifecycle lock order attempt -> run
  (docs/LIFECYCLE.md "Locks"), and return both rows as locked.
  The current attempt is only known from the run, so it is read first
  without a lock, then the attempt is locked (FOR UPDATE), then the run (FOR
  NO KEY UPDATE). When the run moved to another attempt in between (a retry
  or the retry policy committed while we waited for the old attempt), both
  locks are given back — they were taken in a sub-block that is rolled back —
  and it starts again: locking the new attempt while holding the run would
  take them run -> attempt, and a cancel, retry, ACK or completion holding
  the new attempt while it waits for the run would close a deadlock with us.
Inputs: p_run_id.
Returns: run NULL when the run does not exist (the caller raises its own
  error); attempt NULL when the run has no current attempt.
Writes: none. Locks: the current attempt FOR UPDATE, then the run FOR NO KEY
  UPDATE, both held by the caller''s transaction on return; a wait obeys the
  caller''s lock_timeout (55P03 lock_not_available propagates, nothing held
  from this call).
Idempotency: read-only.
Errors: none of its own (QLR01 is internal: the moved-attempt signal, caught
  here, never raised to a caller).
Caller: ql.cancel_run, ql.retry_run, ql.cancel_runs.';


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

COMMENT ON FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) IS 'ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) -> bytea

Purpose: the stored bytes [p_from, p_to) of an attempt''s live log (SPEC §15),
  reassembled from its chunks (ql_private.attempt_log_chunks): what
  ql.run_log shows and what ql.append_log compares a replayed chunk with.
  The chunks of one attempt are contiguous (each starts where the previous
  one ended: ql.append_log only appends at the stored length), so the first
  chunk needed is the last one starting at or before p_from.
Cost: two range reads of the chunks'' primary key (attempt_id, start_byte):
  one probe for the first chunk, then the chunks up to p_to, nothing else.
Inputs: p_attempt_id; 0 <= p_from <= p_to (the caller bounds them by the
  stored length; bytes past it are simply not there).
Returns the bytes ('''' when the range is empty or nothing is stored there).
Fences: none. Writes: none. Locks: none. Idempotency: read-only.
Errors: none (a range outside the log answers the part of it that exists).
Caller: ql.run_log, ql.append_log.';


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

COMMENT ON FUNCTION ql_private.matching_classes(p_capabilities jsonb) IS 'ql_private.matching_classes(capabilities) -> integer[]

Purpose: the placement classes (migration 0006) that have runs waiting AND
  whose required placement the given worker capabilities satisfy, by the same
  evaluation as every candidate (ql_private.placement_evaluate on
  {required}). A pull calls it only when its first keyset page had no passing
  candidate and reads the classes it returns through
  ql_private.class_candidate_page.
Waiting: the class has a ready queued run (runs_class_keyset) or a scheduled
  queued run that is due at clock_timestamp() (runs_class_due, migration
  0017): ql_private.waiting_classes, a skip scan of each index (one descent
  per class that has such a run, then one past the last), so classes
  without waiting runs — every placement ever enqueued stays a
  class until ql.prune_fleet removes it — cost nothing: 5,000 stale classes
  beside one waiting class cost the pull what one class does
  (docs/BENCHMARKS.md). A class with only future runs costs one more
  descent (its earliest due_at), never an evaluation.
Cost: one index descent per waiting class and index, one placement
  evaluation per waiting class; independent of queue depth and of the number
  of classes ever made.
Plan: no SET clause — the caller''s settings (ql.pull_offer: sequential scans
  off) hold, so the skip scans stay index-driven whatever the statistics.
Caller: ql_private.scan_and_claim.
Locks: none.
  Read-only. SQLSTATEs: QL001 from placement_evaluate (capabilities not an
  object).';


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

COMMENT ON FUNCTION ql_private.offer_json(l ql_private.run_leases, r ql_private.runs, er ql_private.execution_revisions) IS 'ql_private.offer_json(lease, run, revision) -> jsonb

Purpose: the `qinglong/remote-execution-offer@v1` body (without `schema` and
  `status`, which the ingress adds) from a lease row, its run row and its
  pinned execution revision row. Pure: the claim passes the rows it has just
  written or locked, a replay (ql_private.offer_projection) the rows it reads,
  so both answers come from this one definition and are identical.
Only immutable facts of the run are used (ids, priority, created_at), so the
  run row from before the claim''s own state update gives the same JSON.
Never contains the lease token or its digest (R-LEASE-2).
`executionRevision.placement` is omitted for old revisions without one
  (R-REV-2), exactly as in the canonical bytes the content digest covers.
`executionRevision.signature` is {kid, jws} of a signed revision, null for an
  unsigned one (SPEC §16.1); the worker verifies it before it starts anything.
Caller: ql_private.claim_candidate, ql_private.offer_projection. Locks: none.
  SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.offer_projection(p_lease_id bigint) IS 'ql_private.offer_projection(lease_id bigint) -> jsonb

Purpose: the `qinglong/remote-execution-offer@v1` body (without `schema` and
  `status`, which the ingress adds) rebuilt purely from the durable lease, its
  run and its pinned execution revision. The first claim and every replay call
  this same function, which is why a replay returns the very same offer.
Never contains the lease token or its digest (R-LEASE-2).
`executionRevision.placement` is omitted for old revisions without one
  (R-REV-2), exactly as in the canonical bytes the content digest covers.
The JSON itself is built by ql_private.offer_json(lease, run, revision), which
  the claim calls with the rows it already holds — so the first answer and
  every replay come from one definition.
Caller: ql_private.recover_offer. Locks: none. Read-only. SQLSTATEs: none
  (NULL when the lease does not exist).';


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

COMMENT ON FUNCTION ql_private.parse_uuid(p_value text, p_field text) IS 'ql_private.parse_uuid(value text, field text) -> uuid

Purpose: turn an id argument of a ql.* function into a uuid, accepting only the
  lowercase canonical form of SPEC §4, so a malformed id raises our SQLSTATE
  with the field name (never the value) instead of a bare 22P02. The field
  (the wire name, e.g. ''runId'') is also the error''s COLUMN diagnostic, which
  callers map to the `field` of their invalid_input answer (SPEC §9).
Caller: any function (every ql.* function taking an id).
Locks: none. Pure, idempotent.
SQLSTATE: QL001 (COLUMN = field) when NULL or not a lowercase canonical UUID.';


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

COMMENT ON FUNCTION ql_private.placement_class_of(p_revision_id uuid) IS 'ql_private.placement_class_of(revision_id) -> integer

Purpose: the placement class (ql_private.placement_classes, migration 0006)
  of an execution revision: the id of its normalized `required` placement
  ({"executors": ["remote-worker"]} when it has none, R-REV-2), created on
  first use. Runs record it at enqueue so a pull can reach the runs its
  session can take behind a head of runs it cannot (runs_class_keyset).
Writes: at most one placement_classes row (ON CONFLICT DO NOTHING, so
  concurrent enqueues of a new class agree on one id).
Locks: an existing class row FOR KEY SHARE until the caller commits: the
  runs it is about to write reference the class (no foreign key, migration
  0006), and ql.prune_fleet, which deletes classes nothing references, skips
  a class locked so (FOR UPDATE SKIP LOCKED) — and a lookup that waited for a
  prune finds the class gone and creates it again.
Caller: ql.enqueue_runs, ql.retry_run.
SQLSTATEs: QL004 revision not found.';


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

COMMENT ON FUNCTION ql_private.placement_evaluate(p_placement jsonb, p_capabilities jsonb, OUT passed boolean, OUT category text, OUT score integer) IS 'ql_private.placement_evaluate(placement jsonb, capabilities jsonb,
    OUT passed boolean, OUT category text, OUT score integer)

Purpose: decide whether a worker session''s capabilities satisfy a revision''s
  normalized placement (SPEC §3.2, docs/DESIGN.md "Normalized placement") and
  compute its deterministic placementScore.
  * placement NULL (revision written before placement existed, R-REV-2) is
    {"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}},"preferred":[]}.
  * required terms are checked in a fixed order and the first failing one names
    the low-cardinality category: `executor` (a required executor missing from
    capabilities.executors), `label` (a required label key absent or its value not
    in the allowed set), `runtime` (a required runtime absent or not satisfying
    its comparators, ql_private.semver_satisfies). No label values, versions or
    names ever leave this function, so a mismatch can be recorded safely.
  * passed = false => score 0; otherwise score = sum of the weights of preferred
    terms whose labels and runtimes all hold (same rules as required).
  Inputs are trusted stored documents (validated on write by
  validate_placement / validate_capabilities), so shape is not re-checked here;
  missing sub-objects read as empty.
Cost: runs for up to 64 candidates per pull (the pull caches the verdict per
  revision). Executors are one jsonb `@>` (no query); required labels+runtimes
  share one query and all preferred terms another, each skipped when empty.
  Measured on PG 15 (2 vCPU, 6,400 calls): NULL placement 3.8 µs, executors only
  4.2 µs, + one required label 10 µs, + one runtime with 2 comparators 27 µs,
  1 label + 1 runtime required + 2 preferred terms 58 µs per call.
Caller: ql.waiting_runs, ql_private.matching_classes, ql_private.scan_and_claim.
Locks: none. Pure, IMMUTABLE,
  PARALLEL SAFE.
SQLSTATEs: QL001 capabilities NULL or not an object; QL003 only if stored data
  is invalid SemVer (cannot happen for rows that passed validation).';


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
            AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
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
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.pool_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.pool_candidate_page(pools, after_priority, after_seq, after_id, limit,
                               now, snapshot, own) -> SETOF candidate rows

Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
  candidates of the given pools (the pools a worker holds a grant for, SPEC
  §13.1, §13.3), in the same priority DESC, queue_seq, id order and with the
  same candidate conditions as ql_private.candidate_page. Each pool is one
  range scan of runs_pool_keyset (equality on the pool, row comparison on the
  key, migration 0019), limited to limit + 1; the per-pool heads are merged and
  cut to limit + 1. Cost: two index descents per granted pool, whatever other
  pools hold — with 1,000 pools queued and one granted, a page reads that
  pool''s head alone.
Two sources per pool, merged in key order as in candidate_page:
  * ready `queued` runs (due_at IS NULL): runs_pool_keyset;
  * scheduled `queued` runs that came due (due_at <= now): runs_pool_due in
    due_at order, at most 4 x (limit + 1) per pool, then filtered by the
    keyset position; runs not yet due are never read.
  An offer that expired unstarted is not here: the sweeper re-queues it within
  seconds and it is then a ready run of its pool.
Rows a concurrent claim holds are passed over without a lock
  (ql_private.xid_in_progress), as in candidate_page. The claim re-checks every
  fence, the pool grant included, on the locked rows.
Inlinable SQL (no SET clause, nothing volatile in the body).
Caller: ql_private.scan_and_claim.
Writes: none. Locks: none. Errors: none.';


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
            AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
                p_after_priority, p_after_seq, p_after_id)
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
          WHERE ql_private.keyset_after(d.priority, d.queue_seq, d.id,
                p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.pool_class_candidate_page(p_pools uuid[], p_classes integer[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.pool_class_candidate_page(pools, classes, after_priority, after_seq,
                                     after_id, limit, now, snapshot, own)
  -> SETOF candidate rows

Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of queued
  candidates of the given pools (a worker''s grants, SPEC §13.1, §13.3)
  restricted to the given placement classes (the session''s matching classes
  with waiting runs, ql_private.matching_classes), in the same priority DESC,
  queue_seq, id order and with the same candidate conditions as
  ql_private.candidate_page: the class page of a worker without the all-pools
  grant. A pull of such a worker whose page held no candidate it can take
  reads its next pages here, so a head of runs it cannot take in its own pool
  is jumped over instead of starving the runs behind it (SPEC §3.1).
Per (pool, class) pair two sources, merged in key order as in candidate_page:
  * ready `queued` runs (due_at IS NULL): one range scan of
    runs_pool_class_keyset (migration 0024; equality on pool and class, row
    comparison on the key), limited to limit + 1;
  * scheduled `queued` runs that came due (due_at <= now): runs_pool_class_due
    in due_at order, at most 4 x (limit + 1) per pair, then filtered by the
    keyset position; runs not yet due are never read.
  An offer that expired unstarted is not here: the sweeper re-queues it within
  seconds and it is then a ready run of its pool.
Cost: two index descents per (granted pool x matching class) pair and at most
  5 x (limit + 1) index entries read per pair, whatever is queued ahead in
  other classes or other pools — independent of queue depth. The pull''s
  bounds (§3.1: at most 16 pages, limit at most 64) cap the pages this is read
  for; the number of pairs is the worker''s grants times the classes with
  waiting runs its session matches (the same classes the all-pools worker''s
  class page reads, one pool each). Other pools'' runs are never read.
Rows a concurrent claim holds are passed over without a lock
  (ql_private.xid_in_progress), as in candidate_page. The claim re-checks
  every fence, the pool grant included, on the locked rows.
Inlinable SQL (no SET clause, nothing volatile in the body).
Caller: ql_private.scan_and_claim.
Writes: none. Locks: none. Errors: none.';


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

COMMENT ON FUNCTION ql_private.pool_of(p_pool text) IS 'ql_private.pool_of(p_pool text) -> ql_private.pools

Purpose: resolve a pool reference `P/N` (project name / pool name, SPEC §13.1)
  of a ql.* argument to its row. The project part matches
  ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, the pool part ^[a-z0-9][a-z0-9._-]{0,62}$.
Inputs: p_pool (''P/N'').
Fences: the pool exists.
Writes: none. Locks: none (a plain read; the callers lock what they change).
Errors: QL001 (COLUMN pool) NULL or not P/N; QL004 (COLUMN pool) no such pool.
Caller: ql.grant_pool, ql.revoke_pool.';


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
           AND ql_private.keyset_after(r.priority, r.queue_seq, r.id,
               p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.pool_ready_candidate_page(p_pools uuid[], p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.pool_ready_candidate_page(pools, after_priority, after_seq, after_id, limit,
                                     now, snapshot, own)
  -> SETOF (run_id, execution_revision_id, priority, queue_seq)

Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of the
  ready `queued` runs (due_at IS NULL) of the given pools (the pools a worker
  holds a grant for, SPEC §13.1, §13.3), in priority DESC, queue_seq, id order:
  ql_private.pool_candidate_page''s first source alone, as its own statement —
  what ql_private.ready_candidate_page is to candidate_page. A pull reads it
  instead of pool_candidate_page while no scheduled run is due anywhere (the
  steady state; ql_private.scan_and_claim probes runs_due once per pull): a
  plan without the due source is cheaper to start, and start-up is paid on
  every execution (migration 0014).
Each pool is one range scan of runs_pool_keyset (equality on the pool, row
  comparison on the key), limited to limit + 1; the per-pool heads are merged
  and cut to limit + 1: two index descents per granted pool, whatever other
  pools hold.
Candidate: run queued, ready, runtime-owned, not cancel-requested; its current
  attempt `claimed`, remote_worker, not_before passed at `now`; rows a
  concurrent claim holds (xmax in progress in `snapshot`, never `own`) are
  passed over without a lock (ql_private.xid_in_progress). The claim re-checks
  every fence, the pool grant included, on the locked rows.
Inlinable SQL (no SET clause, nothing volatile in the body).
Writes: none. Locks: none. Errors: none.
Caller: ql_private.scan_and_claim.';


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

COMMENT ON FUNCTION ql_private.producer_run(p_project_id uuid, p_run_id text) IS 'ql_private.producer_run(p_project_id uuid, p_run_id text) -> uuid

Purpose: a run a producer names must belong to the token''s project (SPEC
  §13.4). Another project''s run is answered exactly like an unknown one (QL004
  not_found, never a 403): existence is not disclosed.
Inputs: p_project_id (from ql_private.producer_token), p_run_id (lowercase
  canonical UUID).
Fences: runs.project_id = p_project_id.
Writes: none. Locks: none (the action the caller runs next locks the run).
Errors: QL001 malformed run id (COLUMN runId); QL004 unknown or foreign run
  (COLUMN runId).
Caller: ql.producer_cancel_run, ql.producer_retry_run, ql.producer_run_log,
  ql.producer_show_run.';


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

COMMENT ON FUNCTION ql_private.producer_task(p_project_id uuid, p_task text) IS 'ql_private.producer_task(p_project_id uuid, p_task text) -> uuid

Purpose: the task a producer names, confined to the token''s project (SPEC
  §13.4): either a task id (lowercase canonical UUID) or "<project>/<name>".
  Another project''s task, by id or by name, is answered exactly like an
  unknown one (QL004, COLUMN task).
Inputs: p_project_id (from ql_private.producer_token), p_task.
Fences: tasks.project_id = p_project_id.
Writes: none. Locks: none.
Errors: QL001 p_task neither a UUID nor "<project>/<name>" (COLUMN task);
  QL004 unknown or foreign task (COLUMN task).
Caller: ql.producer_enqueue, ql.producer_list_runs.';


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

COMMENT ON FUNCTION ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) IS 'ql_private.producer_token(p_token_id text, p_token_digest bytea, p_scope text) -> uuid

Purpose: the authentication and authorization of every producer call (SPEC
  §13.4): the project token `qlp_<p_token_id>_<secret>` whose SHA-256 digest
  (of the whole token string) is p_token_digest must exist, match, be
  unrevoked and unexpired (clock_timestamp(): checked on every call, so a
  revocation or an expiry stops the token at the next request), and hold
  p_scope. Returns the token''s project id; the caller then confines what it
  reads or writes to that project.
How: one primary-key probe; the stored digest is compared with
  ql_private.digest_equal (constant time). An unknown id still runs one
  comparison (against a zero digest), so timing tells nothing about which
  ids exist.
Inputs: p_token_id, p_token_digest (32 bytes), p_scope (enqueue | read |
  cancel | retry | log).
Fences: digest, revoked_at IS NULL, expires_at > now, p_scope = ANY (scopes).
Writes: none. Locks: none.
Errors: QL030 token_invalid (unknown id, malformed id or digest, wrong
  digest, revoked, expired: one answer for all, 401); QL031 scope_missing
  (a valid token without p_scope, 403). No message ever carries the id or
  the digest.
Caller: ql.producer_cancel_run, ql.producer_enqueue, ql.producer_list_runs,
  ql.producer_retry_run, ql.producer_run_log, ql.producer_show_run.';


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

COMMENT ON FUNCTION ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer, p_after text) IS 'ql_private.project_runs_page(p_project_id uuid, p_states text[], p_limit integer,
                             p_after text) -> jsonb {runs, next}

Purpose: the §9.4 list document of ql.list_runs for every task of one project
  (`GET /v1/runs` of the producer API without a task, SPEC §13.4): the same
  row fields (runId, taskId, project, taskName, pool, state, priority,
  queuedAtMs, notBeforeMs, attempts, updatedAtMs), order (queue_seq DESC),
  cursor and bounds; tests/sql/producer_list_runs.sql pins it equal to
  ql.list_runs'' page where one project holds every run.
Cost: one backward range scan of runs_project_state_seq (project_id, state,
  queue_seq) per state, each stopping after p_limit + 1 rows, merged; then
  one primary-key probe per listed run. No count, no OFFSET.
Inputs: p_project_id (from ql_private.producer_token); p_states (NULL or
  empty = all), p_limit 1..1000, p_after (a previous page''s next) as
  ql.list_runs.
Writes: none (STABLE). Locks: none.
Errors (as ql.list_runs, COLUMN = wire field): QL001 state, after; QL006 limit.
Caller: ql.producer_list_runs.';


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

COMMENT ON FUNCTION ql_private.pull_bounds(p_bounds jsonb, OUT pages integer, OUT page_size integer, OUT claim_attempts integer) IS 'ql_private.pull_bounds(bounds jsonb, OUT pages, OUT page_size, OUT claim_attempts)

Purpose: validate the optional per-pull bounds of SPEC §3.1. NULL or a missing
  key takes the default (2 pages x 8 candidates, 8 claim attempts). A value
  above its hard cap (16 / 64 / 64) is an error, never silently clamped.
Caller: ql.pull_offer, ql.pull_offers.
Locks: none. Pure.
SQLSTATEs: QL001 not an object / unknown key / not an integer / below 1;
  QL002 above the hard cap.';


--
-- Name: ready_candidate_page(smallint, bigint, uuid, integer, timestamp with time zone, pg_snapshot, xid8); Type: FUNCTION; Schema: ql_private; Owner: ql_owner
--

CREATE FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) RETURNS TABLE(run_id uuid, execution_revision_id uuid, priority smallint, queue_seq bigint)
    LANGUAGE sql STABLE
    AS $$
    SELECT r.id, r.execution_revision_id, r.priority, r.queue_seq
      FROM ql_private.runs r
     CROSS JOIN LATERAL ql_private.dispatchable_attempt(r.current_attempt_id, p_now) ok
     WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id,
           p_after_priority, p_after_seq, p_after_id)
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

COMMENT ON FUNCTION ql_private.ready_candidate_page(p_after_priority smallint, p_after_seq bigint, p_after_id uuid, p_limit integer, p_now timestamp with time zone, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.ready_candidate_page(after_priority, after_seq, after_id, limit, now, snapshot, own)
  -> SETOF (run_id, execution_revision_id, priority, queue_seq)

Purpose: one keyset page (limit + 1 rows, so `truncated` is exact) of the
  ready `queued` runs alone (due_at IS NULL), in priority DESC, queue_seq, id
  order: the first source of ql_private.candidate_page, as its own statement.
  A pull reads it instead of candidate_page when the two other sources are
  empty at the pull''s `now` — no scheduled run came due and no offer expired
  unstarted (ql_private.scan_and_claim probes both once per pull) — which is
  the steady state: the sweeper drains both within seconds.
Why its own statement: executor start-up of a plan is paid on every
  execution, and candidate_page''s plan (three merged sources, each a sorted,
  limited subquery with per-row probes) cost more to start than to run on the
  common pull; this plan is one range scan of runs_candidate_keyset with a
  per-row attempt probe (ql_private.dispatchable_attempt).
Candidate: run queued, ready, runtime-owned, not cancel-requested; its current
  attempt `claimed`, remote_worker, not_before passed at `now`; rows a
  concurrent claim holds (xmax in progress in `snapshot`, never `own`) are
  passed over without a lock (ql_private.xid_in_progress), as in
  candidate_page. The claim re-checks every fence on the locked rows.
Inlinable SQL (no SET clause, nothing volatile in the body); the caller pins
  a generic plan without sequential scans. Unordered output is not allowed to
  matter: the caller orders by the key.
Writes: none. Locks: none. Errors: none.
Caller: ql_private.scan_and_claim.';


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

COMMENT ON FUNCTION ql_private.ready_priorities(p_limit integer) IS 'ql_private.ready_priorities(p_limit integer) -> SETOF integer

Purpose: the distinct priorities of the ready queue (queued, runtime-owned,
  not cancel-requested, not scheduled: runs_candidate_keyset''s rows with
  due_at NULL), as negated priorities (-priority, the index''s first key) in
  key order — highest priority first — at most p_limit of them.
  A loose index scan: one descent of runs_candidate_keyset per distinct
  priority, never a walk of the queue, so it costs the same with 10 or
  1,000,000 ready runs. Callers then read each priority''s rows as a key range
  (row comparisons on the index keys, as candidate_page does): an equality on
  the priority expression would be estimated at 0.5 % of the table and
  planned as a bitmap scan of the whole priority.
Inputs: p_limit (>= 0; the callers'' cap on priorities examined).
Fences: none (an operator''s read). Writes: none. Locks: none.
Errors: none. Inlinable SQL, read-only.
Caller: ql.queue_depth, ql.waiting_runs (both SECURITY DEFINER as ql_owner).';


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

COMMENT ON FUNCTION ql_private.recover_fence(l ql_private.run_leases, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_token_digest bytea) IS 'ql_private.recover_fence(lease, worker_id, session_id, generation, token_digest) -> text

Purpose: every fence a replayed offer must pass (SPEC §3.3 step 1); returns the
  first failing conflict category (ql_private.lease_verdict, replay rules), or
  NULL when the offer may be rebuilt. Then the pool grant (SPEC §13.1): when
  the lease''s worker no longer holds a grant for the run''s pool (ql.revoke_pool),
  the replay answers lease_terminal, started lease or not.
Inputs: the lease row (read by its offer id) and the caller''s proof.
Reads the lease''s session, attempt, run and the run''s revision digest in ONE
  statement (one snapshot), then ql_private.lease_verdict decides on them, with
  clock_timestamp() as now.
Writes: none. Locks: none. Errors: none.
Caller: ql_private.recover_offer.';


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

COMMENT ON FUNCTION ql_private.recover_offer(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea) IS 'ql_private.recover_offer(worker_id, session_id, generation, offer_id, token_digest) -> jsonb

Purpose: step 1 of a pull (SPEC §3.3): if a lease with this offer id already
  exists, the worker is retrying a pull whose response it lost. Prove the same
  capability and every fence, then return the *same* offer rebuilt from the
  durable lease: `{"status":"idempotent","offer":…}` — no second lease, no
  second event, no write at all. Any drift: `{"status":"conflict","category":…}`.
  NULL when no lease has this offer id (the caller goes on to claim).
Check order (why): the owning worker first (another worker learns nothing but
  `offer_foreign`), then the token (a wrong token learns nothing about session
  or lease state), then session, lease, attempt and revision fences.
Categories: offer_foreign, token_mismatch, session_replaced, session_draining,
  lease_expired, lease_terminal, attempt_changed, revision_drift.
Caller: ql.pull_offer, ql.pull_offers.
Locks: none. Read-only. SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.refuse_referenced_delete() IS 'ql_private.refuse_referenced_delete() -> trigger

Purpose: the delete half of a foreign key, for the references the claim path
  writes without one (migration 0014): run_leases.attempt_id -> attempts,
  run_leases.session_id -> worker_sessions, run_leases.worker_id -> workers,
  events.run_id -> runs. A foreign key checks every inserted child row with a
  query and a FOR KEY SHARE lock on its parent — four such checks per claim,
  measured at 8-17 % of a pull''s CPU — while the claim already holds (or, for
  the worker, holds the session that pins) every parent row it copies the ids
  from. What the keys still guarded was the other direction: no parent row may
  go while a child references it. This trigger keeps that.
How: AFTER DELETE ... FOR EACH STATEMENT with the deleted rows as transition
  table `gone`: one check per statement, run after the whole statement (as a
  foreign key''s NO ACTION check is), so a statement that deletes the children
  and their parents together (ql.prune_runs, data-modifying CTEs) passes.
  BEFORE TRUNCATE ... FOR EACH STATEMENT refuses emptying the parent while the
  child table has any row.
Arguments (TG_ARGV): [0] child table (schema-qualified), [1] child column,
  [2] the parent''s key column, [3] optional: a condition on the child row
  (only the rows it holds for count as references; the session guard of
  migration 0017 passes ''released_at IS NULL'': only live leases).
Errors: 23503 foreign_key_violation naming the tables, never a row''s values.
Writes: none. Locks: none (reads the child table: one index probe per deleted
  row, through the child column''s index — run_leases (attempt_id,
  lease_generation), events_run, run_leases_session_live_counted for the
  session guard''s live leases; workers are never deleted).
Caller: trigger on ql_private.attempts, trigger on ql_private.worker_sessions,
  trigger on ql_private.workers, trigger on ql_private.runs (the triggers of
  migrations 0014 and 0017).';


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

COMMENT ON FUNCTION ql_private.release_ungranted_leases(p_session_id uuid) IS 'ql_private.release_ungranted_leases(p_session_id uuid) -> integer

Purpose: release every live, UNSTARTED lease of the session whose run''s pool
  its worker no longer holds a grant for (ql.revoke_pool), reason
  `grant_revoked`, and put each run whose current attempt it held back in
  `queued` (a candidate again at once, for a worker that holds the pool).
  Started leases are left alone: they may finish (SPEC §13.1).
Inputs: p_session_id (its row already locked FOR UPDATE by the caller, so no
  claim of the session is in flight and none starts until the caller commits).
Writes: the released leases; their runs -> queued.
Locks: attempt, then run, then lease per lease — the one lifecycle order
  (docs/LIFECYCLE.md "Locks"), as ql_private.release_unstarted_leases.
Errors: none. Returns the number released.
Caller: ql.revoke_pool.';


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

COMMENT ON FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text) IS 'ql_private.release_unstarted_leases(session_ids uuid[], reason text) -> integer

Purpose: release every live, unstarted lease of the given sessions (a session
  replaced or closed) and put each run whose current attempt it held back in
  `queued`, so it is a candidate again at once. This keeps the invariant the
  candidate index relies on: a `dispatching` run always has a live unstarted
  lease (db/functions/candidate_page.sql).
Locks: attempt, then run, then lease — the one lifecycle order
  (docs/LIFECYCLE.md "Locks") of every function that waits for these rows
  (cancel, retry, ACK, completion, prune); claims and the sweeper never wait
  for them — so it can wait on them but never deadlock with them.
Caller: ql.open_session, ql.close_session, ql.disable_worker, ql.end_session,
  ql_private.drain_session.
Returns the number released.
SQLSTATEs: none.';


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

COMMENT ON FUNCTION ql_private.require_digest(p_value bytea, p_field text) IS 'ql_private.require_digest(value bytea, field text) -> bytea

Purpose: refuse a digest argument that is not exactly 32 bytes (SHA-256), so a
  truncated or hex-encoded digest can never be stored or compared.
Caller: ql.ack_lease, ql.append_log, ql.complete_lease, ql.heartbeat_lease,
  ql.issue_credential, ql.lease_secrets, ql.pull_offer, ql.pull_offers,
  ql.rotate_credential.
Locks: none. Pure.
SQLSTATE: QL001 when NULL or not 32 bytes.';


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

COMMENT ON FUNCTION ql_private.require_reason(p_value text, p_field text) IS 'ql_private.require_reason(value text, field text) -> text

Purpose: refuse a reason code that is not low-cardinality and bounded (SPEC
  §4 reasonCode: ^[a-z][a-z0-9_]{0,63}$), so free text (paths, messages,
  labels) can never be stored in attempts.reason or an event payload. NULL
  passes through (the caller picks its default).
Caller: ql.ack_lease, ql.complete_lease. Locks: none. Pure.
SQLSTATE: QL001 (with the field name, never the value) when malformed.';


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

COMMENT ON FUNCTION ql_private.scan_and_claim(p_session ql_private.worker_sessions, p_offer_id uuid, p_token_digest bytea, p_pages integer, p_page_size integer, p_claim_attempts integer) IS 'ql_private.scan_and_claim(p_session, p_offer_id, p_token_digest, p_pages, p_page_size,
                          p_claim_attempts) -> jsonb

Purpose: SPEC §3.3 steps 3–4 for a session that passed its fences: the page
  loop of a pull. Reads at most `p_pages` keyset pages of `p_page_size`
  candidates (each page reads p_page_size + 1 rows so `truncated` is exact)
  from one of three sources, each its own statement (see "Page source"
  below), evaluates placement once per distinct execution
  revision, and after each page hands its passing candidates to the claim step
  (ql_private.claim_page: claim order, session lock, SKIP LOCKED claims), at
  most `p_claim_attempts` claim attempts in all; the next page is read only
  when this one yielded no claim. When a first page had no passing candidate
  at all, the following pages come from the placement classes the session
  matches (ql_private.matching_classes, read through
  ql_private.class_candidate_page — for a worker without the all-pools
  grant ql_private.pool_class_candidate_page, the same within its granted
  pools — from the head of the key order again;
  ready and due runs of those classes): a head of runs it cannot take, ready
  or due, is jumped over instead of read page by page. Returns {status: offered, offer} or
  {status: idle, reason, stats, truncated}.
Page source: for a worker without the all-pools grant, a pool page over
  the pools it holds a grant for — ql_private.pool_candidate_page (ready
  and due runs) while a scheduled run is due or an offer expired unstarted,
  else ql_private.pool_ready_candidate_page (ready runs alone) (SPEC
  §13.1, §13.3: the keyset is per pool, runs_pool_keyset leads with the pool,
  so other pools'' runs are never read; a worker without any grant reads
  nothing and is idle `no_candidates`), and once the pull switched to its
  classes, ql_private.pool_class_candidate_page (migration 0024: one range
  scan of runs_pool_class_keyset and of runs_pool_class_due per granted pool
  and matching class — the class page within its pools, so a blocked head in
  its own pool is jumped over too, SPEC §3.1). Otherwise the class page once
  the pull switched to its classes; else
  ql_private.candidate_page (ready runs, due scheduled runs and expired offers
  merged) while a scheduled run is due or an offer expired unstarted at the
  pull''s `now` — two index probes (runs_due, run_leases_unstarted_expiry),
  once per pull; else, the steady state, ql_private.ready_candidate_page (the
  ready runs alone). Why three statements, not one with all sources under
  one-time filters: a plan is started on every execution, branches that do
  not run included, and that start-up was the largest single cost of a pull
  (perf on a pull''s backend; migration 0014). The two probes cannot change
  what a page holds: sources they find empty at `now` are empty in the page.
Inputs: p_session (the session row, fences passed), p_offer_id, p_token_digest
  (what a claim writes the lease with), p_pages, p_page_size,
  p_claim_attempts (bounds already checked by ql_private.pull_bounds).
Fences: placement (ql_private.placement_evaluate) here; the session re-check
  and every candidate fence in the claim step.
Writes: none unless a claim is attempted: an idle pull generates zero WAL.
Locks: none here; the claim step locks the session row before the pull''s first
  claim (FOR NO KEY UPDATE) and each try''s run + attempt (SKIP LOCKED).
Cost: per page, ONE statement reads the keyset page; placement is evaluated
  once per distinct revision per pull (verdicts kept in arrays — a plain loop
  measured ~20 % cheaper per pull than one statement with CTEs and window
  functions, whose executor start-up dominated); then one claim step, whose
  every try is a single SKIP LOCKED statement. Stats: `claimAttempts` counts
  the candidates a claim locked and re-checked (at most p_claim_attempts);
  `races` every candidate lost to a competing claim — passed over because it
  was locked or had been claimed since the scan, or locked but no longer
  passing its fences.
Errors: QL010–QL014 from the session re-check.
Caller: ql.pull_offer, ql.pull_offers (which pin search_path, a generic plan and no
  sequential scans for everything below it; in the same call: one round trip).';


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

COMMENT ON FUNCTION ql_private.semver_compare(p_a text, p_b text) IS 'ql_private.semver_compare(a text, b text) -> integer (-1 | 0 | 1)

Purpose: SemVer 2.0.0 precedence of two versions (semver.org §11): numeric
  MAJOR/MINOR/PATCH of any size, prerelease identifiers compared numerically or
  by ASCII, fewer identifiers lower, a prerelease below its release; build
  metadata ignored. Must agree with the `semver` package on every input
  (tests/py/test_semver_sql_property.py).
How: both sides become precedence keys (ql_private.semver_parse), whose byte
  order under COLLATE "C" is SemVer precedence, so the database collation can
  never change the answer.
Caller: none (tests and tooling; placement uses ql_private.semver_satisfies).
Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
SQLSTATE: QL003 when either side is NULL or not SemVer 2.0.0 (field `a` / `b`).';


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

COMMENT ON FUNCTION ql_private.semver_parse(p_version text, p_field text) IS 'ql_private.semver_parse(version text, field text DEFAULT ''version'') -> text

Purpose: validate a SemVer 2.0.0 string and turn it into its *precedence key*:
  a text whose byte order (COLLATE "C") is exactly SemVer 2.0.0 precedence, so
  comparing two versions is one memcmp instead of a re-parse per comparison
  (placement runs for up to 64 candidates per pull, SPEC §3.1/§3.2).
  Key layout (build metadata is dropped: it never affects precedence):
    num(MAJOR) num(MINOR) num(PATCH) ( chr(3)                       -- release
                                     | chr(2) { ident chr(1) }... ) -- prerelease
    num(d)  = lpad(length(d), 10, ''0'') || d   -- digits have no leading zeros, so
              (length, digits) orders them numerically at any size (no int/numeric
              cast, nothing can overflow; 10 digits cover any text length)
    ident   = chr(5) || num(id)   for a numeric identifier
            | chr(6) || id        for an alphanumeric one (ASCII order under "C")
  chr(2) < chr(3) puts a prerelease below its release; chr(5) < chr(6) puts numeric
  identifiers below alphanumeric ones; the chr(1) terminator is below every
  identifier character, so a shorter identifier (or identifier list) that is a
  prefix of a longer one sorts first. num() is self-delimiting, so
  `left(key, strpos(key, chr(2)))` is "same MAJOR.MINOR.PATCH, with a prerelease"
  (used by semver_satisfies for node-semver''s prerelease rule).
Caller: ql_private.semver_compare, ql_private.semver_satisfies,
  ql_private.validate_placement, ql_private.validate_capabilities.
Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
SQLSTATE: QL003 when NULL or not SemVer 2.0.0; the message names the field, the
  specific defect and at most 64 printable characters of the input (versions are
  not secret; the cap keeps a hostile value out of logs).';


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

COMMENT ON FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb) IS 'ql_private.semver_satisfies(version text, comparators jsonb) -> boolean

Purpose: does `version` satisfy a normalized runtime range (docs/DESIGN.md
  "Normalized placement"): a JSON array of plain comparators `OPversion`,
  OP in >=, >, <=, <, =, full MAJOR.MINOR.PATCH[-pre] without build metadata.
  Semantics are node-semver''s (SPEC §4.5):
    * every comparator holds by SemVer 2.0.0 precedence (AND), and
    * if `version` has a prerelease, at least one comparator names the same
      MAJOR.MINOR.PATCH *with* a prerelease. So 1.2.3-beta.2 satisfies
      [">=1.2.3-beta.1","<2.0.0-0"] but 1.3.0-beta does not, and an empty array
      (any version) admits every release but no prerelease — exactly as
      node-semver''s `*` without includePrerelease.
  All comparators are parsed even after one fails, so a malformed comparator
  is reported no matter where it sits (errors do not depend on the version).
Caller: ql_private.placement_evaluate (hot: up to 64 candidates per pull).
Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
SQLSTATEs: QL001 comparators not a JSON array / an element not a string;
  QL003 version invalid, a comparator without a valid operator, with build
  metadata, or with an invalid version (field `comparators[i]`).';


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

COMMENT ON FUNCTION ql_private.session_claim_lock(s ql_private.worker_sessions) IS 'ql_private.session_claim_lock(session) -> boolean

Purpose: right before a pull''s first claim, lock the session row (FOR NO KEY
  UPDATE) and re-verify it on the locked row by clock_timestamp(): still active,
  same generation, unexpired, capabilities digest unchanged, and a free slot
  (every live lease counts, started or not; an unstarted one only while
  unexpired). Concurrent pulls of one session serialize here, so slots can
  never be exceeded and a session replaced meanwhile can never gain a lease.
Returns false when no slot is free. Only taken when a claim will be attempted,
  so idle pulls take no row lock (a row lock writes WAL).
Caller: ql_private.claim_page.
Locks: the worker_sessions row.
SQLSTATEs: QL010–QL013, QL015 (session fences), QL014 (capabilities digest drift).';


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

COMMENT ON FUNCTION ql_private.session_fence(p_worker_id uuid, p_session_id uuid, p_generation bigint, p_lock boolean) IS 'ql_private.session_fence(worker_id, session_id, generation, lock) -> worker_sessions

Purpose: the session fence shared by heartbeat/close and the pull/lease path
  (SPEC §3.3 step 2). Returns the session row when it exists for this worker,
  its generation is exactly `generation`, it is active and its lease has not
  expired by clock_timestamp(). Otherwise raises, first failing check wins:
    QL010 session_not_found  no such session for this worker (another worker''s
                             session looks exactly like a missing one)
    QL011 session_replaced   generation differs, or the session is no longer
                             active and a newer generation exists for the worker
    QL013 session_closed     closed (not replaced)
    QL015 session_draining   draining and unexpired (not replaced; a
                             lapsed draining session is QL012; ql.end_session /
                             ql.disable_worker with drain): it takes no new
                             offer, its started leases run on; a distinct
                             answer so the worker stops pulling instead of
                             opening a new session (which would replace this
                             one and fence off its running leases)
    QL012 session_expired    active or draining, but expires_at <= clock_timestamp()
Locks: lock = false reads without a row lock: the pull path''s first check,
  so an idle pull takes no lock (a row lock writes WAL) and never waits for a
  heartbeat. lock = true takes FOR NO KEY UPDATE on the session row, taken by a
  pull only right before it claims (ql_private.session_claim_lock):
  * concurrent claims of one session serialize on it, so live-lease slot
    accounting cannot be exceeded;
  * it conflicts with the FOR UPDATE that ql.open_session (replacement) and
    ql.close_session take before closing the row: a claim holding it finishes
    first (and the close then releases the new lease), and a claim that waited
    gets the row''s newest version (READ COMMITTED re-check) and fails here with
    QL011/QL013/QL015, so no lease is ever inserted for a closed or draining
    session;
  * it also conflicts with a heartbeat''s UPDATE of the row: that wait is one
    short transaction long and happens only on the claim path, never on an
    idle pull (plain KEY SHARE would not serialize the slot check).
Caller: ql.heartbeat_session, ql.pull_offer, ql.pull_offers,
  ql_private.session_claim_lock.
Idempotency: read-only (a row lock at most).
SQLSTATEs: QL001 NULL worker/session id or generation NULL or < 1;
  QL010/QL011/QL012/QL013/QL015 as above.';


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

COMMENT ON FUNCTION ql_private.session_live_leases(p_session_id uuid) IS 'ql_private.session_live_leases(session_id uuid) -> integer

Purpose: slot accounting (SPEC §3.3 step 2): the session''s live leases, started
  or not; an unstarted lease stops counting once it expired (its run is a
  candidate again).
Caller: ql.pull_offer, ql.pull_offers, ql_private.session_claim_lock.
Locks: none. Read-only.
plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
call, a plpgsql one keeps its plan for the session (this is on the pull hot path).';


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

COMMENT ON FUNCTION ql_private.session_projection(s ql_private.worker_sessions) IS 'ql_private.session_projection(session) -> jsonb

Purpose: the `qinglong/session@v1` body without schema (SPEC §5): workerId,
  sessionId, generation, expiresAtMs, capabilitiesDigest, heartbeatIntervalMs.
  One projection so open/heartbeat/close can never drift apart.
Caller: ql.open_session, ql.heartbeat_session, ql.close_session.
Locks: none. Pure. SQLSTATEs: none.
plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
call, a plpgsql one keeps its plan for the session (this is on the pull hot path).';


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

COMMENT ON FUNCTION ql_private.settings(OUT session_ttl interval, OUT heartbeat_interval_ms integer, OUT default_pages integer, OUT default_page_size integer, OUT default_claim_attempts integer, OUT max_pages integer, OUT max_page_size integer, OUT max_claim_attempts integer, OUT idle_retry_after_ms integer) IS 'ql_private.settings() -> record of protocol constants

Purpose: one place for the protocol''s timing constants and scan bounds
  (SPEC §3.1, §5), so functions and tests read the same numbers.
Caller: ql.heartbeat_session, ql.open_session, ql_private.pull_bounds,
  ql_private.session_projection.
Locks: none. Pure.';


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

COMMENT ON FUNCTION ql_private.signature_kid(p_signature text) IS 'ql_private.signature_kid(p_signature text) -> text

Purpose: the shape check of a revision signature (SPEC §16.1) at the write
  boundary, and the `kid` it names. A signature is the detached compact JWS
  `base64url(header)..base64url(signature)`: the header part unpadded
  base64url of a UTF-8 JSON object with exactly {alg: "EdDSA", kid} (no
  duplicate key), kid ^[A-Za-z0-9_-]{1,128}$, and an Ed25519 signature of
  64 bytes (86 base64url characters). The signature itself is not verified
  here (the database holds no trusted key; the worker verifies).
Inputs: p_signature (NULL: unsigned, answers NULL).
Fences: the shape above. Writes: none. Locks: none. Pure.
Errors: QL001 (COLUMN signature) when malformed; the message never quotes it.
Caller: ql.publish_revision.';


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

COMMENT ON FUNCTION ql_private.validate_capabilities(p_capabilities jsonb) IS 'ql_private.validate_capabilities(capabilities jsonb) -> void

Purpose: defense in depth at the database write boundary (SPEC §3.2, §4.4):
  refuse a stored capabilities document that is not exactly
  qinglong/worker-capabilities@v1 in canonical form (docs/DESIGN.md
  "Capabilities", schemas/qinglong.worker-capabilities.v1.json), even if the
  ingress let it through:
    {"schema": "qinglong/worker-capabilities@v1",
     "executors": [1..8 names ^[a-z0-9][a-z0-9-]{0,62}$, sorted, unique],
     "labels":    {key ^[a-z0-9][a-z0-9._/-]{0,62}$: value 1..128 chars} (<= 32),
     "runtimes":  {name ^[a-z0-9][a-z0-9._-]{0,62}$: SemVer 2.0.0, <= 128 chars} (<= 16),
     "slots":     integer 1..256}
  Label values refuse C0/C1 controls, line/paragraph separators and invisible
  format/bidi characters. Executors must be sorted because the canonical form
  sorts them (the stored digest covers that form). Counts are checked before
  elements.
Caller: ql.open_session (before storing a session''s capabilities). Locks: none. Pure.
SQLSTATEs (message names the JSON path, e.g. capabilities.runtimes["python"]):
  QL001 not an object, unknown/missing field, wrong schema id, wrong type, bad
        name/key/value characters, empty or unsorted/duplicate executors,
        slots not an integer or < 1;
  QL002 executors > 8, labels > 32, runtimes > 16, value > 128 chars,
        version > 128 chars, slots > 256;
  QL003 a runtime version that is not SemVer 2.0.0.';


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

COMMENT ON FUNCTION ql_private.validate_placement(p_placement jsonb) IS 'ql_private.validate_placement(placement jsonb) -> void

Purpose: defense in depth at the database write boundary (SPEC §3.2): refuse any
  placement that is not exactly the normalized form of docs/DESIGN.md
  ("Normalized placement", schemas/qinglong.placement.v1.json), even if the
  ingress/publish compiler let it through. The normalized form is what the
  content digest covers, so it must be unique per meaning: executors and label
  value sets must be sorted (byte order = Python''s code-point sort) and unique.
    {"required": {"executors": [1..8 names ^[a-z0-9][a-z0-9-]{0,62}$, sorted, unique],
                  "labels":    {key: [1..32 values, sorted, unique]}   (<= 32 keys),
                  "runtimes":  {name: [<= 32 comparators "OPversion"]} (<= 16 names)},
     "preferred": [<= 16 {"weight": 1..100, "labels": {...}, "runtimes": {...}}]}
  label key ^[a-z0-9][a-z0-9._/-]{0,62}$; label value 1..128 characters without
  C0/C1 controls, line/paragraph separators or invisible format/bidi characters;
  runtime name ^[a-z0-9][a-z0-9._-]{0,62}$; comparator OP in >=,>,<=,<,= followed
  by a SemVer 2.0.0 version without build metadata, <= 160 characters. Comparator
  arrays may repeat a comparator (harmless under AND; the schema allows it).
  Counts are checked before elements, so an oversize document is refused
  before any per-element work.
Caller: ql.publish_revision (before storing a revision). Locks: none. Pure.
SQLSTATEs (message names the JSON path, e.g. placement.preferred[2].labels["disk"][0]):
  QL001 not an object/array/string/integer where one is required, unknown or
        missing field, empty set, bad name/key/value characters, duplicates,
        unsorted set, weight outside 1..100;
  QL002 a set or string above its cap (executors 8, labels 32, values 32,
        value 128 chars, runtimes 16, comparators 32, comparator 160 chars,
        preferred 16);
  QL003 a comparator that is not OP + SemVer 2.0.0 (or carries build metadata).';


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

COMMENT ON FUNCTION ql_private.validate_result(p_result jsonb) IS 'ql_private.validate_result(p_result jsonb) -> jsonb

Purpose: check the `result` of a lease completion (SPEC §9.3) before it is
  stored on the attempt: an object with exactly the keys
    exitCode    optional (absent or null), an integer -2147483648..2147483647
    durationMs  an integer >= 0 (bigint range)
    outputTail  a string of at most 8192 bytes in UTF-8 (the last <= 8 KiB of
                the command''s combined output, invalid bytes already replaced
                by the worker)
    outputBytes an integer >= 0 (bigint range)
    logBytes    optional (absent or null), an integer >= 0 (bigint range):
                the byte length of the command''s whole log (SPEC §15.2;
                ql.run_log compares the stored log with it)
    limits      optional (absent or null), what the per-run isolation
                enforced (SPEC §11; checked by
                ql_private.validate_result_limits): an object with exactly
                  mechanism      "cgroup" | "rlimit"
                  uid            null | integer 0..4294967295
                  maxProcesses, maxOpenFiles, maxMemoryBytes
                                 null | integer >= 0 (bigint range)
                  exceeded       an array of distinct values from
                                 "processes", "memory", "openFiles"
  and nothing else. Size: the tail is the only unbounded-looking part
  (<= 8 KiB); limits is at most a few hundred bytes, so a result stays
  well inside the 16 KiB of a complete request. Returns the object unchanged (NULL passes through: a
  completion without a result). Everything else raises, naming the field in
  the message; the COLUMN diagnostic is always ''result'' (the wire field).
Inputs: p_result (jsonb, as parsed by the ingress).
Fences: none. Writes: none. Locks: none. Idempotency: pure.
Errors: QL001 (COLUMN ''result'') for anything but the shape above.
Caller: ql.complete_lease.';


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

COMMENT ON FUNCTION ql_private.validate_result_limits(p_limits jsonb) IS 'ql_private.validate_result_limits(p_limits jsonb) -> text

Purpose: check the `limits` of a completion result (SPEC §11, §9.3): what
  the worker''s per-run isolation enforced and which limits the command hit.
  An object with exactly the keys
    mechanism       "cgroup" | "rlimit"
    uid             null | an integer 0..4294967295 (the uid the command ran as)
    maxProcesses    null | an integer >= 0 (bigint range)
    maxOpenFiles    null | an integer >= 0 (bigint range)
    maxMemoryBytes  null | an integer >= 0 (bigint range)
    exceeded        an array of distinct values from "processes", "memory",
                    "openFiles" (possibly empty)
  all of them present (null where a limit was not set).
Returns NULL when the object is well-formed, else the problem, naming the
  field (ql_private.validate_result raises it as QL001 COLUMN result).
Inputs: p_limits (not NULL: the caller passes only a present, non-null value).
Fences: none. Writes: none. Locks: none. Idempotency: pure.
Errors: none raised here.
Caller: ql_private.validate_result.';


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

COMMENT ON FUNCTION ql_private.validate_secret_refs(p_project text, p_spec jsonb) IS 'ql_private.validate_secret_refs(p_project text, p_spec jsonb) -> void

Purpose: the publish fence of a command''s `secrets` (SPEC §14.2):
  spec.secrets is an object of at most 16 entries ENV_NAME
  (^[A-Za-z_][A-Za-z0-9_]{0,127}$) -> secret name (^[a-z][a-z0-9_.-]{0,63}$);
  no ENV_NAME is also a key of spec.env (the run''s environment would hold
  two values for it); every named secret exists in project p_project now.
  The revision pins names only: a value set later is the one delivered.
Inputs: p_project (the publishing project''s name; it may not exist yet, then
  it has no secret), p_spec (the revision''s spec, with a `secrets` key).
Fences: as above. Writes: none. Locks: none (plain reads).
Errors: QL001 COLUMN secrets: not an object of strings, too many, a
  malformed name, an env name in both (named), a secret the project does not
  have (named, in C order: the first one).
Caller: ql.publish_revision.';


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

COMMENT ON FUNCTION ql_private.waiting_classes(p_due_by timestamp with time zone) IS 'ql_private.waiting_classes(p_due_by timestamptz) -> SETOF integer

Purpose: the placement classes (migration 0006) that have runs waiting: a
  ready queued run (runs_class_keyset) or a scheduled queued run due by
  p_due_by (runs_class_due, migration 0017; ''infinity'' = any scheduled run).
  Found by a skip scan of each index — a recursive query, one descent per
  class that has such a run, then one past the last — so classes without
  waiting runs cost nothing however many were ever made; a scheduled class
  costs one more descent (its earliest due_at).
Inputs: p_due_by (the pull''s now; ''infinity'' for retention).
Cost: independent of queue depth and of the number of classes ever made.
Inlinable SQL (no SET clause, nothing volatile): the caller''s settings hold
  (ql.pull_offer: sequential scans off), so the skip scans stay index-driven.
Writes: none. Locks: none. Errors: none.
Caller: ql_private.matching_classes (the pull''s class fallback),
  ql.prune_fleet (classes that must be kept).';


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

COMMENT ON FUNCTION ql_private.xid_in_progress(p_xid xid, p_snapshot pg_snapshot, p_own xid8) IS 'ql_private.xid_in_progress(xid, snapshot, own) -> boolean

Purpose: whether a tuple''s 32-bit xmax names a transaction that is still in
  progress in `snapshot` — i.e. the row is locked or being updated right now
  by a concurrent claim. candidate_page uses it to pass over such rows without
  taking a lock (a lock writes WAL; an idle pull must not).
A 32-bit xid is widened against the snapshot''s epoch: it is taken as
  xmin + ((xid - xmin) mod 2^32). An xid more than 2^31 behind xmin (older, so
  finished) or 0 (no xmax) is not in progress; one at or above the snapshot''s
  xmax counts as in progress only within 4096 of it (transactions that took
  an xid after the snapshot). That bound keeps a MultiXactId in xmax — which
  the xmax column shows as a plain number from another counter — from being
  read as a far-future transaction and hiding a free row for long: at worst it
  is passed over while the xid counter is within 4096 below it.
`own` is the caller''s own transaction id (pg_current_xact_id_if_assigned(),
  NULL before it wrote anything): rows this transaction itself locked or
  wrote are never "held by someone else".
It is a hint, never a fence: the claim re-checks every row under FOR NO KEY
  UPDATE SKIP LOCKED.
Pure SQL expression, inlined by the planner.
Caller: ql_private.candidate_page, ql_private.class_candidate_page,
  ql_private.pool_candidate_page, ql_private.pool_class_candidate_page,
  ql_private.pool_ready_candidate_page, ql_private.ready_candidate_page.
  SQLSTATEs: none.';


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
-- Name: INDEX attempts_pkey; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.attempts_pkey IS 'Rule: an attempt''s identity (runs.current_attempt_id and attempt_logs reference it). Serves: the dispatchable check of every candidate page (ql_private.dispatchable_attempt, ql_private.ready_candidate_page, ql_private.candidate_page), the claim (ql_private.claim_candidate), the lease read (ql_private.lease_open), ql_private.apply_retry. Plan: "Steady-state page: ready runs only (limit 8 + 1)"; Plan: "The claim (ql_private.claim_candidate)".';


--
-- Name: INDEX attempts_run_id_attempt_no_key; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.attempts_run_id_attempt_no_key IS 'Rule: attempt numbers are unique per run (a concurrent second retry of one attempt fails). Serves: the next attempt number of ql.retry_run, the attempts of a run in ql.show_run and ql.prune_runs.';


--
-- Name: events_fleet; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX events_fleet ON ql_private.events USING btree (created_at) WHERE (run_id IS NULL);


--
-- Name: INDEX events_fleet; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.events_fleet IS 'Serves: the fleet events (no run) oldest first (ql.prune_fleet).';


--
-- Name: INDEX events_pkey; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.events_pkey IS 'Rule: an event''s identity and order. Serves: the batched delete of ql.prune_fleet.';


--
-- Name: events_run; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX events_run ON ql_private.events USING btree (run_id, id);


--
-- Name: INDEX events_run; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.events_run IS 'Serves: a run''s events in order (ql.show_run), ql.prune_runs, the delete guard of runs (ql_private.refuse_referenced_delete).';


--
-- Name: project_tokens_project; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX project_tokens_project ON ql_private.project_tokens USING btree (project_id, created_at);


--
-- Name: INDEX run_leases_attempt_id_lease_generation_key; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_attempt_id_lease_generation_key IS 'Rule: lease generations are unique per attempt. Serves: the last generation of the claimed attempt (ql_private.claim_candidate), the delete guard of attempts (ql_private.refuse_referenced_delete), ql.show_run. Plan: "The claim (ql_private.claim_candidate)".';


--
-- Name: run_leases_claimed; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_claimed ON ql_private.run_leases USING btree (claimed_at);


--
-- Name: INDEX run_leases_claimed; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_claimed IS 'Serves: the offers per minute (ql.throughput).';


--
-- Name: run_leases_live_expiry; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_live_expiry ON ql_private.run_leases USING btree (expires_at) WHERE (released_at IS NULL);


--
-- Name: INDEX run_leases_live_expiry; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_live_expiry IS 'Serves: the live leases by expiry, oldest first (ql.sweep_leases).';


--
-- Name: INDEX run_leases_offer_id_key; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_offer_id_key IS 'Rule: one lease per offer id (a replayed pull finds its lease, never a second one). Serves: the lease read of every ACK, heartbeat and completion (ql_private.lease_open), the replay check of ql.pull_offer, ql_private.recover_offer. Plan: "Lease lifecycle read (ACK, heartbeat, completion)".';


--
-- Name: run_leases_one_live; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE UNIQUE INDEX run_leases_one_live ON ql_private.run_leases USING btree (attempt_id) WHERE (released_at IS NULL);


--
-- Name: INDEX run_leases_one_live; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_one_live IS 'Rule: at most one live (unreleased) lease per attempt; a second live lease for an attempt aborts the claim that would write it. Serves: the live lease of a dispatching candidate whose offer expired unstarted (ql_private.claim_candidate). Plan: "The claim (ql_private.claim_candidate)".';


--
-- Name: INDEX run_leases_pkey; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_pkey IS 'Rule: a lease''s identity. Serves: the by-id update after the lease read in ql.ack_lease, ql.heartbeat_lease, ql.complete_lease, ql.sweep_leases, ql.cancel_run, ql.cancel_runs, ql_private.drain_session.';


--
-- Name: run_leases_session_live_counted; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_session_live_counted ON ql_private.run_leases USING btree (session_id) INCLUDE (started_at, expires_at) WHERE (released_at IS NULL);


--
-- Name: INDEX run_leases_session_live_counted; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_session_live_counted IS 'Serves: a session''s live leases, counted index-only: the slot check of ql.pull_offer and ql.pull_offers, ql_private.session_live_leases, ql.live_sessions, ql.list_workers, ql.waiting_runs, ql.status_snapshot, ql_private.release_unstarted_leases. Plan: "A pull while a scheduled run is due".';


--
-- Name: run_leases_unstarted_expiry; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX run_leases_unstarted_expiry ON ql_private.run_leases USING btree (expires_at) WHERE ((released_at IS NULL) AND (started_at IS NULL));


--
-- Name: INDEX run_leases_unstarted_expiry; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.run_leases_unstarted_expiry IS 'Serves: the offers that expired unstarted: the probe of ql_private.scan_and_claim, the expired-offer source of ql_private.candidate_page, ql_private.release_unstarted_leases, ql.idle_probe. Plan: "First keyset page (limit 8 + 1)".';


--
-- Name: runs_candidate_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_candidate_keyset ON ql_private.runs USING btree (((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: INDEX runs_candidate_keyset; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_candidate_keyset IS 'Serves: the ready runs of a pull in keyset order (ql_private.ready_candidate_page, ql_private.candidate_page), ql.idle_probe, ql_private.ready_priorities, ql.waiting_runs, ql.queue_depth, ql.status_snapshot. Plan: "Steady-state page: ready runs only (limit 8 + 1)"; Plan: "First keyset page (limit 8 + 1)".';


--
-- Name: runs_class_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_class_due ON ql_private.runs USING btree (placement_class, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: INDEX runs_class_due; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_class_due IS 'Serves: the due scheduled runs of one placement class (ql_private.class_candidate_page), ql_private.matching_classes, ql_private.waiting_classes, the class-in-use check of ql.prune_fleet. Plan: "Placement-class page with scheduled runs due".';


--
-- Name: runs_class_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_class_keyset ON ql_private.runs USING btree (placement_class, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: INDEX runs_class_keyset; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_class_keyset IS 'Serves: the ready runs of one placement class (ql_private.class_candidate_page), whether a class has a waiting run (ql_private.matching_classes, ql_private.waiting_classes), the class-in-use check of ql.prune_fleet. Plan: "Placement-class page (the pages after a blocked head)".';


--
-- Name: runs_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_due ON ql_private.runs USING btree (due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: INDEX runs_due; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_due IS 'Serves: the scheduled runs that came due: the probe of ql_private.scan_and_claim, the due source of ql_private.candidate_page, the promotion in ql.sweep_leases, ql.idle_probe, ql.waiting_runs, ql.queue_depth. Plan: "A pull while a scheduled run is due".';


--
-- Name: runs_idempotency_key; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE UNIQUE INDEX runs_idempotency_key ON ql_private.runs USING btree (task_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);


--
-- Name: INDEX runs_idempotency_key; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_idempotency_key IS 'Rule: one run per task and idempotency key while the run is retained (the ON CONFLICT arbiter of ql.enqueue_runs and ql.producer_enqueue).';


--
-- Name: INDEX runs_pkey; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_pkey IS 'Rule: a run''s identity (attempts.run_id references it). Serves: every by-id read and update of a run: the claim''s probe per candidate (ql_private.claim_candidate), the lease read (ql_private.lease_open), the expired-offer source of ql_private.candidate_page, ql.ack_lease, ql.complete_lease, ql_private.apply_retry, ql.sweep_leases, ql.cancel_run, ql.show_run. Plan: "Lease lifecycle read (ACK, heartbeat, completion)"; Plan: "The claim (ql_private.claim_candidate)".';


--
-- Name: runs_pool_class_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_class_due ON ql_private.runs USING btree (pool_id, placement_class, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: INDEX runs_pool_class_due; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_pool_class_due IS 'Serves: the due scheduled runs of one class within a granted pool (ql_private.pool_class_candidate_page). Plan: "Pool placement-class page with scheduled runs due".';


--
-- Name: runs_pool_class_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_class_keyset ON ql_private.runs USING btree (pool_id, placement_class, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: INDEX runs_pool_class_keyset; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_pool_class_keyset IS 'Serves: the ready runs of one class within a granted pool (ql_private.pool_class_candidate_page). Plan: "Pool placement-class page with scheduled runs due".';


--
-- Name: runs_pool_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_due ON ql_private.runs USING btree (pool_id, due_at) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NOT NULL));


--
-- Name: INDEX runs_pool_due; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_pool_due IS 'Serves: the due scheduled runs of a granted pool (ql_private.pool_candidate_page). Plan: "Pool page: a worker granted one pool of many (limit 8 + 1)".';


--
-- Name: runs_pool_keyset; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_pool_keyset ON ql_private.runs USING btree (pool_id, ((- (priority)::integer)), queue_seq, id) WHERE ((state = 'queued'::text) AND runtime_owned AND (NOT cancel_requested) AND (due_at IS NULL));


--
-- Name: INDEX runs_pool_keyset; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_pool_keyset IS 'Serves: the ready runs of a granted pool (ql_private.pool_candidate_page, ql_private.pool_ready_candidate_page). Plan: "Pool page: a worker granted one pool of many (limit 8 + 1)".';


--
-- Name: runs_project_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_project_state_seq ON ql_private.runs USING btree (project_id, state, queue_seq);


--
-- Name: INDEX runs_project_state_seq; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_project_state_seq IS 'Serves: one project''s runs newest first (ql_private.project_runs_page, ql.producer_list_runs).';


--
-- Name: runs_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_state_seq ON ql_private.runs USING btree (state, queue_seq);


--
-- Name: INDEX runs_state_seq; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_state_seq IS 'Serves: the runs of one state newest first (ql.list_runs without a task), ql.run_state_counts, the class-in-use check of ql.prune_fleet, ql.status_snapshot.';


--
-- Name: runs_task_queued_due; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_task_queued_due ON ql_private.runs USING btree (task_id, due_at) WHERE (state = 'queued'::text);


--
-- Name: INDEX runs_task_queued_due; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_task_queued_due IS 'Serves: the ready and scheduled counts per task (ql.queue_depth), ql.cancel_runs.';


--
-- Name: runs_task_state_seq; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_task_state_seq ON ql_private.runs USING btree (task_id, state, queue_seq);


--
-- Name: INDEX runs_task_state_seq; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_task_state_seq IS 'Serves: the runs of one task and state newest first (ql.list_runs with a task), ql.queue_depth, ql.status_snapshot, ql.cancel_runs.';


--
-- Name: runs_terminal_finished; Type: INDEX; Schema: ql_private; Owner: ql_owner
--

CREATE INDEX runs_terminal_finished ON ql_private.runs USING btree (finished_at) WHERE (state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text]));


--
-- Name: INDEX runs_terminal_finished; Type: COMMENT; Schema: ql_private; Owner: ql_owner
--

COMMENT ON INDEX ql_private.runs_terminal_finished IS 'Serves: the terminal runs by finish time (ql.prune_runs, ql.throughput).';


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
-- Name: FUNCTION keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.keyset_after(p_priority smallint, p_queue_seq bigint, p_id uuid, p_after_priority smallint, p_after_seq bigint, p_after_id uuid) FROM PUBLIC;


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
-- Name: FUNCTION lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text, p_seen ql_private.run_leases, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer); Type: ACL; Schema: ql_private; Owner: ql_owner
--

REVOKE ALL ON FUNCTION ql_private.lease_prelude(p_credential_id text, p_secret_digest bytea, p_worker_id uuid, p_session_id uuid, p_generation bigint, p_offer_id uuid, p_token_digest bytea, p_lease_version bigint, p_action text, p_change text, p_lock text, p_seen ql_private.run_leases, p_outcome text, p_exit_code integer, p_reason text, p_result jsonb, OUT answer jsonb, OUT lease ql_private.run_leases, OUT attempt ql_private.attempts, OUT run ql_private.runs, OUT ttl integer) FROM PUBLIC;


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
