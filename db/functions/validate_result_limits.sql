-- ql_private.validate_result_limits(p_limits jsonb) -> text
--
-- Purpose: check the `limits` of a completion result (SPEC §11, §9.3): what
--   the worker's per-run isolation enforced and which limits the command hit.
--   An object with exactly the keys
--     mechanism       "cgroup" | "rlimit"
--     uid             null | an integer 0..4294967295 (the uid the command ran as)
--     maxProcesses    null | an integer >= 0 (bigint range)
--     maxOpenFiles    null | an integer >= 0 (bigint range)
--     maxMemoryBytes  null | an integer >= 0 (bigint range)
--     exceeded        an array of distinct values from "processes", "memory",
--                     "openFiles" (possibly empty)
--   all of them present (null where a limit was not set).
-- Returns NULL when the object is well-formed, else the problem, naming the
--   field (ql_private.validate_result raises it as QL001 COLUMN result).
-- Inputs: p_limits (not NULL: the caller passes only a present, non-null value).
-- Fences: none. Writes: none. Locks: none. Idempotency: pure.
-- Errors: none raised here.
-- Caller: ql_private.validate_result.
CREATE OR REPLACE FUNCTION ql_private.validate_result_limits(p_limits jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
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
REVOKE ALL ON FUNCTION ql_private.validate_result_limits(jsonb) FROM PUBLIC;
