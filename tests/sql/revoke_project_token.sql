-- ql.revoke_project_token (SPEC §13.4): the next producer call is refused;
-- idempotent; unknown ids; roles.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT ql_test.publish('acme', 'task') ->> 'taskId' AS task \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.create_project_token('acme', 'aaaaaaaaaaaaaaaa', sha256('tok-a'), ARRAY['enqueue']) IS NOT NULL AS c \gset
SET LOCAL ROLE ql_producer;
SELECT lives_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/task')$$,
                'the token works before the revocation');
SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_project_token('aaaaaaaaaaaaaaaa') AS r1 \gset
SELECT ql.revoke_project_token('aaaaaaaaaaaaaaaa') AS r2 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb - 'revokedAtMs', '{"tokenId":"aaaaaaaaaaaaaaaa","project":"acme","revoked":true}'::jsonb,
          'revoked');
SELECT is(:'r2'::jsonb, jsonb_set(:'r1'::jsonb, '{revoked}', 'false'), 'again: unchanged, revoked = false');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.producer_enqueue('aaaaaaaaaaaaaaaa', sha256('tok-a'), 'acme/task')$$,
                 'QL030', NULL, 'the next call with the revoked token is refused');
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.revoke_project_token('zzzzzzzzzzzzzzzz')$$, 'QL004', NULL, 'unknown token');
SELECT throws_ok($$SELECT ql.revoke_project_token('nope')$$, 'QL001', NULL, 'malformed token id');
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.revoke_project_token('aaaaaaaaaaaaaaaa')$$, '42501', NULL,
                 'the producer role cannot revoke');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
