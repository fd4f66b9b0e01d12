-- ql.delete_secret (SPEC §14.1): removes the row, audited by name; an unknown
-- secret is QL004 and writes nothing; ql_runtime only.
BEGIN;
SELECT plan(6);
\ir fixtures.psql

SELECT ql.project_data_key('acme', repeat('a1', 16), 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL;
SELECT ql.set_secret('acme', 'tok', v, repeat('a1', 16), decode(repeat('bb', 12), 'hex'),
                     decode(repeat('cc', 30), 'hex')) IS NOT NULL FROM generate_series(1, 3) v;

SET LOCAL ROLE ql_runtime;
SELECT is(ql.delete_secret('acme', 'tok'),
          '{"project": "acme", "name": "tok", "version": 3, "deleted": true}'::jsonb,
          'deleted, naming the version it had');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.secrets), 0::bigint, 'the row is gone');
SELECT is((SELECT detail FROM ql_private.security_audit WHERE action = 'secret.delete'),
          '{"name": "tok", "project": "acme", "version": 3}'::jsonb, 'audited by name');
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of($$SELECT ql.delete_secret('acme', 'tok')$$), 'QL004 name',
          'a second delete -> QL004 naming the name');
SELECT throws_ok($$SELECT ql.delete_secret('acme', 'Bad!')$$, 'QL001', NULL, 'malformed name');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals write nothing');

SELECT * FROM finish();
ROLLBACK;
