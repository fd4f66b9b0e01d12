-- ql_private.bound_value: one integer bound of a pull — absent -> the default,
-- the value when an integer in 1..cap, QL001 not a number / not integral / < 1,
-- QL002 above the cap (the cap named in the message).
BEGIN;
SELECT plan(11);

SELECT is(ql_private.bound_value('{}', 'pages', 2, 16), 2, 'absent -> the default');
SELECT is(ql_private.bound_value('{"other": 99}', 'pages', 2, 16), 2, 'another key is not read');
SELECT is(ql_private.bound_value('{"pages": 1}', 'pages', 2, 16), 1, '1 is the least value');
SELECT is(ql_private.bound_value('{"pages": 16}', 'pages', 2, 16), 16, 'the cap itself is accepted');
SELECT is(ql_private.bound_value('{"pages": 4e0}', 'pages', 2, 16), 4, 'an integral number in exponent form');
SELECT throws_ok($$SELECT ql_private.bound_value('{"pages": null}', 'pages', 2, 16)$$, 'QL001',
                 'bounds.pages must be an integer', 'JSON null as the value -> QL001');
SELECT throws_ok($$SELECT ql_private.bound_value('{"pages": true}', 'pages', 2, 16)$$, 'QL001',
                 'bounds.pages must be an integer', 'a boolean -> QL001');
SELECT throws_ok($$SELECT ql_private.bound_value('{"pages": -3}', 'pages', 2, 16)$$, 'QL001',
                 'bounds.pages must be an integer >= 1', 'negative -> QL001');
SELECT throws_ok($$SELECT ql_private.bound_value('{"pages": 2.5}', 'pages', 2, 16)$$, 'QL001',
                 'bounds.pages must be an integer >= 1', 'a fraction above 1 -> QL001 (never rounded)');
SELECT throws_ok($$SELECT ql_private.bound_value('{"pageSize": 1e30}', 'pageSize', 8, 64)$$, 'QL002',
                 'bounds.pageSize exceeds its hard cap of 64', 'far above the cap -> QL002 (no overflow)');
SELECT throws_ok($$SELECT ql_private.bound_value('{"k": 17}', 'k', 2, 16)$$, 'QL002',
                 'bounds.k exceeds its hard cap of 16', 'cap + 1 -> QL002');

SELECT * FROM finish();
ROLLBACK;
