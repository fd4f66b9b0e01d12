-- ql_private.offer_projection: the offer rebuilt from the durable lease, its
-- run and the lease's pinned revision — equal to the first answer of the
-- claim (ql.pull_offer), whatever changed on the run or the task since; NULL
-- for an unknown lease id.
BEGIN;
SELECT plan(4);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT (ql_test.enqueue(:'task'))[1] AS r1 \gset
SELECT ql_test.claim('w1', :'s1', '00000000-0000-4000-8000-000000000001', 't1') AS first \gset
SELECT (ql_test.lease('00000000-0000-4000-8000-000000000001')).id AS lid \gset

SELECT is(ql_private.offer_projection(:lid), :'first'::jsonb, 'the projection is the claim''s offer');
-- A new revision of the task and the run moving on change nothing: the lease pins its revision.
SELECT ql_test.publish('proj', 'task', ql_test.command('["echo","v2"]')) IS NOT NULL AS c \gset
UPDATE ql_private.runs SET state = 'running', updated_at = clock_timestamp() + interval '1 hour'
 WHERE id = :'r1'::uuid;
SELECT is(ql_private.offer_projection(:lid), :'first'::jsonb,
          'after a new revision of the task and a run update: the same offer');
SELECT is(ql_private.offer_projection(:lid) #>> '{executionRevision,spec,argv}', '["true"]',
          '... built from the lease''s pinned revision');
SELECT is(ql_private.offer_projection(-1), NULL, 'an unknown lease id -> NULL');

SELECT * FROM finish();
ROLLBACK;
