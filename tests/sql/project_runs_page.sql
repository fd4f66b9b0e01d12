-- ql_private.project_runs_page (SPEC §9.4, §13.4): one project's runs, newest
-- first (queue_seq DESC), across its tasks, with the list row fields; states
-- filter (NULL/empty = all, duplicates harmless); keyset cursor `next` only
-- when more rows exist; other projects never listed; QL006 limit, QL001 state /
-- after (COLUMN = wire field).
BEGIN;
SELECT plan(17);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') ->> 'taskId' AS ta \gset
SELECT ql_test.publish('acme', 'test') ->> 'taskId' AS tb \gset
SELECT ql_test.publish('other', 'build') ->> 'taskId' AS tc \gset
SELECT id AS acme FROM ql_private.projects WHERE name = 'acme' \gset
SELECT r[1] AS a1, r[2] AS a2 FROM ql_test.enqueue(:'ta', 2, 0) r \gset
SELECT (ql_test.enqueue(:'tc'))[1] AS c1 \gset
SELECT (ql_test.enqueue(:'tb', 1, 7))[1] AS b1 \gset
SELECT (ql_test.enqueue(:'ta'))[1] AS a3 \gset
UPDATE ql_private.runs SET state = 'cancelled' WHERE id = :'a2'::uuid;

CREATE FUNCTION pg_temp.ids(page jsonb) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(e ->> 'runId' ORDER BY o), '{}')
      FROM jsonb_array_elements(page -> 'runs') WITH ORDINALITY AS x(e, o)
$$;

SELECT is(pg_temp.ids(ql_private.project_runs_page(:'acme', NULL, 10, NULL)),
          ARRAY[:'a3', :'b1', :'a2', :'a1'], 'every task of the project, newest first; the other project''s run never');
SELECT is(ql_private.project_runs_page(:'acme', NULL, 10, NULL) -> 'next', 'null'::jsonb, 'all on one page: next null');
SELECT is(ql_private.project_runs_page(:'acme', '{}', 10, NULL), ql_private.project_runs_page(:'acme', NULL, 10, NULL),
          'empty states = all states');
SELECT is(pg_temp.ids(ql_private.project_runs_page(:'acme', ARRAY['queued'], 10, NULL)),
          ARRAY[:'a3', :'b1', :'a1'], 'states filter: queued only');
SELECT is(pg_temp.ids(ql_private.project_runs_page(:'acme', ARRAY['cancelled', 'cancelled'], 10, NULL)),
          ARRAY[:'a2'], 'a state named twice lists its runs once');
SELECT ql_private.project_runs_page(:'acme', NULL, 2, NULL) AS p1 \gset
SELECT is(pg_temp.ids(:'p1'::jsonb), ARRAY[:'a3', :'b1'], 'limit 2: the two newest');
SELECT is(:'p1'::jsonb ->> 'next', (SELECT queue_seq::text FROM ql_private.runs WHERE id = :'b1'::uuid),
          '... next = the last listed run''s queue_seq');
SELECT ql_private.project_runs_page(:'acme', NULL, 2, :'p1'::jsonb ->> 'next') AS p2 \gset
SELECT is(pg_temp.ids(:'p2'::jsonb), ARRAY[:'a2', :'a1'], 'the next page continues after it');
SELECT is(:'p2'::jsonb -> 'next', 'null'::jsonb, '... and, exactly full with nothing after, has next null');
SELECT is((ql_private.project_runs_page(:'acme', NULL, 10, NULL) -> 'runs' -> 1) - 'queuedAtMs' - 'updatedAtMs'
                                                                               - 'notBeforeMs',
          jsonb_build_object('runId', :'b1', 'taskId', :'tb', 'project', 'acme', 'taskName', 'test',
                             'pool', 'acme/default', 'state', 'queued', 'priority', 7, 'attempts', 1),
          'a row: ids, project, task name, pool, state, priority, attempts');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(
               ql_private.project_runs_page(:'acme', NULL, 1, NULL) -> 'runs' -> 0) k),
          ARRAY['attempts', 'notBeforeMs', 'pool', 'priority', 'project', 'queuedAtMs', 'runId', 'state',
                'taskId', 'taskName', 'updatedAtMs'], '... exactly the list row fields');

SELECT is(ql_test.error_of(format('SELECT ql_private.project_runs_page(%L, NULL, 0, NULL)', :'acme')), 'QL006 limit',
          'limit 0 -> QL006 (COLUMN limit)');
SELECT throws_ok(format('SELECT ql_private.project_runs_page(%L, NULL, 1001, NULL)', :'acme'), 'QL006',
                 'limit must be between 1 and 1000', 'limit 1001 -> QL006');
SELECT throws_ok(format('SELECT ql_private.project_runs_page(%L, NULL, NULL, NULL)', :'acme'), 'QL006', NULL,
                 'limit NULL -> QL006');
SELECT is(ql_test.error_of(format('SELECT ql_private.project_runs_page(%L, ARRAY[%L], 10, NULL)', :'acme', 'done')),
          'QL001 state', 'an unknown state -> QL001 (COLUMN state)');
SELECT is(ql_test.error_of(format('SELECT ql_private.project_runs_page(%L, ARRAY[NULL]::text[], 10, NULL)', :'acme')),
          'QL001 state', 'a NULL state -> QL001');
SELECT is(ql_test.error_of(format('SELECT ql_private.project_runs_page(%L, NULL, 10, %L)', :'acme', '99999999999999999999')),
          'QL001 after', 'a cursor beyond bigint -> QL001 (COLUMN after)');

SELECT * FROM finish();
ROLLBACK;
