-- ql_private.producer_token (SPEC §13.4): a project token must exist, match
-- its digest, be unrevoked and unexpired (checked per call) and hold the scope;
-- the answer is its project id. QL030 token_invalid — one answer for an
-- unknown, malformed, wrong, revoked or expired token, never naming the id —
-- and QL031 scope_missing for a valid token without the scope.
BEGIN;
SELECT plan(15);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'build') IS NOT NULL AS c \gset
SELECT ql_test.publish('other', 'build') IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa', sha256('tok-a'), ARRAY['enqueue', 'read']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('other', 'oooooooooooooooo', sha256('tok-o'), ARRAY['cancel']) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'eeeeeeeeeeeeeeee', sha256('tok-e'), ARRAY['read'], 60) IS NOT NULL AS c \gset
SELECT ql.create_project_token('acme', 'vvvvvvvvvvvvvvvv', sha256('tok-v'), ARRAY['read']) IS NOT NULL AS c \gset
SELECT id AS acme FROM ql_private.projects WHERE name = 'acme' \gset
SELECT id AS other FROM ql_private.projects WHERE name = 'other' \gset

SELECT is(ql_private.producer_token('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'enqueue'), :'acme'::uuid,
          'a valid token with the scope -> its project');
SELECT is(ql_private.producer_token('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'read'), :'acme'::uuid, '... any scope it holds');
SELECT is(ql_private.producer_token('oooooooooooooooo', sha256('tok-o'), 'cancel'), :'other'::uuid,
          'another project''s token -> that project');
SELECT is(ql_private.producer_token('eeeeeeeeeeeeeeee', sha256('tok-e'), 'read'), :'acme'::uuid,
          'a token with an expiry still ahead is valid');

SELECT throws_ok($$SELECT ql_private.producer_token('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'cancel')$$,
                 'QL031', 'scope_missing', 'a valid token without the scope -> QL031');
SELECT throws_ok($$SELECT ql_private.producer_token('aaaaaaaaaaaaaaaa', sha256('tok-a'), NULL)$$,
                 'QL031', 'scope_missing', 'a NULL scope -> QL031');
SELECT throws_ok($$SELECT ql_private.producer_token('aaaaaaaaaaaaaaaa', sha256('tok-x'), 'enqueue')$$,
                 'QL030', 'token_invalid', 'a wrong digest -> QL030 (before any scope check)');
SELECT throws_ok($$SELECT ql_private.producer_token('zzzzzzzzzzzzzzzz', sha256('tok-a'), 'enqueue')$$,
                 'QL030', 'token_invalid', 'an unknown id -> QL030');
SELECT throws_ok($$SELECT ql_private.producer_token('AAAAAAAAAAAAAAAA', sha256('tok-a'), 'enqueue')$$,
                 'QL030', 'token_invalid', 'a malformed id (uppercase) -> QL030');
SELECT throws_ok($$SELECT ql_private.producer_token(NULL, sha256('tok-a'), 'enqueue')$$,
                 'QL030', 'token_invalid', 'a NULL id -> QL030');
SELECT throws_ok($$SELECT ql_private.producer_token('aaaaaaaaaaaaaaaa', NULL, 'enqueue')$$,
                 'QL030', 'token_invalid', 'a NULL digest -> QL030');
SELECT throws_ok($$SELECT ql_private.producer_token('aaaaaaaaaaaaaaaa', substr(sha256('tok-a'), 1, 16), 'enqueue')$$,
                 'QL030', 'token_invalid', 'a truncated digest -> QL030');
UPDATE ql_private.project_tokens SET created_at = created_at - interval '1 hour',
       expires_at = clock_timestamp() - interval '1 second' WHERE id = 'eeeeeeeeeeeeeeee';
SELECT throws_ok($$SELECT ql_private.producer_token('eeeeeeeeeeeeeeee', sha256('tok-e'), 'read')$$,
                 'QL030', 'token_invalid', 'expired -> QL030 on the next call');
SELECT ql.revoke_project_token('vvvvvvvvvvvvvvvv') IS NOT NULL AS c \gset
SELECT throws_ok($$SELECT ql_private.producer_token('vvvvvvvvvvvvvvvv', sha256('tok-v'), 'read')$$,
                 'QL030', 'token_invalid', 'revoked -> QL030 on the next call');

SELECT ok(NOT has_function_privilege('ql_producer',
              'ql_private.producer_token(text, bytea, text)', 'EXECUTE'),
          'ql_producer reaches it only through the ql.producer_* functions');

SELECT * FROM finish();
ROLLBACK;
