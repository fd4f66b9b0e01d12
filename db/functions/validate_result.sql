-- ql_private.validate_result(p_result jsonb) -> jsonb
--
-- Purpose: check the `result` of a lease completion (SPEC §9.3) before it is
--   stored on the attempt: an object with exactly the keys
--     exitCode    optional (absent or null), an integer -2147483648..2147483647
--     durationMs  an integer >= 0 (bigint range)
--     outputTail  a string of at most 8192 bytes in UTF-8 (the last <= 8 KiB of
--                 the command's combined output, invalid bytes already replaced
--                 by the worker)
--     outputBytes an integer >= 0 (bigint range)
--     logBytes    optional (absent or null), an integer >= 0 (bigint range):
--                 the byte length of the command's whole log (SPEC §15.2;
--                 ql.run_log compares the stored log with it)
--     limits      optional (absent or null), what the per-run isolation
--                 enforced (SPEC §11; checked by
--                 ql_private.validate_result_limits): an object with exactly
--                   mechanism      "cgroup" | "rlimit"
--                   uid            null | integer 0..4294967295
--                   maxProcesses, maxOpenFiles, maxMemoryBytes
--                                  null | integer >= 0 (bigint range)
--                   exceeded       an array of distinct values from
--                                  "processes", "memory", "openFiles"
--   and nothing else. Size: the tail is the only unbounded-looking part
--   (<= 8 KiB); limits is at most a few hundred bytes, so a result stays
--   well inside the 16 KiB of a complete request. Returns the object unchanged (NULL passes through: a
--   completion without a result). Everything else raises, naming the field in
--   the message; the COLUMN diagnostic is always 'result' (the wire field).
-- Inputs: p_result (jsonb, as parsed by the ingress).
-- Fences: none. Writes: none. Locks: none. Idempotency: pure.
-- Errors: QL001 (COLUMN 'result') for anything but the shape above.
-- Caller: ql.complete_lease.
CREATE OR REPLACE FUNCTION ql_private.validate_result(p_result jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
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
REVOKE ALL ON FUNCTION ql_private.validate_result(jsonb) FROM PUBLIC;
