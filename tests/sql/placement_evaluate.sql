-- ql_private.placement_evaluate: required executors/labels/runtimes with the first
-- failing category in that order, preferred scoring, NULL placement = required
-- executor remote-worker (R-REV-2), and no output beyond the category.
BEGIN;
SELECT plan(16);

CREATE TEMP TABLE caps AS SELECT
  '{"schema":"qinglong/worker-capabilities@v1","executors":["gpu","remote-worker"],
    "labels":{"region":"eu-1","disk":"ssd","arch":"x86_64"},
    "runtimes":{"python":"3.12.1","node":"20.11.0","java":"21.0.2+13","deno":"2.0.0-rc.1"},
    "slots":4}'::jsonb AS c;
-- A placement built from parts, so each case states only what it changes.
CREATE FUNCTION pg_temp.pl(executors jsonb DEFAULT '["remote-worker"]', labels jsonb DEFAULT '{}',
                           runtimes jsonb DEFAULT '{}', preferred jsonb DEFAULT '[]')
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('required',
           jsonb_build_object('executors', executors, 'labels', labels, 'runtimes', runtimes),
           'preferred', preferred)
$$;
CREATE FUNCTION pg_temp.ev(p jsonb) RETURNS text LANGUAGE sql AS $$
  SELECT format('%s/%s/%s', e.passed::text, coalesce(e.category, '-'), e.score)
    FROM caps, ql_private.placement_evaluate(p, caps.c) e
$$;

-- R-REV-2: NULL placement requires exactly executor remote-worker.
SELECT is(pg_temp.ev(NULL), 'true/-/0', 'NULL placement passes on a remote-worker');
SELECT is(
  (SELECT format('%s/%s/%s', e.passed::text, e.category, e.score)
     FROM ql_private.placement_evaluate(NULL,
            '{"schema":"qinglong/worker-capabilities@v1","executors":["edge"],"labels":{},"runtimes":{},"slots":1}') e),
  'false/executor/0', 'NULL placement fails with executor on a worker without remote-worker');

-- Required terms, one category each.
SELECT is(pg_temp.ev(pg_temp.pl()), 'true/-/0', 'minimal placement passes');
SELECT is(pg_temp.ev(pg_temp.pl(executors => '["gpu","remote-worker"]')), 'true/-/0',
          'every required executor present');
SELECT is(pg_temp.ev(pg_temp.pl(executors => '["remote-worker","tpu"]')), 'false/executor/0',
          'a missing executor -> executor');
SELECT is(pg_temp.ev(pg_temp.pl(labels => '{"region":["eu-1","eu-2"],"disk":["ssd"]}')), 'true/-/0',
          'label values in their allowed sets');
SELECT is(pg_temp.ev(pg_temp.pl(labels => '{"region":["us-1"]}')), 'false/label/0',
          'label value not allowed -> label');
SELECT is(pg_temp.ev(pg_temp.pl(labels => '{"zone":["a"]}')), 'false/label/0',
          'label key absent on the worker -> label');
SELECT is(pg_temp.ev(pg_temp.pl(runtimes => '{"python":[">=3.11.0","<4.0.0-0"],"java":[">=21.0.0"],"node":[]}')),
          'true/-/0', 'runtimes satisfied ([] = any release; build metadata ignored)');
SELECT is(pg_temp.ev(pg_temp.pl(runtimes => '{"python":[">=3.13.0"]}')), 'false/runtime/0',
          'runtime too old -> runtime');
SELECT is(pg_temp.ev(pg_temp.pl(runtimes => '{"ruby":[]}')), 'false/runtime/0',
          'runtime absent -> runtime (even with an empty range)');
SELECT is(pg_temp.ev(pg_temp.pl(runtimes => '{"deno":[">=1.0.0"]}')) || ' ' ||
          pg_temp.ev(pg_temp.pl(runtimes => '{"deno":[">=2.0.0-rc.0"]}')),
          'false/runtime/0 true/-/0', 'a prerelease runtime needs an opt-in comparator on its triple');

-- Category order: executor before label before runtime.
SELECT results_eq(
  $$SELECT pg_temp.ev(p) FROM (VALUES
      (1, pg_temp.pl('["tpu"]', '{"region":["us-1"]}', '{"python":[">=9.0.0"]}')),
      (2, pg_temp.pl('["remote-worker"]', '{"region":["us-1"]}', '{"python":[">=9.0.0"]}')),
      (3, pg_temp.pl('["remote-worker"]', '{"region":["eu-1"]}', '{"python":[">=9.0.0"]}'))) v(i, p)
    ORDER BY i$$,
  ARRAY['false/executor/0', 'false/label/0', 'false/runtime/0'],
  'first failing category wins: executor, then label, then runtime');

-- Preferred scoring.
SELECT is(pg_temp.ev(pg_temp.pl(preferred => '[
    {"weight":10,"labels":{"disk":["ssd"]},"runtimes":{}},
    {"weight":20,"labels":{"disk":["hdd"]},"runtimes":{}},
    {"weight":30,"labels":{},"runtimes":{"node":[">=18.0.0","<21.0.0-0"]}},
    {"weight":40,"labels":{},"runtimes":{"node":[">=21.0.0"]}},
    {"weight":50,"labels":{"arch":["x86_64"]},"runtimes":{"ruby":[]}},
    {"weight":60,"labels":{"arch":["arm64","x86_64"]},"runtimes":{"python":[">=3.0.0"]}},
    {"weight":1,"labels":{},"runtimes":{}}]')),
  'true/-/101', 'score = sum of weights of fully holding preferred terms (10+30+60+1)');
SELECT is(pg_temp.ev(pg_temp.pl(labels => '{"region":["us-1"]}',
                                preferred => '[{"weight":100,"labels":{},"runtimes":{}}]')),
          'false/label/0', 'a failing placement scores 0 whatever its preferred terms');

-- Capabilities must be an object.
SELECT throws_ok($$SELECT ql_private.placement_evaluate(NULL, NULL)$$, 'QL001',
  'capabilities must be a JSON object', 'NULL capabilities');

SELECT * FROM finish();
ROLLBACK;
