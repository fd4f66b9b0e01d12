-- ql_private.producer_task (SPEC §13.4): a task named by id or
-- "<project>/<name>", confined to the token's project — another project's task
-- by id or by name is exactly an unknown one (QL004, COLUMN task); QL001
-- (COLUMN task) for anything else.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS t_acme \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS t_other \gset
SELECT id AS acme FROM ql_private.projects WHERE name = 'acme' \gset

SELECT is(ql_private.producer_task(:'acme', :'t_acme'), :'t_acme'::uuid, 'by id -> the task');
SELECT is(ql_private.producer_task(:'acme', 'acme/build'), :'t_acme'::uuid, 'by "<project>/<name>" -> the task');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', :'t_other'), 'QL004', 'task not found',
                 'another project''s task by id -> QL004');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', 'other/build'), 'QL004', 'task not found',
                 'another project''s task by name -> QL004');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', 'acme/nope'), 'QL004', 'task not found',
                 'an unknown name -> QL004');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', gen_random_uuid()), 'QL004', NULL,
                 'an unknown id -> QL004');
SELECT is(ql_test.error_of(format('SELECT ql_private.producer_task(%L, %L)', :'acme', :'t_other')), 'QL004 task',
          'QL004 carries COLUMN task');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', 'build'), 'QL001',
                 'task must be a task id or "<project>/<name>"', 'a bare name -> QL001');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, %L)', :'acme', upper(:'t_acme')), 'QL001', NULL,
                 'an uppercase id -> QL001');
SELECT throws_ok(format('SELECT ql_private.producer_task(%L, NULL)', :'acme'), 'QL001', NULL, 'NULL -> QL001');
SELECT is(ql_test.error_of(format('SELECT ql_private.producer_task(%L, %L)', :'acme', 'a/b/c')), 'QL001 task',
          'QL001 carries COLUMN task');

SELECT * FROM finish();
ROLLBACK;
