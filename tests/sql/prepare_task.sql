-- ql.prepare_task as ql_runtime (SPEC §16.1): the task's id before a signed
-- publish; creates project (default pool) and task without a revision when
-- missing, writes nothing for an existing task; bad names QL001.
BEGIN;
SELECT plan(8);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.prepare_task('prep', 'job') AS first \gset
SELECT ql.prepare_task('prep', 'job') AS again \gset
RESET ROLE;
SELECT is((:'first'::jsonb ->> 'created')::boolean, true, 'a missing task is created');
SELECT results_eq(
    format($$SELECT p.name, pl.name, t.current_revision_id IS NULL
               FROM ql_private.tasks t JOIN ql_private.projects p ON p.id = t.project_id
               JOIN ql_private.pools pl ON pl.id = t.pool_id WHERE t.id = %L::uuid$$,
           :'first'::jsonb ->> 'taskId'),
    $$VALUES ('prep'::text, 'default'::text, true)$$,
    'in project prep, its default pool, without a revision');
SELECT is(:'again'::jsonb, jsonb_build_object('taskId', :'first'::jsonb ->> 'taskId', 'created', false),
          'an existing task: its id, created = false');
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT ql.prepare_task('prep', 'job') AS third \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'an existing task: no writes');

-- The publish that follows finds the task: the id the signature named.
SET LOCAL ROLE ql_runtime;
SELECT ql.publish_revision('prep', 'job', ql_test.command()) AS published \gset
RESET ROLE;
SELECT is(:'published'::jsonb ->> 'taskId', :'first'::jsonb ->> 'taskId',
          'publish_revision revises the prepared task');
SELECT throws_ok($$SELECT ql.enqueue_runs((ql.prepare_task('prep', 'empty') ->> 'taskId'), 0, 1)$$,
                 'QL001', 'task has no published revision',
                 'a prepared task without a revision refuses runs');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.prepare_task('bad name', 'job')$$, 'QL001', NULL, 'bad project: QL001');
SELECT throws_ok($$SELECT ql.prepare_task('prep', NULL)$$, 'QL001', NULL, 'NULL task: QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
