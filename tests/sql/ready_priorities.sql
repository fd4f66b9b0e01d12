-- ql_private.ready_priorities: the distinct priorities of the ready queue, as
-- -priority in runs_candidate_keyset order (highest first), at most p_limit —
-- scheduled, cancel-requested and dispatching runs are not ready.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT has_function('ql_private', 'ready_priorities', ARRAY['integer'],
                    'ql_private.ready_priorities(integer) exists');
SELECT is((SELECT array_agg(neg) FROM ql_private.ready_priorities(10) AS neg), NULL,
          'an empty queue has no ready priority');

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.enqueue(:'plain', 2, 5) AS p5 \gset
SELECT ql_test.enqueue(:'plain', 3, 0) AS p0 \gset
SELECT ql_test.enqueue(:'plain', 1, -3) AS pm3 \gset
SELECT ql_test.enqueue(:'plain', 1, 9) AS p9 \gset
SELECT ql_test.enqueue(:'plain', 1, 7) AS p7 \gset

SELECT is((SELECT array_agg(neg) FROM ql_private.ready_priorities(10) AS neg),
          ARRAY[-9, -7, -5, 0, 3],
          'one entry per distinct priority, highest first, negated (the index key)');
SELECT is((SELECT array_agg(neg) FROM ql_private.ready_priorities(2) AS neg), ARRAY[-9, -7],
          'at most p_limit priorities, the highest ones');

-- Not ready: scheduled for later, cancel-requested, dispatching.
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour'
 WHERE id = (:'p9'::text[])[1]::uuid;
UPDATE ql_private.runs SET cancel_requested = true WHERE id = (:'p7'::text[])[1]::uuid;
UPDATE ql_private.runs SET state = 'dispatching' WHERE id = (:'pm3'::text[])[1]::uuid;
SELECT is((SELECT array_agg(neg) FROM ql_private.ready_priorities(10) AS neg), ARRAY[-5, 0],
          'scheduled, cancel-requested and dispatching runs add no priority');

SELECT is((SELECT l.lanname || '/' || p.provolatile::text || '/' || p.prosecdef
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.ready_priorities(integer)'::regprocedure),
          'sql/s/false', 'plain SQL, STABLE, not SECURITY DEFINER (runs as its caller)');
SELECT ok(NOT has_function_privilege('ql_readonly', 'ql_private.ready_priorities(integer)',
                                     'EXECUTE'), 'no API role may call it directly');

SELECT * FROM finish();
ROLLBACK;
