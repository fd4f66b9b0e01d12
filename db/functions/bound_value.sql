-- ql_private.bound_value(bounds jsonb, key text, default integer, cap integer) -> integer
--
-- Purpose: read one integer bound; absent -> default.
-- Caller: ql_private.pull_bounds.
-- SQLSTATEs: QL001 not an integer or < 1; QL002 above the cap (named in the message).
CREATE OR REPLACE FUNCTION ql_private.bound_value(
    p_bounds jsonb, p_key text, p_default integer, p_cap integer
)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb := p_bounds -> p_key;
    n numeric;
BEGIN
    IF v IS NULL THEN
        RETURN p_default;
    END IF;
    IF jsonb_typeof(v) <> 'number' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('bounds.%s must be an integer', p_key);
    END IF;
    n := v::numeric;
    IF n <> trunc(n) OR n < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('bounds.%s must be an integer >= 1', p_key);
    END IF;
    IF n > p_cap THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002',
            MESSAGE = format('bounds.%s exceeds its hard cap of %s', p_key, p_cap);
    END IF;
    RETURN n::integer;
END
$$;
REVOKE ALL ON FUNCTION ql_private.bound_value(jsonb, text, integer, integer) FROM PUBLIC;
