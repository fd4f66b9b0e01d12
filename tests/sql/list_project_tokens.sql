-- ql.list_project_tokens (SPEC §13.4): newest first, states, project filter,
-- never a digest; roles.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa', sha256('tok-a'), ARRAY['read']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'bbbbbbbbbbbbbbbb', sha256('tok-b'), ARRAY['enqueue', 'read'], 60) IS NOT NULL AS c \gset
SELECT ql.create_project_token('other', 'cccccccccccccccc', sha256('tok-c'), ARRAY['log']) IS NOT NULL AS c \gset
SELECT ql.revoke_project_token('aaaaaaaaaaaaaaaa') IS NOT NULL AS c \gset
RESET ROLE;
UPDATE ql_private.project_tokens SET created_at = created_at - interval '2 minutes',
       expires_at = expires_at - interval '2 minutes' WHERE id = 'bbbbbbbbbbbbbbbb';
SET LOCAL ROLE ql_runtime;
SELECT ql.list_project_tokens() AS all_tokens \gset
SELECT ql.list_project_tokens('acme') AS acme \gset
RESET ROLE;
SELECT is((SELECT jsonb_agg(t ->> 'tokenId') FROM jsonb_array_elements(:'acme'::jsonb -> 'tokens') t),
          '["aaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbb"]'::jsonb, 'one project, newest first');
SELECT is((SELECT jsonb_object_agg(t ->> 'tokenId', t ->> 'state') FROM jsonb_array_elements(:'all_tokens'::jsonb -> 'tokens') t),
          '{"aaaaaaaaaaaaaaaa":"revoked","bbbbbbbbbbbbbbbb":"expired","cccccccccccccccc":"active"}'::jsonb,
          'states: revoked, expired, active');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'acme'::jsonb -> 'tokens' -> 0) k),
          ARRAY['createdAtMs', 'createdBy', 'expiresAtMs', 'project', 'revokedAtMs', 'scopes', 'state', 'tokenId'],
          'the fields (no digest)');
SELECT ok(position(encode(sha256('tok-a'), 'hex') IN :'all_tokens') = 0
          AND position(encode(sha256('tok-a'), 'base64') IN :'all_tokens') = 0, 'no digest in any form');
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.list_project_tokens('a/b')$$, 'QL001', NULL, 'malformed project');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.list_project_tokens()$$, '42501', NULL, 'the producer role cannot list tokens');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
