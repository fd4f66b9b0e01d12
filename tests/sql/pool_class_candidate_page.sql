-- ql_private.pool_class_candidate_page (SPEC §3.1, §13.3): the class page of a
-- worker restricted to granted pools — only the given pools' runs of the given
-- placement classes, in key order across them, ready and due; limit + 1 rows;
-- read through the pool x class keysets (migration 0024), so a head of other
-- classes' runs in the same pool is never read.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.create_pool('acme', 'b') ->> 'poolId' AS pb \gset
SELECT ql.create_pool('acme', 'c') ->> 'poolId' AS pc \gset
SELECT ql.publish_revision('acme', 'gpu-a', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'),
    'acme/a') ->> 'taskId' AS ga \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
SELECT ql.publish_revision('acme', 'tc', ql_test.command(), 'acme/c') ->> 'taskId' AS tc \gset
-- A head of 30 gpu runs in A at a higher priority, then the plain ones.
SELECT (ql_test.enqueue(:'ga', 30, 5))[1] AS g1 \gset
SELECT (ql_test.enqueue(:'tc', 50))[1] AS c1 \gset
SELECT r[1] AS a1, r[2] AS a2 FROM ql_test.enqueue(:'ta', 2) r \gset
SELECT (ql_test.enqueue(:'tb', 1, 3))[1] AS b1 \gset
-- A due scheduled run of A (due_at passed, not yet promoted).
SELECT (ql_test.enqueue(:'ta', 1))[1] AS a3 \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'a3'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() - interval '1 second'
 WHERE run_id = :'a3'::uuid;
SELECT placement_class AS plain FROM ql_private.runs WHERE id = :'a1'::uuid \gset
SELECT placement_class AS gpu FROM ql_private.runs WHERE id = :'g1'::uuid \gset

SELECT results_eq(format($$SELECT run_id FROM ql_private.pool_class_candidate_page(ARRAY[%L, %L]::uuid[],
                            ARRAY[%s], NULL, NULL, NULL, 10, clock_timestamp(), pg_current_snapshot(),
                            pg_current_xact_id_if_assigned())$$, :'pa', :'pb', :plain),
                  format($$VALUES (%L::uuid), (%L::uuid), (%L::uuid), (%L::uuid)$$, :'b1', :'a1', :'a2', :'a3'),
                  'pools A and B, the plain class: priority first, then queue order, the due run included; the gpu head and C never');
SELECT is((SELECT count(*) FROM ql_private.pool_class_candidate_page(ARRAY[:'pa']::uuid[], ARRAY[:gpu], NULL,
                  NULL, NULL, 10, clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())),
          11::bigint, 'limit + 1 rows (truncated is exact)');
SELECT is((SELECT count(*) FROM ql_private.pool_class_candidate_page(ARRAY[:'pb']::uuid[], ARRAY[:gpu], NULL,
                  NULL, NULL, 10, clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())),
          0::bigint, 'a class without runs in the pool: no row');
SELECT is((SELECT count(*) FROM ql_private.pool_class_candidate_page('{}'::uuid[], ARRAY[:plain], NULL, NULL,
                  NULL, 10, clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())),
          0::bigint, 'no pool: no row');
SELECT results_eq(format($$SELECT run_id FROM ql_private.pool_class_candidate_page(ARRAY[%L]::uuid[], ARRAY[%s],
                            0::smallint, (SELECT queue_seq FROM ql_private.runs WHERE id = %L), %L, 10,
                            clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())$$,
                            :'pa', :plain, :'a1', :'a1'),
                  format($$VALUES (%L::uuid), (%L::uuid)$$, :'a2', :'a3'), 'the keyset position is respected');
-- The plan (sequential scans off, as ql.pull_offer pins): the pool x class keysets.
CREATE FUNCTION pg_temp.plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    line text;
    plan text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN ' || q LOOP
        plan := plan || line || E'\n';
    END LOOP;
    RETURN plan;
END
$$;
SET LOCAL enable_seqscan = off;
SELECT ok(pg_temp.plan(format(
              $$SELECT * FROM ql_private.pool_class_candidate_page(ARRAY[%L]::uuid[], ARRAY[%s], NULL, NULL,
                NULL, 10, now(), '1:1:'::pg_snapshot, NULL)$$, :'pa', :plain)) LIKE '%runs_pool_class_keyset%',
          'the ready runs are read from runs_pool_class_keyset');
SELECT ok(pg_temp.plan(format(
              $$SELECT * FROM ql_private.pool_class_candidate_page(ARRAY[%L]::uuid[], ARRAY[%s], NULL, NULL,
                NULL, 10, now(), '1:1:'::pg_snapshot, NULL)$$, :'pa', :plain)) LIKE '%runs_pool_class_due%',
          'the due runs are read from runs_pool_class_due');

SELECT * FROM finish();
ROLLBACK;
