-- ql.list_runs (SPEC §9.4): newest first, keyset pages with an opaque cursor,
-- task and state filters (several states merged), bounds and malformed input
-- with their COLUMN, read-only; ql_readonly and ql_runtime read, the ingress
-- cannot.
BEGIN;
SELECT plan(21);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'a') ->> 'taskId' AS ta \gset
SELECT ql_test.publish('proj', 'b') ->> 'taskId' AS tb \gset
SELECT ql_test.enqueue(:'ta', 3, 1) AS ra \gset
SELECT ql_test.enqueue(:'tb', 2, 0) AS rb \gset
SELECT ql.enqueue_runs(:'ta', 0, 1, p_delay_ms => 60000) -> 'runIds' ->> 0 AS rs \gset
UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp()
 WHERE id = (:'ra'::text[])[2]::uuid;
UPDATE ql_private.runs SET state = 'running' WHERE id = (:'rb'::text[])[1]::uuid;

CREATE FUNCTION pg_temp.ids(page jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e ->> 'runId' ORDER BY o), '{}') FROM jsonb_array_elements(page -> 'runs') WITH ORDINALITY x(e, o)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.ids(jsonb) TO ql_readonly;

SELECT has_function('ql', 'list_runs', ARRAY['text', 'text[]', 'integer', 'text'], 'ql.list_runs exists');
SELECT ql_private.epoch_ms(due_at) AS rs_due FROM ql_private.runs WHERE id = :'rs'::uuid \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.list_runs() AS all_runs \gset
SELECT is(pg_temp.ids(:'all_runs'::jsonb),
          ARRAY[:'rs', (:'rb'::text[])[2], (:'rb'::text[])[1], (:'ra'::text[])[3], (:'ra'::text[])[2], (:'ra'::text[])[1]],
          'every run, newest first (queue_seq DESC)');
SELECT is(:'all_runs'::jsonb -> 'next', 'null'::jsonb, 'one page: next is null');
SELECT is((:'all_runs'::jsonb -> 'runs' -> 0) - 'queuedAtMs' - 'updatedAtMs' - 'notBeforeMs',
          jsonb_build_object('runId', :'rs', 'taskId', :'ta', 'project', 'proj', 'taskName', 'a',
                             'pool', 'proj/default', 'state', 'queued', 'priority', 0, 'attempts', 1),
          'a row: runId, taskId, project, taskName, pool, state, priority, attempts (+ times)');
SELECT is((:'all_runs'::jsonb #>> '{runs,0,notBeforeMs}')::bigint,
          :rs_due::bigint,
          'notBeforeMs of a scheduled run = its due time');
SELECT ql.list_runs(p_limit => 2) AS p1 \gset
SELECT is(pg_temp.ids(:'p1'::jsonb), ARRAY[:'rs', (:'rb'::text[])[2]], 'limit 2: the two newest');
SELECT ok(:'p1'::jsonb ->> 'next' ~ '^[0-9]+$', 'next is an opaque cursor string');
SELECT is(pg_temp.ids(ql.list_runs(p_limit => 2, p_after => :'p1'::jsonb ->> 'next')),
          ARRAY[(:'rb'::text[])[1], (:'ra'::text[])[3]], 'the cursor continues where the page ended');
SELECT is(pg_temp.ids(ql.list_runs(p_task_id => :'ta')),
          ARRAY[:'rs', (:'ra'::text[])[3], (:'ra'::text[])[2], (:'ra'::text[])[1]], 'task filter');
SELECT is(pg_temp.ids(ql.list_runs(p_states => ARRAY['failed', 'running'])),
          ARRAY[(:'rb'::text[])[1], (:'ra'::text[])[2]], 'several states merged newest first');
SELECT is(pg_temp.ids(ql.list_runs(p_task_id => :'ta', p_states => ARRAY['queued'], p_limit => 1)),
          ARRAY[:'rs'], 'task + state + limit');
SELECT is(pg_temp.ids(ql.list_runs(p_task_id => gen_random_uuid()::text)), '{}'::text[], 'an unknown task lists nothing');

SELECT is(ql_test.error_of('SELECT ql.list_runs(p_limit => 0)'), 'QL006 limit', 'limit 0 -> QL006 limit');
SELECT is(ql_test.error_of('SELECT ql.list_runs(p_limit => 1001)'), 'QL006 limit', 'limit 1001 -> QL006 limit');
SELECT is(ql_test.error_of($$SELECT ql.list_runs(p_after => 'abc')$$), 'QL001 after', 'malformed cursor -> QL001 after');
SELECT is(ql_test.error_of($$SELECT ql.list_runs(p_states => ARRAY['queued', 'lost'])$$), 'QL001 state',
          'unknown state -> QL001 state');
SELECT is(ql_test.error_of($$SELECT ql.list_runs(p_task_id => 'x')$$), 'QL001 taskId', 'malformed task -> QL001 taskId');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'reads write nothing');
SET LOCAL ROLE ql_runtime;
SELECT is(jsonb_array_length(ql.list_runs() -> 'runs'), 6, 'ql_runtime reads it too');
RESET ROLE;
-- A run of a task published into another pool lists that pool (SPEC §13.1).
SELECT ql.create_pool('other', 'gpu') IS NOT NULL AS pooled \gset
SELECT ql.publish_revision('other', 'render', ql_test.command(), 'other/gpu') ->> 'taskId' AS tg \gset
SELECT ql_test.enqueue(:'tg') AS rg \gset
SET LOCAL ROLE ql_readonly;
SELECT is((ql.list_runs(p_limit => 1) -> 'runs' -> 0) - 'runId' - 'taskId' - 'queuedAtMs' - 'updatedAtMs' - 'notBeforeMs',
          '{"project": "other", "taskName": "render", "pool": "other/gpu", "state": "queued", "priority": 0, "attempts": 1}'::jsonb,
          'names of another project, task and pool');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.list_runs()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
