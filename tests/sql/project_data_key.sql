-- ql.project_data_key (SPEC §14.1): installs the offered wrapped data key only
-- when the project has none (creating the project), answers the stored one,
-- refuses a second KEK and malformed input; ql_runtime only.
BEGIN;
SELECT plan(12);

CREATE FUNCTION pg_temp.key(project text, key_id text, kek text DEFAULT 'kek-a',
                            fill text DEFAULT '11') RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.project_data_key(project, key_id, kek, decode(repeat('aa', 12), 'hex'),
                               decode(repeat(fill, 48), 'hex'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.key(text, text, text, text) TO ql_runtime;

SET LOCAL ROLE ql_runtime;
SELECT pg_temp.key('acme', repeat('a1', 16)) AS first \gset
SELECT pg_temp.key('acme', repeat('b2', 16), 'kek-a', '22') AS second \gset
RESET ROLE;
SELECT is(:'first'::jsonb - 'projectId',
          jsonb_build_object('project', 'acme', 'keyId', repeat('a1', 16), 'kekId', 'kek-a',
                             'nonce', repeat('aa', 12), 'wrappedKey', repeat('11', 48),
                             'created', true),
          'the first call installs the offered key');
SELECT is(:'first'::jsonb ->> 'projectId',
          (SELECT id::text FROM ql_private.projects WHERE name = 'acme'),
          'the project is created, its id answered');
SELECT ok(EXISTS (SELECT 1 FROM ql_private.pools pl JOIN ql_private.projects p ON p.id = pl.project_id
                   WHERE p.name = 'acme' AND pl.name = 'default'), 'with its default pool');
SELECT is(:'second'::jsonb, :'first'::jsonb || '{"created": false}'::jsonb,
          'a second offer is discarded: the stored key is answered');
SELECT is((SELECT count(*) FROM ql_private.project_data_keys), 1::bigint, 'one key per project');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT pg_temp.key('beta', repeat('c3', 16), 'kek-b')$$, 'QL041', NULL,
                 'another KEK while keys are wrapped by kek-a -> QL041 kek_mismatch');
SELECT throws_ok($$SELECT pg_temp.key('bad name!', repeat('c3', 16))$$, 'QL001', NULL,
                 'malformed project -> QL001');
SELECT throws_ok($$SELECT pg_temp.key('beta', 'XYZ')$$, 'QL001', NULL, 'malformed key id -> QL001');
SELECT throws_ok($$SELECT ql.project_data_key('beta', repeat('c3', 16), 'kek-a', '\x00'::bytea,
                                              decode(repeat('11', 48), 'hex'))$$,
                 'QL001', NULL, 'a nonce of the wrong size -> QL001');
SELECT throws_ok($$SELECT ql.project_data_key('beta', repeat('c3', 16), 'kek-a',
                                              decode(repeat('aa', 12), 'hex'), '\x00'::bytea)$$,
                 'QL001', NULL, 'a wrapped key of the wrong size -> QL001');
RESET ROLE;
SELECT ok(NOT EXISTS (SELECT 1 FROM ql_private.projects WHERE name = 'beta'),
          'refused calls created nothing');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT pg_temp.key('acme', repeat('a1', 16))$$, '42501', NULL,
                 'the ingress cannot install keys');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
