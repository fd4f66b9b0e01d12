-- ql.append_log(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--               p_generation, p_offer_id, p_token_digest, p_lease_version,
--               p_offset, p_chunk) -> jsonb
--
-- Purpose: append a chunk of a running command's combined output to its
--   attempt's live log (SPEC §15.1 `POST /v1/leases/log`). The log is the
--   UTF-8 bytes of the chunks in order; p_offset is where the worker believes
--   this chunk starts, in bytes. The server appends only at its stored length:
--   * p_offset = stored length: appended (status ok). An empty chunk there
--     changes nothing (status idempotent).
--   * the chunk repeats stored bytes (p_offset < stored length and its bytes
--     equal the stored ones from p_offset on, ending at or before the stored
--     length): unchanged (status idempotent) — a chunk whose answer was lost,
--     sent again.
--   * anything else (a gap: p_offset past the stored length; different bytes;
--     a chunk that overlaps the stored end): {"status":"conflict",
--     "category":"log_offset","storedBytes":N} and nothing is written; the
--     worker resumes from N (the ingress answers 409 log_offset {offset: N}).
--   Cap (SPEC §15.2): the attempt's log keeps at most limit_bytes bytes, the
--   task's logLimitBytes pinned on the lease at its claim (run_leases.
--   log_limit_bytes, copied to the log header by the first append). A chunk
--   crossing it is cut at the last character boundary at or below it, the
--   rest dropped and the log marked truncated; from then on every chunk at or
--   past the stored length is dropped (status ok, nothing written) and the
--   answer says truncated: true (the worker stops sending; the command runs
--   on). A replay of the crossing chunk (its stored part equal) is
--   idempotent.
--   Answers {"status":"ok"|"idempotent","storedBytes":N,"truncated":bool}, the
--   log's state after the call.
-- Inputs: the lease proof as ql.heartbeat_lease (p_credential_id,
--   p_secret_digest, p_worker_id, p_session_id, p_offer_id, p_generation >= 1,
--   p_token_digest, p_lease_version >= 1); p_offset >= 0; p_chunk a string of
--   at most 65536 bytes in UTF-8.
-- Fences (ql_private.lease_prelude, which also answers conflicts):
--   the credential (ql_private.authenticate, action `lease.log`), then
--   ql_private.lease_open (offer, worker, constant-time token digest,
--   session/generation, live unexpired lease, attempt, revision) and the lease
--   version, which must be the current one: an append is fenced by it but never
--   bumps it (SPEC §15.1), so a heartbeat's bump in between answers
--   stale_lease_version and the worker sends again with the version it now
--   holds. Only a STARTED lease appends (after the starting ACK).
-- Returns the answer above | {"status":"conflict","category":…} (lease_verdict
--   categories, stale_lease_version, log_offset) | the denial envelope.
-- Writes: one attempt_log_chunks row and the attempt_logs header (created by
--   the first append: run, pinned cap) per appended chunk; nothing for a
--   replay, a dropped chunk, a conflict or an error; one security_audit row
--   when denied.
-- Locks: in the lifecycle order (docs/LIFECYCLE.md "Locks"): attempt FOR KEY
--   SHARE, then lease FOR KEY SHARE (ql_private.lease_open
--   `attempt_lease_share`), then the attempt's log header FOR NO KEY UPDATE.
--   The shared locks let heartbeats and other appends pass but not a change of
--   the attempt (completion, start failure, loss, cancel: attempt FOR UPDATE),
--   so no chunk lands after its attempt ended; the header lock serializes the
--   appends of one attempt (two at the same offset: one appends, the other
--   then sees the new length: replay if it carried the same bytes, else
--   log_offset). Nothing is locked after the header.
-- Idempotency: replays as above; the lease is not touched.
-- Errors: QL001 malformed ids/digest, generation or lease version NULL or < 1,
--   p_offset NULL or < 0 (COLUMN offset), p_chunk NULL (COLUMN chunk); QL002
--   p_chunk over 65536 bytes (COLUMN chunk); QL020 the lease is not started
--   (a chunk before the starting ACK). Nothing is written on any error.
-- Planning: as ql.heartbeat_lease (generic plans, no sequential scans, no JIT).
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.append_log(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_lease_version bigint,
    p_offset bigint,
    p_chunk text
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
REVOKE ALL ON FUNCTION ql.append_log(
    text, bytea, text, text, bigint, text, bytea, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.append_log(
    text, bytea, text, text, bigint, text, bytea, bigint, bigint, text) TO ql_worker_ingress;
