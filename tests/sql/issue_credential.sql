-- ql.issue_credential as ql_runtime: stores id + digest only; unknown worker
-- QL004; malformed or duplicate id QL001 (never overwrites a digest).
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT ql.register_worker('w1') ->> 'workerId' AS w1 \gset
SELECT ql.register_worker('w2') ->> 'workerId' AS w2 \gset
SELECT sha256('a'::bytea) AS da, sha256('b'::bytea) AS db \gset

SET LOCAL ROLE ql_runtime;
SELECT is(ql.issue_credential(:'w1', 'aaaaaaaaaaaaaaa1', :'da'),
          jsonb_build_object('credentialId', 'aaaaaaaaaaaaaaa1', 'workerId', :'w1',
                             'expiresAtMs', NULL),
          'returns {credentialId, workerId, expiresAtMs} (no ttl: never expires)');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea, 9)', :'w1', 'aaaaaaaaaaaaaaa3', :'da'),
                 'QL006', NULL, 'a ttl below 10 s -> QL006');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea, 315360001)', :'w1', 'aaaaaaaaaaaaaaa3', :'da'),
                 'QL006', NULL, 'a ttl above 3650 d -> QL006');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', :'w2', 'aaaaaaaaaaaaaaa1', :'db'),
                 'QL001', NULL, 'duplicate credential id -> QL001');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', gen_random_uuid(), 'aaaaaaaaaaaaaaa2', :'da'),
                 'QL004', NULL, 'unknown worker -> QL004');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', :'w1', 'AAAAAAAAAAAAAAA2', :'da'),
                 'QL001', NULL, 'uppercase credential id -> QL001');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', :'w1', 'aaaaaaaaaaaaaaa', :'da'),
                 'QL001', NULL, '15-char credential id -> QL001');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', :'w1', 'aaaaaaaaaaaaaaa2', '\x00'),
                 'QL001', NULL, 'digest not 32 bytes -> QL001');
SELECT throws_ok(format('SELECT ql.issue_credential(%L, %L, %L::bytea)', 'nope', 'aaaaaaaaaaaaaaa2', :'da'),
                 'QL001', NULL, 'malformed worker id -> QL001');
RESET ROLE;

SELECT results_eq(
    $$SELECT credential_id, worker_id, secret_digest, revoked_at IS NULL FROM ql_private.worker_credentials$$,
    format($$VALUES ('aaaaaaaaaaaaaaa1'::text, %L::uuid, %L::bytea, true)$$, :'w1', :'da'),
    'one credential, first digest kept, not revoked');
SELECT is(ql.authenticate_worker('aaaaaaaaaaaaaaa1', :'da', :'w1', 'offer.pull'), '{"status":"ok"}'::jsonb,
          'the issued credential authenticates');

SELECT * FROM finish();
ROLLBACK;
