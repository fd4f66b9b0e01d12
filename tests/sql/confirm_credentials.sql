-- ql.confirm_credentials (the idle view's batched re-confirmation of its cache):
-- exactly the credentials ql_private.authenticate would allow come back, in
-- input order; nothing is written; malformed input is QL001; only the ingress
-- role may call it.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT worker_id AS w3, credential_id AS c3, secret_digest AS d3 FROM ql_test.new_worker('w3') \gset
SELECT worker_id AS w4, credential_id AS c4, secret_digest AS d4 FROM ql_test.new_worker('w4') \gset
SELECT ql_test.secret_digest('nope') AS bad \gset
SELECT ql.revoke_credential(:'c3');
SELECT ql.disable_worker(:'w4');

SELECT function_privs_are('ql', 'confirm_credentials', ARRAY['text[]', 'bytea[]', 'text[]'],
                          'ql_worker_ingress', ARRAY['EXECUTE'], 'ingress: EXECUTE');
SELECT function_privs_are('ql', 'confirm_credentials', ARRAY['text[]', 'bytea[]', 'text[]'],
                          'ql_runtime', ARRAY[]::text[], 'runtime: nothing');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.confirm_credentials(
              ARRAY[:'c2', :'c1', :'c1', :'c2', :'c3', :'c4', '0000000000000000'],
              ARRAY[:'d2', :'bad', :'d1', :'d2', :'d3', :'d4', :'d1']::bytea[],
              ARRAY[:'w2', :'w1', :'w1', :'w1', :'w3', :'w4', :'w1']),
          ARRAY[:'c2', :'c1']::text[],
          'only valid, unrevoked credentials of enabled workers with the right digest and worker, in input order');
SELECT is(ql.confirm_credentials(ARRAY[]::text[], ARRAY[]::bytea[], ARRAY[]::text[]),
          ARRAY[]::text[], 'empty input -> empty answer');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'writes nothing (no audit row either)');

SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format($$SELECT ql.confirm_credentials(ARRAY[%L], ARRAY[]::bytea[], ARRAY[%L])$$,
                        :'c1', :'w1'), 'QL001', NULL, 'arrays of different lengths -> QL001');
SELECT throws_ok(format($$SELECT ql.confirm_credentials(ARRAY[%L], ARRAY[%L::bytea], ARRAY[%L])$$,
                        :'c1', :'d1', upper(:'w1')), 'QL001', NULL, 'uppercase worker id -> QL001');
SELECT throws_ok(format($$SELECT ql.confirm_credentials(ARRAY[%L], ARRAY['\x00'::bytea], ARRAY[%L])$$,
                        :'c1', :'w1'), 'QL001', NULL, 'short digest -> QL001');
SELECT throws_ok($$SELECT ql.confirm_credentials(NULL, NULL, NULL)$$, 'QL001', NULL,
                 'NULL arrays -> QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
