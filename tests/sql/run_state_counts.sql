-- ql.run_state_counts (SPEC §10): runs per state in lifecycle order, exact up
-- to the cap; ql_readonly and ql_runtime read, the ingress cannot; no writes.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3 FROM ql_test.enqueue(:'task', 5) r \gset
SELECT ql_test.fake_lease(:'r1', :'s1', false) IS NOT NULL AS leased \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) IS NOT NULL AS leased \gset
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp() WHERE id = :'r3'::uuid;

CREATE FUNCTION pg_temp.runs_of(counts jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_object_agg(e ->> 'state', (e ->> 'runs')::integer)
      FROM jsonb_array_elements(counts -> 'states') e
$$;

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.run_state_counts() AS counts \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is((SELECT array_agg(e ->> 'state') FROM jsonb_array_elements(:'counts'::jsonb -> 'states') e),
          ARRAY['queued', 'dispatching', 'starting', 'running', 'succeeded', 'failed', 'cancelled'],
          'every state, in lifecycle order');
SELECT is(pg_temp.runs_of(:'counts'),
          '{"queued": 2, "dispatching": 1, "starting": 1, "running": 0, "succeeded": 0, "failed": 1, "cancelled": 0}'::jsonb,
          'exact counts per state');
SELECT ok(NOT EXISTS (SELECT 1 FROM jsonb_array_elements(:'counts'::jsonb -> 'states') e
                       WHERE (e ->> 'capped')::boolean OR e -> 'estimate' <> 'null'),
          'below the cap: nothing capped, no estimate');

-- Past the cap: runs are capped at 1000 and the estimate comes from statistics.
INSERT INTO ql_private.runs (project_id, task_id, execution_revision_id, state, finished_at)
SELECT r.project_id, r.task_id, r.execution_revision_id, 'succeeded', clock_timestamp()
  FROM ql_private.runs r, generate_series(1, 1001) WHERE r.id = :'r3'::uuid;
ANALYZE ql_private.runs;
SET LOCAL ROLE ql_runtime;
SELECT ql.run_state_counts() -> 'states' -> 4 AS succeeded \gset
RESET ROLE;
SELECT is(:'succeeded'::jsonb - 'estimate',
          '{"state": "succeeded", "runs": 1000, "capped": true}'::jsonb, 'past the cap: 1000, capped');
SELECT ok((:'succeeded'::jsonb ->> 'estimate')::bigint > 1000, 'past the cap: a planner estimate above the cap');

SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.run_state_counts()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
