-- ql_private.epoch_ms(t timestamptz) -> bigint
--
-- Purpose: the wire representation of a time (integer milliseconds since the
--   epoch, SPEC §4), truncated toward the past so a projection never claims a
--   later instant than the database recorded.
-- STABLE, not IMMUTABLE: extract(epoch FROM timestamptz) is only STABLE, and
--   the planner inlines a SQL function only when its body is no more volatile
--   than declared.
-- Why no `SET search_path`: a SET clause stops the planner from inlining a SQL
--   function, and this runs several times per projection; inlined it is a plain
--   expression. It is not SECURITY DEFINER and only uses pg_catalog functions,
--   resolved under the pinned search_path of its (definer) callers.
-- Caller: any function (projections and answers).
-- Locks: none. Pure. NULL in, NULL out.
CREATE OR REPLACE FUNCTION ql_private.epoch_ms(p_t timestamptz)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.floor(EXTRACT(epoch FROM p_t) * 1000)::bigint
$$;
REVOKE ALL ON FUNCTION ql_private.epoch_ms(timestamptz) FROM PUBLIC;
