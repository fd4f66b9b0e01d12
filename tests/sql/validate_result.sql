-- ql_private.validate_result (SPEC §9.3, §15.2, §11): the exact shape of a
-- completion result, logBytes and limits included; every refusal is QL001 with
-- COLUMN result.
BEGIN;
SELECT plan(42);
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

-- logBytes (SPEC 15.2) and limits (SPEC 11), both optional
CREATE FUNCTION pg_temp.r(extra jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT ql_test.error_of(format('SELECT ql_private.validate_result(%L)',
                                   '{"durationMs": 1, "outputTail": "", "outputBytes": 0}'::jsonb || extra))
$$;
CREATE FUNCTION pg_temp.limits(change jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('limits', '{"mechanism": "cgroup", "uid": 1001, "maxProcesses": 256,
        "maxOpenFiles": 1024, "maxMemoryBytes": 536870912, "exceeded": ["memory"]}'::jsonb || change)
$$;
SELECT is(pg_temp.r('{"logBytes": 0}'), NULL, 'logBytes 0 accepted');
SELECT is(pg_temp.r('{"logBytes": 9223372036854775807}'), NULL, 'logBytes up to the bigint range accepted');
SELECT is(pg_temp.r('{"logBytes": null}'), NULL, 'logBytes null accepted');
SELECT is(pg_temp.r('{"logBytes": -1}'), 'QL001 result', 'negative logBytes refused');
SELECT is(pg_temp.r('{"logBytes": 1.5}'), 'QL001 result', 'fractional logBytes refused');
SELECT is(pg_temp.r('{"logBytes": "7"}'), 'QL001 result', 'logBytes as a string refused');
SELECT is(pg_temp.r(pg_temp.limits('{}')), NULL, 'limits of a cgroup run accepted');
SELECT is(pg_temp.r(pg_temp.limits('{"mechanism": "rlimit", "uid": null, "maxProcesses": null, "maxOpenFiles": null, "maxMemoryBytes": null, "exceeded": []}')),
          NULL, 'limits of an rlimit run with nothing set accepted');
SELECT is(pg_temp.r(pg_temp.limits('{"exceeded": ["processes", "memory", "openFiles"]}')), NULL, 'every limit exceeded accepted');
SELECT is(pg_temp.r('{"limits": null}'), NULL, 'limits null accepted');
SELECT is(pg_temp.r(pg_temp.limits('{"mechanism": "docker"}')), 'QL001 result', 'unknown mechanism refused');
SELECT is(pg_temp.r(pg_temp.limits('{"uid": 4294967296}')), 'QL001 result', 'uid past 32 bits refused');
SELECT is(pg_temp.r(pg_temp.limits('{"uid": -1}')), 'QL001 result', 'negative uid refused');
SELECT is(pg_temp.r(pg_temp.limits('{"maxMemoryBytes": -1}')), 'QL001 result', 'negative maxMemoryBytes refused');
SELECT is(pg_temp.r(pg_temp.limits('{"maxOpenFiles": 1.5}')), 'QL001 result', 'fractional maxOpenFiles refused');
SELECT is(pg_temp.r(pg_temp.limits('{"maxProcesses": "10"}')), 'QL001 result', 'maxProcesses as a string refused');
SELECT is(pg_temp.r(pg_temp.limits('{"exceeded": ["memory", "memory"]}')), 'QL001 result', 'a repeated exceeded value refused');
SELECT is(pg_temp.r(pg_temp.limits('{"exceeded": ["cpu"]}')), 'QL001 result', 'an unknown exceeded value refused');
SELECT is(pg_temp.r(pg_temp.limits('{"exceeded": "memory"}')), 'QL001 result', 'exceeded not an array refused');
SELECT is(pg_temp.r(pg_temp.limits('{"extra": 1}')), 'QL001 result', 'an unknown limits field refused');
SELECT is(pg_temp.r(jsonb_build_object('limits', (pg_temp.limits('{}') -> 'limits') - 'uid'::text)), 'QL001 result',
          'a missing limits field refused (all six are present, null where unset)');
SELECT is(pg_temp.r('{"limits": []}'), 'QL001 result', 'limits not an object refused');
SELECT throws_ok(format('SELECT ql_private.validate_result(%L)',
                        '{"durationMs": 1, "outputTail": "", "outputBytes": 0}'::jsonb || pg_temp.limits('{"uid": -1}')),
                 'QL001', 'result.limits.uid must be null or an integer 0..4294967295', 'the message names the limits field');
SELECT cmp_ok(octet_length(('{"durationMs": 9223372036854775807, "outputBytes": 9223372036854775807, "exitCode": -2147483648, '
                            '"logBytes": 9223372036854775807, "outputTail": "' || repeat('€', 2730) || 'ab"}')::jsonb::text)
              + octet_length((pg_temp.limits('{"uid": 4294967295, "maxProcesses": 9223372036854775807, "maxOpenFiles": 9223372036854775807, "maxMemoryBytes": 9223372036854775807, "exceeded": ["processes", "memory", "openFiles"]}'))::text),
              '<', 16384, 'the largest valid result fits a 16 KiB complete request');

SELECT throws_ok($$SELECT ql_private.validate_result('{"durationMs": -1, "outputTail": "", "outputBytes": 0}')$$,
                 'QL001', 'result.durationMs must be an integer >= 0', 'the message names the field');

SELECT * FROM finish();
ROLLBACK;
