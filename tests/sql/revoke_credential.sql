-- ql.revoke_credential as ql_runtime: next authentication is refused;
-- idempotent (same revokedAtMs, no write); unknown QL004; malformed QL001.
BEGIN;
SELECT plan(8);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset

SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_credential(:'c1') AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'credentialId', :'c1', 'returns the credential id');
SELECT is((:'r1'::jsonb ->> 'revokedAtMs')::bigint,
          (SELECT ql_private.epoch_ms(revoked_at) FROM ql_private.worker_credentials WHERE credential_id = :'c1'),
          'revokedAtMs is the stored revocation time');
SELECT is(ql.authenticate_worker(:'c1', :'d1', :'w1', 'offer.pull') ->> 'reason', 'revoked_credential',
          'the next authentication is refused');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.revoke_credential(:'c1'), :'r1'::jsonb, 'revoking again returns the same result');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'and writes nothing');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.revoke_credential('0000000000000000')$$, 'QL004', NULL, 'unknown -> QL004');
SELECT throws_ok($$SELECT ql.revoke_credential('short')$$, 'QL001', NULL, 'malformed -> QL001');
SELECT throws_ok($$SELECT ql.revoke_credential(NULL)$$, 'QL001', NULL, 'NULL -> QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
