-- ql_private.digest_equal(a bytea, b bytea) -> boolean
--
-- Purpose: compare two digests in time independent of where they differ, so
--   response timing cannot be used to guess a stored token or secret digest
--   byte by byte.
-- How: one expression. Both digests become bit strings of their full length
--   (hex, then varbit) and are XOR-ed; bit_count of the result is 0 only when
--   they are equal. Every step (encode, the varbit input, #, bit_count) walks
--   all bytes whatever their values, with no early exit — unlike `=` on bytea
--   (memcmp), which stops at the first difference. (The varbit input branches
--   on each hex digit's class, digit or letter, of each value on its own:
--   never on whether, or where, the two digests agree.)
-- Why one SQL expression: LANGUAGE sql, IMMUTABLE, no SET clause, so the
--   planner inlines it into the caller's expression (the credential check runs
--   on every worker call); the earlier 32-step plpgsql loop cost ~8x as much.
-- NULL or different lengths compare unequal (the CASE keeps the XOR, which
--   needs equal lengths, from running then). No SQLSTATEs.
-- Caller: ql.confirm_credentials, ql_private.authenticate, ql_private.lease_verdict,
--   ql_private.producer_token.
-- Locks: none. Pure.
CREATE OR REPLACE FUNCTION ql_private.digest_equal(p_a bytea, p_b bytea)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
               WHEN p_a IS NULL OR p_b IS NULL
                    OR pg_catalog.octet_length(p_a) <> pg_catalog.octet_length(p_b) THEN false
               ELSE pg_catalog.bit_count(
                        ('x' || pg_catalog.encode(p_a, 'hex'))::pg_catalog.varbit
                        # ('x' || pg_catalog.encode(p_b, 'hex'))::pg_catalog.varbit) = 0
           END
$$;
REVOKE ALL ON FUNCTION ql_private.digest_equal(bytea, bytea) FROM PUBLIC;
