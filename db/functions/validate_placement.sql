-- ql_private.validate_placement(placement jsonb) -> void
--
-- Purpose: defense in depth at the database write boundary (SPEC §3.2): refuse any
--   placement that is not exactly the normalized form of docs/DESIGN.md
--   ("Normalized placement", schemas/qinglong.placement.v1.json), even if the
--   ingress/publish compiler let it through. The normalized form is what the
--   content digest covers, so it must be unique per meaning: executors and label
--   value sets must be sorted (byte order = Python's code-point sort) and unique.
--     {"required": {"executors": [1..8 names ^[a-z0-9][a-z0-9-]{0,62}$, sorted, unique],
--                   "labels":    {key: [1..32 values, sorted, unique]}   (<= 32 keys),
--                   "runtimes":  {name: [<= 32 comparators "OPversion"]} (<= 16 names)},
--      "preferred": [<= 16 {"weight": 1..100, "labels": {...}, "runtimes": {...}}]}
--   label key ^[a-z0-9][a-z0-9._/-]{0,62}$; label value 1..128 characters without
--   C0/C1 controls, line/paragraph separators or invisible format/bidi characters;
--   runtime name ^[a-z0-9][a-z0-9._-]{0,62}$; comparator OP in >=,>,<=,<,= followed
--   by a SemVer 2.0.0 version without build metadata, <= 160 characters. Comparator
--   arrays may repeat a comparator (harmless under AND; the schema allows it).
--   Counts are checked before elements, so an oversize document is refused
--   before any per-element work.
-- Caller: ql.publish_revision (before storing a revision). Locks: none. Pure.
-- SQLSTATEs (message names the JSON path, e.g. placement.preferred[2].labels["disk"][0]):
--   QL001 not an object/array/string/integer where one is required, unknown or
--         missing field, empty set, bad name/key/value characters, duplicates,
--         unsorted set, weight outside 1..100;
--   QL002 a set or string above its cap (executors 8, labels 32, values 32,
--         value 128 chars, runtimes 16, comparators 32, comparator 160 chars,
--         preferred 16);
--   QL003 a comparator that is not OP + SemVer 2.0.0 (or carries build metadata).
CREATE OR REPLACE FUNCTION ql_private.validate_placement(p_placement jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;
REVOKE ALL ON FUNCTION ql_private.validate_placement(jsonb) FROM PUBLIC;
