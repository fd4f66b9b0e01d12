-- ql.run_log(p_run_id uuid, p_attempt_no integer DEFAULT NULL,
--            p_offset bigint DEFAULT 0, p_max_bytes integer DEFAULT 1048576) -> jsonb
--   {runId, attemptNumber, offset, text, storedBytes, logBytes, truncated,
--    complete, ended}
--
-- Purpose: one page of an attempt's live log (SPEC §15.3), for `admin run log`,
--   the console's run page, `qinglong run log` and, through
--   ql.producer_run_log, `GET /v1/runs/{id}/log`. A follower calls it again
--   from offset + the byte length of the text it got until `ended`.
--   * attemptNumber: p_attempt_no, or the run's latest attempt when NULL.
--   * text: the stored log from byte p_offset on, at most p_max_bytes bytes of
--     it, cut back to whole UTF-8 characters ('' at the end of what is stored).
--   * storedBytes: the length in bytes of the log stored so far (0 when the
--     attempt never sent any); truncated: bytes past the task's
--     logLimitBytes were dropped (SPEC §15.2).
--   * logBytes: the byte length of the whole output as the executor reported
--     it with the completion (result.logBytes, SPEC §15.2); null while the
--     attempt runs, and for an attempt that ended without it (lost, start
--     failed, cancelled before it started, or an older worker).
--   * ended: the attempt is in a final state (succeeded, failed, cancelled,
--     lost): nothing will be appended any more.
--   * complete: the stored log is the whole log: the attempt ended, reported
--     logBytes, and stored all of them (storedBytes = logBytes). A log
--     shorter than logBytes — cut at the cap (truncated) or missing chunks —
--     or of an attempt that ended without logBytes, is never complete (SPEC
--     §15.2: never shown as a complete log); readers say which.
-- Cost: a primary-key probe of the run, one probe of attempts (run_id,
--   attempt_no), of attempt_logs, and a range of the chunks' primary key
--   bounded by p_max_bytes (ql_private.log_bytes). One snapshot (STABLE): the
--   header and the chunks read agree.
-- Inputs: p_run_id; p_attempt_no >= 1 or NULL; p_offset 0..storedBytes, at
--   the start of a character (an offset a previous page answered always is);
--   p_max_bytes 4..16777216 (4: room for any one character, so a follower
--   always advances).
-- Fences: none (an operator's or a granted reader's read; the producer's
--   project fence is ql.producer_run_log's). Writes: none. Locks: none.
-- Idempotency: read-only.
-- Errors: QL001 NULL run id (COLUMN runId); QL004 unknown run (COLUMN runId),
--   unknown attempt of a known run (COLUMN attempt); QL006 p_attempt_no < 1
--   (COLUMN attempt), p_offset outside 0..storedBytes or inside a character
--   (COLUMN offset), p_max_bytes out of bounds (COLUMN maxBytes).
-- Caller: ql_readonly, ql_runtime, ql.producer_run_log.
CREATE OR REPLACE FUNCTION ql.run_log(
    p_run_id uuid,
    p_attempt_no integer DEFAULT NULL,
    p_offset bigint DEFAULT 0,
    p_max_bytes integer DEFAULT 1048576
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
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
REVOKE ALL ON FUNCTION ql.run_log(uuid, integer, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.run_log(uuid, integer, bigint, integer) TO ql_readonly, ql_runtime;
