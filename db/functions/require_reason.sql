-- ql_private.require_reason(value text, field text) -> text
--
-- Purpose: refuse a reason code that is not low-cardinality and bounded (SPEC
--   §4 reasonCode: ^[a-z][a-z0-9_]{0,63}$), so free text (paths, messages,
--   labels) can never be stored in attempts.reason or an event payload. NULL
--   passes through (the caller picks its default).
-- Caller: ql.ack_lease, ql.complete_lease. Locks: none. Pure.
-- SQLSTATE: QL001 (with the field name, never the value) when malformed.
CREATE OR REPLACE FUNCTION ql_private.require_reason(p_value text, p_field text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NOT NULL AND p_value !~ '^[a-z][a-z0-9_]{0,63}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s must match ^[a-z][a-z0-9_]{0,63}$', p_field);
    END IF;
    RETURN p_value;
END
$$;
REVOKE ALL ON FUNCTION ql_private.require_reason(text, text) FROM PUBLIC;
