-- ql_private.parse_uuid(value text, field text) -> uuid
--
-- Purpose: turn an id argument of a ql.* function into a uuid, accepting only the
--   lowercase canonical form of SPEC §4, so a malformed id raises our SQLSTATE
--   with the field name (never the value) instead of a bare 22P02. The field
--   (the wire name, e.g. 'runId') is also the error's COLUMN diagnostic, which
--   callers map to the `field` of their invalid_input answer (SPEC §9).
-- Caller: any function (every ql.* function taking an id).
-- Locks: none. Pure, idempotent.
-- SQLSTATE: QL001 (COLUMN = field) when NULL or not a lowercase canonical UUID.
CREATE OR REPLACE FUNCTION ql_private.parse_uuid(p_value text, p_field text)
RETURNS uuid
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NULL
       OR p_value !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = p_field,
            MESSAGE = format('%s must be a lowercase canonical UUID', p_field);
    END IF;
    RETURN p_value::uuid;
END
$$;
REVOKE ALL ON FUNCTION ql_private.parse_uuid(text, text) FROM PUBLIC;
