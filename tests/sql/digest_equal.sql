-- ql_private.digest_equal: constant-time digest equality as one inlinable
-- expression (every byte visited, no early exit): equal / unequal at any byte,
-- NULL and length mismatches unequal, and inlined into the caller's expression.
BEGIN;
SELECT plan(11);

SELECT is((SELECT l.lanname || '/' || p.provolatile::text || '/' || p.prosecdef || '/'
                  || coalesce(array_to_string(p.proconfig, ','), 'no SET')
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.digest_equal(bytea, bytea)'::regprocedure),
          'sql/i/false/no SET', 'inlinable: SQL, IMMUTABLE, not SECURITY DEFINER, no SET clause');

SELECT ok(ql_private.digest_equal(sha256('a'), sha256('a')), 'equal digests');
SELECT ok(NOT ql_private.digest_equal(sha256('a'), sha256('b')), 'different digests');
SELECT ok(NOT ql_private.digest_equal(sha256('a'), set_byte(sha256('a'), 0, get_byte(sha256('a'), 0) # 128)),
          'differ in the first byte only');
SELECT ok(NOT ql_private.digest_equal(sha256('a'), set_byte(sha256('a'), 31, get_byte(sha256('a'), 31) # 1)),
          'differ in the last bit only');
SELECT ok(NOT ql_private.digest_equal('\x0001'::bytea, '\x0000'::bytea), 'one bit differs');
SELECT ok(NOT ql_private.digest_equal('\x01'::bytea, '\x0100'::bytea), 'different lengths');
SELECT ok(NOT ql_private.digest_equal(NULL, sha256('a')), 'NULL first: unequal');
SELECT ok(NOT ql_private.digest_equal(sha256('a'), NULL), 'NULL second: unequal');
SELECT ok(ql_private.digest_equal(''::bytea, ''::bytea), 'two empty values are equal');

-- Inlined: the plan's expression is the bit_count, not a call of digest_equal.
CREATE FUNCTION pg_temp.plan(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    result text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || query LOOP
        result := result || line || E'\n';
    END LOOP;
    RETURN result;
END
$$;
SELECT alike(pg_temp.plan('SELECT ql_private.digest_equal(c.secret_digest, c.secret_digest)'
                          ' FROM ql_private.worker_credentials c'),
             '%bit_count%', 'inlined into the caller (the plan shows bit_count)');

SELECT * FROM finish();
ROLLBACK;
