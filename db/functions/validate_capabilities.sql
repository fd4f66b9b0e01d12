-- ql_private.validate_capabilities(capabilities jsonb) -> void
--
-- Purpose: defense in depth at the database write boundary (SPEC §3.2, §4.4):
--   refuse a stored capabilities document that is not exactly
--   qinglong/worker-capabilities@v1 in canonical form (docs/DESIGN.md
--   "Capabilities", schemas/qinglong.worker-capabilities.v1.json), even if the
--   ingress let it through:
--     {"schema": "qinglong/worker-capabilities@v1",
--      "executors": [1..8 names ^[a-z0-9][a-z0-9-]{0,62}$, sorted, unique],
--      "labels":    {key ^[a-z0-9][a-z0-9._/-]{0,62}$: value 1..128 chars} (<= 32),
--      "runtimes":  {name ^[a-z0-9][a-z0-9._-]{0,62}$: SemVer 2.0.0, <= 128 chars} (<= 16),
--      "slots":     integer 1..256}
--   Label values refuse C0/C1 controls, line/paragraph separators and invisible
--   format/bidi characters. Executors must be sorted because the canonical form
--   sorts them (the stored digest covers that form). Counts are checked before
--   elements.
-- Caller: ql.open_session (before storing a session's capabilities). Locks: none. Pure.
-- SQLSTATEs (message names the JSON path, e.g. capabilities.runtimes["python"]):
--   QL001 not an object, unknown/missing field, wrong schema id, wrong type, bad
--         name/key/value characters, empty or unsorted/duplicate executors,
--         slots not an integer or < 1;
--   QL002 executors > 8, labels > 32, runtimes > 16, value > 128 chars,
--         version > 128 chars, slots > 256;
--   QL003 a runtime version that is not SemVer 2.0.0.
CREATE OR REPLACE FUNCTION ql_private.validate_capabilities(p_capabilities jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
REVOKE ALL ON FUNCTION ql_private.validate_capabilities(jsonb) FROM PUBLIC;
