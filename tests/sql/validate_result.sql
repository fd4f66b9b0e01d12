-- ql_private.validate_result (SPEC §9.3): the exact shape of a completion
-- result; every refusal is QL001 with COLUMN result.
BEGIN;
SELECT plan(18);
\ir fixtures.psql

SELECT is(ql_private.validate_result(NULL), NULL, 'NULL passes (no result)');
SELECT is(ql_private.validate_result('{"durationMs": 0, "outputTail": "", "outputBytes": 0}'),
          '{"durationMs": 0, "outputTail": "", "outputBytes": 0}'::jsonb, 'minimal result (no exitCode)');
SELECT is(ql_private.validate_result('{"exitCode": null, "durationMs": 5, "outputTail": "a", "outputBytes": 1}') ->> 'durationMs',
          '5', 'exitCode null accepted');
SELECT is(ql_private.validate_result('{"exitCode": -2147483648, "durationMs": 5, "outputTail": "a", "outputBytes": 1}') ->> 'exitCode',
          '-2147483648', 'exitCode int32 minimum accepted');
SELECT lives_ok(format('SELECT ql_private.validate_result(%L)',
                       jsonb_build_object('durationMs', 1, 'outputBytes', 8192, 'outputTail', repeat('€', 2730) || 'ab')),
                'an outputTail of exactly 8192 UTF-8 bytes is accepted');

SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('[]')$$), 'QL001 result', 'not an object');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": 1, "outputTail": "", "outputBytes": 0, "x": 1}')$$),
          'QL001 result', 'unknown field');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'durationMs missing');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": 1, "outputBytes": 0}')$$),
          'QL001 result', 'outputTail missing');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": -1, "outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'negative durationMs');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": 1.5, "outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'fractional durationMs');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": "1", "outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'durationMs as a string');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": 1, "outputTail": "", "outputBytes": -1}')$$),
          'QL001 result', 'negative outputBytes');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"durationMs": 1, "outputTail": 7, "outputBytes": 0}')$$),
          'QL001 result', 'outputTail not a string');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"exitCode": 2147483648, "durationMs": 1, "outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'exitCode beyond int32');
SELECT is(ql_test.error_of($$SELECT ql_private.validate_result('{"exitCode": true, "durationMs": 1, "outputTail": "", "outputBytes": 0}')$$),
          'QL001 result', 'exitCode not a number');
SELECT is(ql_test.error_of(format('SELECT ql_private.validate_result(%L)',
                                  jsonb_build_object('durationMs', 1, 'outputBytes', 1, 'outputTail', repeat('x', 8193)))),
          'QL001 result', 'outputTail of 8193 bytes');
SELECT throws_ok($$SELECT ql_private.validate_result('{"durationMs": -1, "outputTail": "", "outputBytes": 0}')$$,
                 'QL001', 'result.durationMs must be an integer >= 0', 'the message names the field');

SELECT * FROM finish();
ROLLBACK;
