-- ql_private.dispatchable_attempt: the attempt half of the candidate rule.
BEGIN;
SELECT plan(5);
\ir fixtures.psql

SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS run FROM ql_test.enqueue(:'task', 1) r \gset
SELECT current_attempt_id AS att FROM ql_private.runs WHERE id = :'run'::uuid \gset

SELECT is((SELECT count(*) FROM ql_private.dispatchable_attempt(:'att'::uuid, clock_timestamp())),
          1::bigint, 'a claimed remote_worker attempt past not_before is dispatchable');
SELECT is((SELECT count(*) FROM ql_private.dispatchable_attempt(:'att'::uuid, clock_timestamp() - interval '1 hour')),
          0::bigint, 'not before its not_before');
UPDATE ql_private.attempts SET state = 'starting' WHERE id = :'att'::uuid;
SELECT is((SELECT count(*) FROM ql_private.dispatchable_attempt(:'att'::uuid, clock_timestamp())),
          0::bigint, 'an attempt that left claimed is not dispatchable');
SELECT is((SELECT count(*) FROM ql_private.dispatchable_attempt(gen_random_uuid(), clock_timestamp())),
          0::bigint, 'an unknown attempt is not dispatchable');
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql_private.dispatchable_attempt(uuid,timestamptz)'::regprocedure),
          's', 'STABLE (read-only)');

SELECT * FROM finish();
ROLLBACK;
