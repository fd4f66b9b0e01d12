-- ql_private.digest_equal(a bytea, b bytea) -> boolean
--
-- Purpose: compare two 32-byte digests in time independent of where they differ
--   (every byte is visited and the differences OR-ed), so response timing cannot
--   be used to guess a stored token or secret digest byte by byte.
-- Caller: authentication and offer recovery. Locks: none. Pure.
-- NULL or different lengths compare unequal. No SQLSTATEs.
CREATE OR REPLACE FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    diff integer := 0;
    i integer;
BEGIN
    IF p_a IS NULL OR p_b IS NULL OR octet_length(p_a) <> octet_length(p_b) THEN
        RETURN false;
    END IF;
    FOR i IN 0 .. octet_length(p_a) - 1 LOOP
        diff := diff | (get_byte(p_a, i) # get_byte(p_b, i));
    END LOOP;
    RETURN diff = 0;
END
$$;
REVOKE ALL ON FUNCTION ql_private.digest_equal(bytea, bytea) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.digest_equal(bytea, bytea) IS
'Constant-time equality of two digests (all bytes visited). Pure. NULL/length mismatch -> false.';
