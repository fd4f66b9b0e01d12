-- ql_private.producer_run (SPEC §13.4): a run a producer names must be of the
-- token's project; another project's run is exactly an unknown one (QL004,
-- COLUMN runId); QL001 (COLUMN runId) for a malformed id.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS t_acme \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS t_other \gset
SELECT id AS acme FROM ql_private.projects WHERE name = 'acme' \gset
SELECT (ql_test.enqueue(:'t_acme'))[1] AS r_acme \gset
SELECT (ql_test.enqueue(:'t_other'))[1] AS r_other \gset

SELECT is(ql_private.producer_run(:'acme', :'r_acme'), :'r_acme'::uuid, 'the project''s run -> its id');
SELECT throws_ok(format('SELECT ql_private.producer_run(%L, %L)', :'acme', :'r_other'), 'QL004', 'run not found',
                 'another project''s run -> QL004, as an unknown one');
SELECT throws_ok(format('SELECT ql_private.producer_run(%L, %L)', :'acme', gen_random_uuid()), 'QL004',
                 'run not found', 'an unknown run -> QL004');
SELECT is(ql_test.error_of(format('SELECT ql_private.producer_run(%L, %L)', :'acme', :'r_other')), 'QL004 runId',
          'QL004 carries COLUMN runId');
SELECT throws_ok(format('SELECT ql_private.producer_run(%L, %L)', :'acme', 'not-a-uuid'), 'QL001',
                 'runId must be a lowercase canonical UUID', 'a malformed id -> QL001');
SELECT is(ql_test.error_of(format('SELECT ql_private.producer_run(%L, NULL)', :'acme')), 'QL001 runId',
          'NULL -> QL001 with COLUMN runId');

SELECT * FROM finish();
ROLLBACK;
