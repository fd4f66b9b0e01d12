-- ql_private.json_object_from_bytes(bytes bytea, max_bytes integer, field text) -> jsonb
--
-- Purpose: the write boundary for canonical JSON documents (capabilities,
--   execution revision content). The bytes are what gets hashed and stored, so
--   they are checked before anything else trusts them: at most max_bytes, valid
--   UTF-8, one JSON object, and no duplicate object key at any depth (SPEC §4:
--   duplicates are refused; jsonb alone would silently keep the last one, so the
--   check walks the order- and duplicate-preserving json form).
-- Caller: ql.open_session, ql.publish_revision, ql_private.signature_kid.
-- Locks: none. Pure.
-- SQLSTATEs: QL001 NULL, invalid UTF-8, not JSON, not an object, duplicate key,
--   or a \u0000 escape (not representable in jsonb); QL002 over max_bytes or
--   nested too deeply for the parser. The message names the field, never content.
CREATE OR REPLACE FUNCTION ql_private.json_object_from_bytes(
    p_bytes bytea,
    p_max_bytes integer,
    p_field text
)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
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
REVOKE ALL ON FUNCTION ql_private.json_object_from_bytes(bytea, integer, text) FROM PUBLIC;
