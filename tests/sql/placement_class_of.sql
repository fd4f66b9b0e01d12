-- ql_private.placement_class_of: the class of a revision's normalized
-- `required` placement — created on first use, the same id for every revision
-- with an equal `required` (whatever its `preferred`), the default class
-- {"executors":["remote-worker"]} for a revision without placement (R-REV-2),
-- the existing class row locked FOR KEY SHARE (ql.prune_fleet skips it), QL004
-- for an unknown revision.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'gpu1', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'revisionId' AS rev1 \gset
SELECT ql_test.publish('proj', 'gpu2', ql_test.command('["other"]',
    '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[{"labels":{"zone":["a"]},"runtimes":{},"weight":3}]}'))
    ->> 'revisionId' AS rev2 \gset
SELECT ql_test.publish('proj', 'plain') ->> 'revisionId' AS rev3 \gset

SELECT count(*) AS n0 FROM ql_private.placement_classes \gset
SELECT ql_private.placement_class_of(:'rev1') AS c1 \gset
SELECT is((SELECT count(*) FROM ql_private.placement_classes), :n0::bigint + 1,
          'a required placement never seen: one class row created');
SELECT is((SELECT required FROM ql_private.placement_classes WHERE id = :c1),
          '{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}}'::jsonb,
          '... holding the revision''s required placement');
SELECT is(ql_private.placement_class_of(:'rev1'), :c1, 'the same revision again: the same class');
SELECT is(ql_private.placement_class_of(:'rev2'), :c1,
          'another revision with an equal required (another preferred): the same class');
SELECT is((SELECT count(*) FROM ql_private.placement_classes), :n0::bigint + 1, '... and no new row');
SELECT isnt(ql_private.placement_class_of(:'rev3'), :c1, 'the default placement is another class');

-- R-REV-2: a revision row without placement gets the default class.
INSERT INTO ql_private.execution_revisions (task_id, revision, kind, executor, spec, placement,
                                            canonical, content_digest)
SELECT task_id, revision + 100, kind, executor, spec, NULL, canonical, content_digest
  FROM ql_private.execution_revisions WHERE id = :'rev3'::uuid
RETURNING id AS legacy \gset
SELECT is(ql_private.placement_class_of(:'legacy'),
          (SELECT id FROM ql_private.placement_classes
            WHERE required = '{"executors":["remote-worker"]}'::jsonb),
          'no placement at all: the {"executors":["remote-worker"]} class');

-- The lock: an existing class row is held FOR KEY SHARE by this transaction.
SELECT ok((SELECT xmax::text = (pg_current_xact_id()::text::bigint % 4294967296)::text
             FROM ql_private.placement_classes WHERE id = :c1),
          'the class row is locked (FOR KEY SHARE) by the caller''s transaction');

SELECT throws_ok($$SELECT ql_private.placement_class_of(gen_random_uuid())$$, 'QL004',
                 'execution revision not found', 'unknown revision -> QL004');

SELECT * FROM finish();
ROLLBACK;
