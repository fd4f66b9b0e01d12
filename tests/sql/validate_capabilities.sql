-- ql_private.validate_capabilities: only a canonical qinglong/worker-capabilities@v1
-- document gets through; QL001 shape, QL002 oversize, QL003 semver, naming the path.
BEGIN;
SELECT plan(24);

CREATE TEMP TABLE base AS SELECT
  '{"schema":"qinglong/worker-capabilities@v1","executors":["gpu","remote-worker"],
    "labels":{"region":"eu-1","team/ml":"Ünïcode ok"},
    "runtimes":{"python":"3.12.1","java":"21.0.2+13","deno":"2.0.0-rc.1"},"slots":4}'::jsonb AS c;
CREATE FUNCTION pg_temp.v(path text[], value jsonb) RETURNS void LANGUAGE sql AS $$
  SELECT ql_private.validate_capabilities(
    CASE WHEN value IS NULL THEN (SELECT c #- path FROM base) ELSE (SELECT jsonb_set(c, path, value) FROM base) END)
$$;

SELECT lives_ok($$SELECT ql_private.validate_capabilities((SELECT c FROM base))$$, 'a canonical document is valid');
SELECT lives_ok($$SELECT pg_temp.v('{slots}', '256')$$, 'slots 256 is valid');
SELECT lives_ok($$SELECT pg_temp.v('{labels}', '{}')$$, 'no labels is valid');

-- QL001
SELECT throws_ok($$SELECT ql_private.validate_capabilities(NULL)$$, 'QL001', 'capabilities must be a JSON object', 'NULL');
SELECT throws_ok($$SELECT pg_temp.v('{extra}', '1')$$, 'QL001', 'capabilities: unknown field ''extra''', 'unknown field');
SELECT throws_ok($$SELECT pg_temp.v('{slots}', NULL)$$, 'QL001', 'capabilities.slots is missing', 'missing field');
SELECT throws_ok($$SELECT pg_temp.v('{schema}', '"qinglong/worker-capabilities@v2"')$$, 'QL001', 'capabilities.schema must be "qinglong/worker-capabilities@v1"', 'wrong schema id');
SELECT throws_ok($$SELECT pg_temp.v('{executors}', '[]')$$, 'QL001', 'capabilities.executors must not be empty', 'no executors');
SELECT throws_ok($$SELECT pg_temp.v('{executors}', '["remote-worker","gpu"]')$$, 'QL001', 'capabilities.executors[1] is out of order (must be sorted)', 'unsorted executors');
SELECT throws_ok($$SELECT pg_temp.v('{executors}', '["gpu","gpu"]')$$, 'QL001', 'capabilities.executors[1] is a duplicate', 'duplicate executors');
SELECT throws_ok($$SELECT pg_temp.v('{executors}', '["-x"]')$$, 'QL001', NULL, 'executor name must start with [a-z0-9]');
SELECT throws_ok($$SELECT pg_temp.v('{labels,"bad key"}', '"x"')$$, 'QL001', 'capabilities.labels: key ''bad key'' must match ^[a-z0-9][a-z0-9._/-]{0,62}$', 'label key characters');
SELECT throws_ok($$SELECT pg_temp.v('{labels,region}', '["eu-1"]')$$, 'QL001', 'capabilities.labels["region"] must be a string', 'label value not a string');
SELECT throws_ok($$SELECT pg_temp.v('{labels,region}', '"a\u0007b"')$$, 'QL001', 'capabilities.labels["region"] contains a control or invisible character', 'control character');
SELECT throws_ok($$SELECT pg_temp.v('{runtimes,python}', '3')$$, 'QL001', 'capabilities.runtimes["python"] must be a string', 'version not a string');
SELECT throws_ok($$SELECT pg_temp.v('{slots}', '0')$$, 'QL001', 'capabilities.slots must be at least 1', 'slots 0');
SELECT throws_ok($$SELECT pg_temp.v('{slots}', '2.5')$$, 'QL001', 'capabilities.slots must be an integer', 'fractional slots');

-- QL002
SELECT throws_ok($$SELECT pg_temp.v('{slots}', '257')$$, 'QL002', 'capabilities.slots is above 256', 'slots 257');
SELECT throws_ok($$SELECT pg_temp.v('{executors}', (SELECT jsonb_agg('e' || i ORDER BY i) FROM generate_series(1, 9) i))$$, 'QL002', 'capabilities.executors has more than 8 entries', '9 executors');
SELECT throws_ok($$SELECT pg_temp.v('{labels}', (SELECT jsonb_object_agg('k' || i, 'v') FROM generate_series(1, 33) i))$$, 'QL002', 'capabilities.labels has more than 32 keys', '33 labels');
SELECT throws_ok($$SELECT pg_temp.v('{labels,region}', to_jsonb(repeat('x', 129)))$$, 'QL002', 'capabilities.labels["region"] is longer than 128 characters', '129-character label value');
SELECT throws_ok($$SELECT pg_temp.v('{runtimes}', (SELECT jsonb_object_agg('r' || i, '1.0.0') FROM generate_series(1, 17) i))$$, 'QL002', 'capabilities.runtimes has more than 16 names', '17 runtimes');

-- QL003
SELECT throws_ok($$SELECT pg_temp.v('{runtimes,python}', '"3.12"')$$, 'QL003',
  'capabilities.runtimes["python"]: ''3.12'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'partial version');
SELECT throws_ok($$SELECT pg_temp.v('{runtimes,deno}', '"2.0.0-rc.01"')$$, 'QL003',
  'capabilities.runtimes["deno"]: ''2.0.0-rc.01'' is not SemVer 2.0.0 (numeric prerelease identifier has a leading zero)', 'leading zero in prerelease');

SELECT * FROM finish();
ROLLBACK;
