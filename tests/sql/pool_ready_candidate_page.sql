-- ql_private.pool_ready_candidate_page (SPEC §13.3): the ready runs of the given
-- pools only, in key order across them; due scheduled runs are not in it (the
-- pull reads pool_candidate_page while one is due); limit + 1 rows; the plan is
-- a runs_pool_keyset range scan.
BEGIN;
SELECT plan(5);
\ir fixtures.psql

SELECT ql.create_pool('acme', 'a') ->> 'poolId' AS pa \gset
SELECT ql.create_pool('acme', 'b') ->> 'poolId' AS pb \gset
SELECT ql.create_pool('acme', 'c') ->> 'poolId' AS pc \gset
SELECT ql.publish_revision('acme', 'ta', ql_test.command(), 'acme/a') ->> 'taskId' AS ta \gset
SELECT ql.publish_revision('acme', 'tb', ql_test.command(), 'acme/b') ->> 'taskId' AS tb \gset
SELECT ql.publish_revision('acme', 'tc', ql_test.command(), 'acme/c') ->> 'taskId' AS tc \gset
SELECT (ql_test.enqueue(:'tc', 50))[1] AS c1 \gset
SELECT r[1] AS a1, r[2] AS a2 FROM ql_test.enqueue(:'ta', 2) r \gset
SELECT (ql_test.enqueue(:'tb', 1, 3))[1] AS b1 \gset
SELECT (ql_test.enqueue(:'ta', 1))[1] AS a3 \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 second' WHERE id = :'a3'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() - interval '1 second'
 WHERE run_id = :'a3'::uuid;

SELECT results_eq(format($$SELECT run_id FROM ql_private.pool_ready_candidate_page(ARRAY[%L, %L]::uuid[], NULL,
                            NULL, NULL, 10, clock_timestamp(), pg_current_snapshot(),
                            pg_current_xact_id_if_assigned())$$, :'pa', :'pb'),
                  format($$VALUES (%L::uuid), (%L::uuid), (%L::uuid)$$, :'b1', :'a1', :'a2'),
                  'pools A and B: priority first, then queue order; the due run and C''s runs not in it');
SELECT is((SELECT count(*) FROM ql_private.pool_ready_candidate_page(ARRAY[:'pc']::uuid[], NULL, NULL, NULL, 10,
                  clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())), 11::bigint,
          'limit + 1 rows (truncated is exact)');
SELECT is((SELECT count(*) FROM ql_private.pool_ready_candidate_page('{}'::uuid[], NULL, NULL, NULL, 10,
                  clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())), 0::bigint,
          'no pool: no row');
SELECT results_eq(format($$SELECT run_id FROM ql_private.pool_ready_candidate_page(ARRAY[%L]::uuid[],
                            0::smallint, (SELECT queue_seq FROM ql_private.runs WHERE id = %L), %L, 10,
                            clock_timestamp(), pg_current_snapshot(), pg_current_xact_id_if_assigned())$$,
                         :'pa', :'a1', :'a1'),
                  format($$VALUES (%L::uuid)$$, :'a2'), 'the keyset position is respected');
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
              $$SELECT * FROM ql_private.pool_ready_candidate_page(ARRAY[%L]::uuid[], NULL, NULL, NULL, 10,
                now(), '1:1:'::pg_snapshot, NULL)$$, :'pa')) LIKE '%runs_pool_keyset%',
          'the page reads runs_pool_keyset');

SELECT * FROM finish();
ROLLBACK;
