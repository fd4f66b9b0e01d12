-- ql_private.validate_placement: only the exact normalized placement gets through;
-- QL001 shape, QL002 oversize, QL003 semver, each naming the JSON path.
BEGIN;
SELECT plan(37);

CREATE TEMP TABLE base AS SELECT
  '{"required":{"executors":["gpu","remote-worker"],"labels":{"region":["eu-1","eu-2"]},
                "runtimes":{"python":[">=3.11.0","<4.0.0-0"],"node":[]}},
    "preferred":[{"weight":10,"labels":{"disk":["ssd"]},"runtimes":{}},
                 {"weight":100,"labels":{},"runtimes":{"java":["=21.0.0-rc.1"]}}]}'::jsonb AS p;
-- v(path, value): the base placement with one member replaced (or removed when NULL).
CREATE FUNCTION pg_temp.v(path text[], value jsonb) RETURNS void LANGUAGE sql AS $$
  SELECT ql_private.validate_placement(
    CASE WHEN value IS NULL THEN (SELECT p #- path FROM base) ELSE (SELECT jsonb_set(p, path, value) FROM base) END)
$$;
CREATE FUNCTION pg_temp.strs(n integer, prefix text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_agg(prefix || lpad(i::text, 3, '0') ORDER BY i) FROM generate_series(1, n) i
$$;

SELECT lives_ok($$SELECT ql_private.validate_placement((SELECT p FROM base))$$, 'the normalized example is valid');
SELECT lives_ok($$SELECT ql_private.validate_placement(
  '{"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}},"preferred":[]}')$$,
  'the minimal normalized placement is valid');
SELECT lives_ok($$SELECT pg_temp.v('{required,labels,region}', pg_temp.strs(32, 'v'))$$, '32 label values are allowed');

-- QL001: shape
SELECT throws_ok($$SELECT ql_private.validate_placement(NULL)$$, 'QL001', 'placement must be a JSON object', 'NULL');
SELECT throws_ok($$SELECT ql_private.validate_placement('[]')$$, 'QL001', 'placement must be a JSON object', 'array');
SELECT throws_ok($$SELECT pg_temp.v('{extra}', '1')$$, 'QL001', 'placement: unknown field ''extra''', 'unknown top-level field');
SELECT throws_ok($$SELECT pg_temp.v('{required,extra}', '1')$$, 'QL001', 'placement.required: unknown field ''extra''', 'unknown field in required');
SELECT throws_ok($$SELECT pg_temp.v('{required}', NULL)$$, 'QL001', 'placement.required must be a JSON object', 'required missing');
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', NULL)$$, 'QL001', 'placement.required.executors must be a JSON array', 'executors missing');
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', '[]')$$, 'QL001', 'placement.required.executors must not be empty', 'executors empty');
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', '["Remote"]')$$, 'QL001', 'placement.required.executors[0] must match ^[a-z0-9][a-z0-9-]{0,62}$', 'executor name characters');
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', '["a","a"]')$$, 'QL001', 'placement.required.executors[1] is a duplicate', 'duplicate executor');
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', '["remote-worker","gpu"]')$$, 'QL001', 'placement.required.executors[1] is out of order (must be sorted)', 'unsorted executors');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels}', NULL)$$, 'QL001', 'placement.required.labels must be a JSON object', 'labels missing');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,Region}', '["x"]')$$, 'QL001', 'placement.required.labels: key ''Region'' must match ^[a-z0-9][a-z0-9._/-]{0,62}$', 'label key characters');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '"eu-1"')$$, 'QL001', 'placement.required.labels["region"] must be a JSON array of strings', 'label value not an array');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '[]')$$, 'QL001', 'placement.required.labels["region"] must not be empty', 'empty label value set');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '["eu-2","eu-1"]')$$, 'QL001', 'placement.required.labels["region"][1] is out of order (must be sorted)', 'unsorted label values');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '["eu-1","eu-1"]')$$, 'QL001', 'placement.required.labels["region"][1] is a duplicate', 'duplicate label value');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '["a\nb"]')$$, 'QL001', 'placement.required.labels["region"][0] contains a control or invisible character', 'control character in a label value');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', '["a\u202eb"]')$$, 'QL001', NULL, 'bidi override in a label value');
SELECT throws_ok($$SELECT pg_temp.v('{required,runtimes,Py}', '[]')$$, 'QL001', NULL, 'runtime name characters');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,0,weight}', '0')$$, 'QL001', 'placement.preferred[0].weight must be an integer 1..100', 'weight 0');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,1,weight}', '101')$$, 'QL001', 'placement.preferred[1].weight must be an integer 1..100', 'weight 101');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,0,weight}', '1.5')$$, 'QL001', NULL, 'fractional weight');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,0,weight}', '"10"')$$, 'QL001', NULL, 'weight as a string');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,0,extra}', 'true')$$, 'QL001', 'placement.preferred[0]: unknown field ''extra''', 'unknown field in a preferred term');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,1,runtimes}', NULL)$$, 'QL001', 'placement.preferred[1].runtimes must be a JSON object', 'preferred runtimes missing');

-- QL002: oversize
SELECT throws_ok($$SELECT pg_temp.v('{required,executors}', pg_temp.strs(9, 'e'))$$, 'QL002', 'placement.required.executors has more than 8 entries', '9 executors');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels}', (SELECT jsonb_object_agg('k' || i, '["v"]'::jsonb) FROM generate_series(1, 33) i))$$, 'QL002', 'placement.required.labels has more than 32 keys', '33 labels');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,0,labels,disk}', pg_temp.strs(33, 'v'))$$, 'QL002', 'placement.preferred[0].labels["disk"] has more than 32 values', '33 label values');
SELECT throws_ok($$SELECT pg_temp.v('{required,labels,region}', to_jsonb(ARRAY[repeat('x', 129)]))$$, 'QL002', 'placement.required.labels["region"][0] is longer than 128 characters', '129-character label value');
SELECT throws_ok($$SELECT pg_temp.v('{required,runtimes}', (SELECT jsonb_object_agg('r' || i, '[]'::jsonb) FROM generate_series(1, 17) i))$$, 'QL002', 'placement.required.runtimes has more than 16 names', '17 runtimes');
SELECT throws_ok($$SELECT pg_temp.v('{preferred}', (SELECT jsonb_agg('{"weight":1,"labels":{},"runtimes":{}}'::jsonb) FROM generate_series(1, 17)))$$, 'QL002', 'placement.preferred has more than 16 terms', '17 preferred terms');

-- QL003: comparators
SELECT throws_ok($$SELECT pg_temp.v('{required,runtimes,python}', '[">=3.11"]')$$, 'QL003',
  'placement.required.runtimes["python"][0]: ''3.11'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'partial version');
SELECT throws_ok($$SELECT pg_temp.v('{preferred,1,runtimes,java}', '["~21.0.0"]')$$, 'QL003',
  'placement.preferred[1].runtimes["java"][0] must start with one of >=, >, <=, <, =', 'tilde not desugared');
SELECT throws_ok($$SELECT pg_temp.v('{required,runtimes,node}', '[">=20.0.0+build"]')$$, 'QL003',
  'placement.required.runtimes["node"][0] must not carry build metadata', 'build metadata in a comparator');

SELECT * FROM finish();
ROLLBACK;
