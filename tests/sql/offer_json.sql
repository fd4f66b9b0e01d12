-- ql_private.offer_json: the offer@v1 body from a lease, its run and its pinned
-- revision row — every field from the right row, `placement` only when the
-- revision has one (R-REV-2), `signature` null or {kid, jws}, the `lease`
-- object of lease_json, never the token digest; pure (the rows passed decide,
-- not the tables: the run row before the claim's own update gives the same JSON).
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task', ql_test.command('["echo","hi"]',
    '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}}}')) AS pub \gset
SELECT :'pub'::jsonb ->> 'taskId' AS task, :'pub'::jsonb ->> 'revisionId' AS rev \gset
SELECT (ql_test.enqueue(:'task', 1, 4))[1] AS r1 \gset
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS o1 \gset

-- oj(offer [, placement NULL'ed, signed]): offer_json of the stored rows, the
-- revision row changed in memory only.
CREATE FUNCTION pg_temp.oj(offer text, drop_placement boolean DEFAULT false,
                           signed boolean DEFAULT false) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    l ql_private.run_leases;
    r ql_private.runs;
    er ql_private.execution_revisions;
BEGIN
    SELECT * INTO STRICT l FROM ql_private.run_leases x WHERE x.offer_id = offer::uuid;
    SELECT * INTO STRICT r FROM ql_private.runs x WHERE x.id = l.run_id;
    SELECT * INTO STRICT er FROM ql_private.execution_revisions x WHERE x.id = l.execution_revision_id;
    IF drop_placement THEN
        er.placement := NULL;
    END IF;
    IF signed THEN
        er.signature_kid := 'k1';
        er.signature_jws := 'eyJhbGciOiJFZERTQSJ9..' || repeat('A', 86);
    END IF;
    RETURN ql_private.offer_json(l, r, er);
END
$$;
SELECT pg_temp.oj(:'o1') AS o \gset
SELECT ql_test.lease(:'o1') AS l \gset

SELECT is(:'o'::jsonb ->> 'offerId', :'o1', 'offerId is the lease''s');
SELECT is(:'o'::jsonb -> 'target', jsonb_build_object('workerId', :'w1', 'sessionId', :'s1', 'generation', 1),
          'target: the lease''s worker, session and generation');
SELECT is(:'o'::jsonb -> 'candidate',
          (SELECT jsonb_build_object('runId', r.id, 'attemptId', r.current_attempt_id,
                                     'projectId', r.project_id, 'taskId', r.task_id,
                                     'executionRevisionId', r.execution_revision_id, 'priority', 4,
                                     'queuedAtMs', floor(extract(epoch FROM r.created_at) * 1000)::bigint)
             FROM ql_private.runs r WHERE r.id = :'r1'::uuid),
          'candidate: the run''s ids, priority and queuedAtMs (ms, floored)');
SELECT is(:'o'::jsonb #> '{executionRevision,spec,argv}', '["echo","hi"]'::jsonb,
          'executionRevision.spec is the revision''s spec');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'o'::jsonb -> 'executionRevision') k),
          ARRAY['contentDigest', 'createdAtMs', 'executor', 'id', 'kind', 'placement', 'revision',
                'signature', 'spec', 'taskId'], 'executionRevision: exactly its fields');
SELECT is(:'o'::jsonb #>> '{executionRevision,id}', :'rev', '... of the pinned revision');
SELECT is(:'o'::jsonb #> '{executionRevision,placement}',
          '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}}}'::jsonb,
          '... with its placement');
SELECT is(:'o'::jsonb #> '{executionRevision,signature}', 'null'::jsonb, 'an unsigned revision: signature null');
SELECT is(pg_temp.oj(:'o1', signed => true) #> '{executionRevision,signature}',
          jsonb_build_object('kid', 'k1', 'jws', 'eyJhbGciOiJFZERTQSJ9..' || repeat('A', 86)),
          'a signed one: signature {kid, jws}');
SELECT ok(NOT pg_temp.oj(:'o1', drop_placement => true) -> 'executionRevision' ? 'placement',
          'a revision without placement: no placement key invented (R-REV-2)');
SELECT is(:'o'::jsonb -> 'lease', ql_private.lease_json(:'l'::ql_private.run_leases),
          'lease: the lease_json of the lease row');
SELECT is(:'o'::jsonb ->> 'contentDigest', (:'l'::ql_private.run_leases).content_digest,
          'contentDigest is the lease''s pinned digest');
SELECT ok(NOT (:'o'::text ~ encode((:'l'::ql_private.run_leases).token_digest, 'hex')),
          'never the token digest');
-- Only immutable facts of the run: its state changed after the claim changes nothing.
UPDATE ql_private.runs SET state = 'running', updated_at = clock_timestamp() + interval '1 hour'
 WHERE id = :'r1'::uuid;
SELECT is(pg_temp.oj(:'o1'), :'o'::jsonb, 'the run''s state and updated_at do not enter the offer');

SELECT * FROM finish();
ROLLBACK;
