-- ql_private.validate_result_limits (SPEC §11): the exact shape of a result's
-- limits; NULL when well-formed, else the problem naming the field.
BEGIN;
SELECT plan(9);

CREATE FUNCTION pg_temp.l(change jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT ql_private.validate_result_limits('{"mechanism": "cgroup", "uid": 1001, "maxProcesses": 256,
        "maxOpenFiles": 1024, "maxMemoryBytes": 536870912, "exceeded": []}'::jsonb || change)
$$;
SELECT is(pg_temp.l('{}'), NULL, 'well-formed: NULL');
SELECT is(pg_temp.l('{"uid": 0, "maxProcesses": 0, "maxOpenFiles": 0, "maxMemoryBytes": 0}'), NULL, 'zeros accepted');
SELECT is(pg_temp.l('{"uid": 4294967295, "exceeded": ["openFiles", "processes"]}'), NULL, 'the largest uid, two limits hit');
SELECT is(pg_temp.l('{"mechanism": null}'), 'result.limits.mechanism must be cgroup or rlimit', 'mechanism null');
SELECT is(pg_temp.l('{"maxOpenFiles": -5}'), 'result.limits.maxOpenFiles must be null or an integer 0..9223372036854775807', 'named field, bounds');
SELECT is(pg_temp.l('{"exceeded": [1]}'), 'result.limits.exceeded must be an array of distinct values from processes, memory, openFiles', 'exceeded items are names');
SELECT is(ql_private.validate_result_limits('{"mechanism": "rlimit"}'),
          'result.limits must have exactly the fields mechanism, uid, maxProcesses, maxOpenFiles, maxMemoryBytes, exceeded',
          'missing fields');
SELECT is(ql_private.validate_result_limits('"cgroup"'), 'result.limits must be an object', 'not an object');
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql_private.validate_result_limits(jsonb)'::regprocedure),
          'i', 'IMMUTABLE (pure)');

SELECT * FROM finish();
ROLLBACK;
