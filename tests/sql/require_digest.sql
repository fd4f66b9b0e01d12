-- ql_private.require_digest: a digest argument must be exactly 32 bytes
-- (SHA-256); QL001 naming the field for NULL or any other length.
BEGIN;
SELECT plan(6);

SELECT is(ql_private.require_digest(sha256('x'::bytea), 'secretDigest'), sha256('x'::bytea),
          '32 bytes pass through unchanged');
SELECT throws_ok($$SELECT ql_private.require_digest(NULL, 'secretDigest')$$, 'QL001',
                 'secretDigest must be a 32-byte SHA-256 digest', 'NULL -> QL001 naming the field');
SELECT throws_ok($$SELECT ql_private.require_digest(''::bytea, 'tokenDigest')$$, 'QL001',
                 'tokenDigest must be a 32-byte SHA-256 digest', 'empty -> QL001');
SELECT throws_ok($$SELECT ql_private.require_digest(substr(sha256('x'::bytea), 1, 31), 'd')$$, 'QL001', NULL,
                 '31 bytes (truncated) -> QL001');
SELECT throws_ok($$SELECT ql_private.require_digest(sha256('x'::bytea) || '\x00'::bytea, 'd')$$, 'QL001', NULL,
                 '33 bytes -> QL001');
SELECT throws_ok($$SELECT ql_private.require_digest(convert_to(encode(sha256('x'::bytea), 'hex'), 'UTF8'), 'd')$$,
                 'QL001', NULL, 'the hex text of a digest (64 bytes) -> QL001');

SELECT * FROM finish();
ROLLBACK;
