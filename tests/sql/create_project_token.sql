-- ql.create_project_token (SPEC §13.4): stores only the digest of the whole
-- token string, project created when missing, scopes checked, bounds, roles.
BEGIN;
SELECT plan(13);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa',
        sha256(convert_to('qlp_aaaaaaaaaaaaaaaa_secret-a', 'UTF8')),
        ARRAY['read', 'enqueue', 'read'], 3600) AS t1 \gset
SELECT ql.create_project_token('acme', 'bbbbbbbbbbbbbbbb',
        sha256(convert_to('qlp_bbbbbbbbbbbbbbbb_secret-b', 'UTF8')), ARRAY['cancel']) AS t2 \gset
RESET ROLE;
SELECT is(:'t1'::jsonb - 'createdAtMs' - 'expiresAtMs',
          '{"tokenId":"aaaaaaaaaaaaaaaa","project":"acme","scopes":["enqueue","read"]}'::jsonb,
          '{tokenId, project, scopes (sorted, distinct)}');
SELECT is((:'t1'::jsonb ->> 'expiresAtMs')::bigint - (:'t1'::jsonb ->> 'createdAtMs')::bigint, 3600000::bigint,
          'expiresAtMs = createdAtMs + expires-in');
SELECT is(:'t2'::jsonb -> 'expiresAtMs', 'null'::jsonb, 'no expires-in: never expires');
SELECT ok(NOT (:'t1'::jsonb ? 'tokenDigest') AND :'t1' !~ '[0-9a-f]{64}', 'the answer carries no digest');
SELECT results_eq($$SELECT t.token_digest, t.created_by FROM ql_private.project_tokens t WHERE t.id = 'aaaaaaaaaaaaaaaa'$$,
                  $$VALUES (sha256(convert_to('qlp_aaaaaaaaaaaaaaaa_secret-a', 'UTF8')), session_user::text COLLATE "default")$$,
                  'only the SHA-256 of the whole token is stored, with the creating login');
SELECT ok(EXISTS (SELECT 1 FROM ql_private.pools pl JOIN ql_private.projects p ON p.id = pl.project_id
                   WHERE p.name = 'acme' AND pl.name = 'default'), 'the project was created with its default pool');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.create_project_token('acme', 'cccccccccccccccc', sha256('x'), ARRAY['admin'])$$,
                 'QL001', NULL, 'an unknown scope is refused');
SELECT throws_ok($$SELECT ql.create_project_token('acme', 'CCCCCCCCCCCCCCCC', sha256('x'), ARRAY['read'])$$,
                 'QL001', NULL, 'a malformed token id is refused');
SELECT throws_ok($$SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa', sha256('y'), ARRAY['read'])$$,
                 'QL001', NULL, 'a token id already used is refused');
SELECT throws_ok($$SELECT ql.create_project_token('acme', 'cccccccccccccccc', sha256('x'), ARRAY['read'], 0)$$,
                 'QL006', NULL, 'expires-in 0 is refused');
RESET ROLE;
SELECT is(ql_test.error_of($$SELECT ql.create_project_token('acme', 'cccccccccccccccc', '\x00', ARRAY['read'])$$),
          'QL001 tokenDigest', 'a digest that is not 32 bytes names tokenDigest');
SELECT is((SELECT count(*) FROM ql_private.project_tokens), 2::bigint, 'refusals wrote nothing');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.create_project_token('acme', 'dddddddddddddddd', sha256('x'), ARRAY['read'])$$,
                 '42501', NULL, 'the producer role cannot make tokens');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
