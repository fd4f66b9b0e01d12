-- ql_private.lock_run_attempt: the run and its current attempt, both locked by
-- the calling transaction (xmax set: a row lock here, as nothing else wrote
-- them; attempt -> run, docs/LIFECYCLE.md "Locks"); NULLs
-- for an unknown run; not callable by any API role. The moved-attempt case
-- (locks rolled back, taken again) needs a second connection:
-- tests/py/test_prune_concurrency.py races retries and cancels over it.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS run FROM ql_test.enqueue(:'task', 1) r \gset
SELECT current_attempt_id AS attempt FROM ql_private.runs WHERE id = :'run'::uuid \gset

SELECT ql_private.lock_run_attempt(:'run'::uuid) AS locked \gset
SELECT is((SELECT ((l).run).id::text || ' ' || ((l).attempt).id::text
             FROM (SELECT ql_private.lock_run_attempt(:'run'::uuid) AS l) x),
          :'run' || ' ' || :'attempt', 'returns the run and its current attempt');
SELECT is((SELECT xmax <> '0'::xid FROM ql_private.attempts WHERE id = :'attempt'::uuid),
          true, 'the attempt is locked by this transaction');
SELECT is((SELECT xmax <> '0'::xid FROM ql_private.runs WHERE id = :'run'::uuid),
          true, 'the run is locked by this transaction');
SELECT is((SELECT (l).run IS NULL AND (l).attempt IS NULL
             FROM (SELECT ql_private.lock_run_attempt(gen_random_uuid()) AS l) x),
          true, 'an unknown run -> NULL run and attempt');
SELECT is((SELECT count(*) FROM ql_private.events WHERE run_id = :'run'::uuid AND type <> 'run.queued'),
          0::bigint, 'writes nothing');
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql_private.lock_run_attempt(%L::uuid)', :'run'), '42501', NULL,
                 'no API role can call it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
