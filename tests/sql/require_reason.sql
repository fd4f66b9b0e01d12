-- ql_private.require_reason: a reason code must match ^[a-z][a-z0-9_]{0,63}$
-- (SPEC §4 reasonCode); NULL passes through; QL001 naming the field, never
-- the value, for free text.
BEGIN;
SELECT plan(9);

SELECT is(ql_private.require_reason('exit_code_1', 'reasonCode'), 'exit_code_1', 'a code passes through');
SELECT is(ql_private.require_reason('a', 'reasonCode'), 'a', 'one letter is a code');
SELECT is(ql_private.require_reason('a' || repeat('b', 63), 'reasonCode'), 'a' || repeat('b', 63),
          '64 characters is the longest code');
SELECT is(ql_private.require_reason(NULL, 'reasonCode'), NULL, 'NULL passes through (the caller''s default)');
SELECT throws_ok(format('SELECT ql_private.require_reason(%L, %L)', 'a' || repeat('b', 64), 'reasonCode'),
                 'QL001', 'reasonCode must match ^[a-z][a-z0-9_]{0,63}$', '65 characters -> QL001 naming the field');
SELECT throws_ok($$SELECT ql_private.require_reason('1abc', 'reasonCode')$$, 'QL001', NULL,
                 'a leading digit -> QL001');
SELECT throws_ok($$SELECT ql_private.require_reason('Exit', 'reasonCode')$$, 'QL001', NULL,
                 'uppercase -> QL001');
SELECT throws_ok($$SELECT ql_private.require_reason('/home/user/secret.txt', 'reasonCode')$$, 'QL001',
                 'reasonCode must match ^[a-z][a-z0-9_]{0,63}$', 'a path -> QL001, the value not in the message');
SELECT throws_ok($$SELECT ql_private.require_reason('', 'reasonCode')$$, 'QL001', NULL, 'empty -> QL001');

SELECT * FROM finish();
ROLLBACK;
