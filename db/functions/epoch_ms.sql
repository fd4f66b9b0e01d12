-- ql_private.epoch_ms(t timestamptz) -> bigint
--
-- Purpose: the wire representation of a time (integer milliseconds since the
--   epoch, SPEC §4), truncated toward the past so a projection never claims a
--   later instant than the database recorded.
-- Caller: projections. Locks: none. Pure. NULL in, NULL out.
CREATE OR REPLACE FUNCTION ql_private.epoch_ms(p_t timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT floor(extract(epoch FROM p_t) * 1000)::bigint
$$;
REVOKE ALL ON FUNCTION ql_private.epoch_ms(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.epoch_ms(timestamptz) IS
'Integer milliseconds since the epoch (floor). Pure.';
