-- ql_private.json_object_from_bytes: the byte-level write boundary of canonical
-- documents (size, UTF-8, JSON object, duplicate keys at any depth).
BEGIN;
SELECT plan(11);

SELECT is(ql_private.json_object_from_bytes(convert_to('{"a":[{"b":1},{"b":2}],"c":{"d":"é"}}', 'UTF8'), 100, 'doc'),
          '{"a":[{"b":1},{"b":2}],"c":{"d":"é"}}'::jsonb, 'a valid object parses to jsonb');
SELECT is(ql_private.json_object_from_bytes(convert_to('{}', 'UTF8'), 2, 'doc'), '{}'::jsonb,
          'exactly max_bytes is allowed');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes('{}  '::bytea, 3, 'doc')$$, 'QL002', NULL,
                 'over max_bytes -> QL002');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes(NULL, 10, 'doc')$$, 'QL001', NULL, 'NULL -> QL001');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes('\x7b22a2223a317d'::bytea, 100, 'doc')$$, 'QL001', NULL,
                 'invalid UTF-8 -> QL001');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes(convert_to('{"a":', 'UTF8'), 100, 'doc')$$, 'QL001', NULL,
                 'truncated JSON -> QL001');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes(convert_to('"x"', 'UTF8'), 100, 'doc')$$, 'QL001', NULL,
                 'a JSON string is not an object -> QL001');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes(convert_to('{"a":[1,{"x":1,"y":2,"x":3}]}', 'UTF8'), 100, 'doc')$$,
                 'QL001', NULL, 'duplicate key inside an array element -> QL001');
SELECT lives_ok($$SELECT ql_private.json_object_from_bytes(convert_to('{"a":{"x":1},"b":{"x":1}}', 'UTF8'), 100, 'doc')$$,
                'the same key in sibling objects is not a duplicate');
SELECT throws_ok($$SELECT ql_private.json_object_from_bytes(convert_to('{"a":"\u0000"}', 'UTF8'), 100, 'doc')$$,
                 'QL001', NULL, '\u0000 escape -> QL001');
SELECT throws_ok(format('SELECT ql_private.json_object_from_bytes(%L::bytea, 300000, %L)',
                        convert_to('{"a":' || repeat('[', 100000) || repeat(']', 100000) || '}', 'UTF8'), 'doc'),
                 'QL002', NULL, 'nesting beyond the parser stack -> QL002');

SELECT * FROM finish();
ROLLBACK;
