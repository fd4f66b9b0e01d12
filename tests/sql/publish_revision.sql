-- ql.publish_revision as ql_runtime: first publish creates project/task/rev 1;
-- identical content -> same revision, created=false, no writes; changed ->
-- revision + 1; bad shapes QL001/QL002/QL003 with no rows written.
BEGIN;
SELECT plan(33);
\ir fixtures.psql

SELECT ql_test.command('["echo","one"]') AS v1, ql_test.command('["echo","two"]') AS v2 \gset
SELECT ql_test.command('["echo","p"]',
    '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{"region":["eu-1"]},"runtimes":{"python":[">=3.11.0","<4.0.0-0"]}}}')
    AS vp \gset

SET LOCAL ROLE ql_runtime;
SELECT ql.publish_revision('proj', 'build', :'v1') AS p1 \gset
RESET ROLE;
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'p1'::jsonb) k),
          ARRAY['contentDigest', 'created', 'pool', 'revision', 'revisionId', 'signatureKid', 'taskId'], 'result fields');
SELECT is((:'p1'::jsonb ->> 'revision')::int, 1, 'first publish is revision 1');
SELECT is((:'p1'::jsonb ->> 'created')::boolean, true, 'created = true');
SELECT is(:'p1'::jsonb ->> 'contentDigest', 'sha256:' || encode(sha256(:'v1'::bytea), 'hex'),
          'digest is sha256 of the exact bytes, computed by the database');
SELECT results_eq(
    format($$SELECT er.canonical, er.kind, er.executor, er.spec ->> 'schema', er.placement IS NULL,
                    t.current_revision_id = er.id, p.name, t.name
               FROM ql_private.execution_revisions er
               JOIN ql_private.tasks t ON t.id = er.task_id
               JOIN ql_private.projects p ON p.id = t.project_id
              WHERE er.id = %L$$, :'p1'::jsonb ->> 'revisionId'),
    format($$VALUES (%L::bytea, 'qinglong/command@v1'::text, 'remote_worker'::text,
                     'qinglong/command@v1'::text, true, true, 'proj'::text, 'build'::text)$$, :'v1'),
    'stored bytes, kind, executor, spec; task and project created; current revision set');

-- Identical content: same revision, nothing written, not even a row lock.
SELECT ql_test.mark();
SELECT xmax::text AS task_xmax FROM ql_private.tasks WHERE id = (:'p1'::jsonb ->> 'taskId')::uuid \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.publish_revision('proj', 'build', :'v1') AS p1b \gset
RESET ROLE;
SELECT is(:'p1b'::jsonb - 'created', :'p1'::jsonb - 'created', 'identical content returns the same revision');
SELECT is((:'p1b'::jsonb ->> 'created')::boolean, false, 'created = false');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'identical publish writes no row');
SELECT is((SELECT xmax::text FROM ql_private.tasks WHERE id = (:'p1'::jsonb ->> 'taskId')::uuid), :'task_xmax',
          'and takes no row lock on the task');

SET LOCAL ROLE ql_runtime;
SELECT ql.publish_revision('proj', 'build', :'v2') AS p2 \gset
SELECT ql.publish_revision('proj', 'build', :'vp') AS p3 \gset
SELECT ql.publish_revision('proj', 'build', :'v1') AS p4 \gset
SELECT ql.publish_revision('proj', 'deploy', :'v1') AS other \gset
RESET ROLE;
SELECT is((:'p2'::jsonb ->> 'revision')::int, 2, 'changed content -> revision 2');
SELECT is(:'p2'::jsonb ->> 'taskId', :'p1'::jsonb ->> 'taskId', 'same task');
SELECT is((:'p3'::jsonb ->> 'revision')::int, 3, 'content with placement -> revision 3');
SELECT is((SELECT placement FROM ql_private.execution_revisions WHERE id = (:'p3'::jsonb ->> 'revisionId')::uuid),
          '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{"region":["eu-1"]},"runtimes":{"python":[">=3.11.0","<4.0.0-0"]}}}'::jsonb,
          'placement stored as a top-level column');
SELECT is((:'p4'::jsonb ->> 'revision')::int, 4,
          'going back to older content is a new revision (only the current one is compared)');
SELECT is((SELECT current_revision_id FROM ql_private.tasks WHERE id = (:'p1'::jsonb ->> 'taskId')::uuid),
          (:'p4'::jsonb ->> 'revisionId')::uuid, 'current revision follows the latest publish');
SELECT is((:'other'::jsonb ->> 'revision')::int, 1, 'another task of the project starts at revision 1');
SELECT is((SELECT count(*) FROM ql_private.projects), 1::bigint, 'the project was created once');

-- Refused shapes: each with its SQLSTATE and no write.
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","extra":1,"kind":"qinglong/command@v1","spec":{"argv":["x"],"env":{},"schema":"qinglong/command@v1","timeoutS":1}}', 'UTF8')),
    'QL001', NULL, 'unknown top-level key -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","kind":"qinglong/command@v1"}', 'UTF8')),
    'QL001', NULL, 'missing spec -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","kind":"qinglong/shell@v1","spec":{"argv":["x"],"env":{},"schema":"qinglong/command@v1","timeoutS":1}}', 'UTF8')),
    'QL001', NULL, 'wrong kind -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"local","kind":"qinglong/command@v1","spec":{"argv":["x"],"env":{},"schema":"qinglong/command@v1","timeoutS":1}}', 'UTF8')),
    'QL001', NULL, 'wrong executor -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, ql_test.command('[]')),
    'QL001', NULL, 'empty argv -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, ql_test.command('["x",1]')),
    'QL001', NULL, 'non-string argv element -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","kind":"qinglong/command@v1","spec":{"argv":["x"],"env":{},"placement":{},"schema":"qinglong/command@v1","timeoutS":1}}', 'UTF8')),
    'QL001', NULL, 'placement inside spec -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","kind":"qinglong/command@v1","spec":{"argv":["x"],"env":{},"schema":"qinglong/command@v1","timeoutS":1.5}}', 'UTF8')),
    'QL001', NULL, 'fractional timeoutS -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, convert_to(
    '{"executor":"remote_worker","kind":"qinglong/command@v1","spec":{"argv":["x"],"env":{},"schema":"qinglong/command@v1","timeoutS":1},"spec":{}}', 'UTF8')),
    'QL001', NULL, 'duplicate key -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, '\xc3'::bytea),
    'QL001', NULL, 'invalid UTF-8 -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$,
    ql_test.command(format('[%s]', rtrim(repeat('"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",', 3300), ',')))),
    'QL002', NULL, 'over 96 KiB -> QL002');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, ql_test.command('["x"]',
    '{"preferred":[],"required":{"executors":["remote-worker"],"labels":{},"runtimes":{"python":["^3.11"]}}}')),
    'QL003', NULL, 'placement range not normalized SemVer comparators -> QL003');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', 'build', %L::bytea)$$, ql_test.command('["x"]',
    '{"required":{"executors":["remote-worker"],"labels":{},"runtimes":{}},"preferred":[],"colour":"red"}')),
    'QL001', NULL, 'unknown placement field -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('bad project', 'build', %L::bytea)$$, :'v1'),
    'QL001', NULL, 'bad project name -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('proj', NULL, %L::bytea)$$, :'v1'),
    'QL001', NULL, 'NULL task name -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused publishes wrote nothing');

SELECT * FROM finish();
ROLLBACK;
