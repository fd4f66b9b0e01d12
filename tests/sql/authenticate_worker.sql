-- ql.authenticate_worker, called as the ingress role: ok / denied envelopes, the
-- audit row of a denial, no writes when allowed, QL001 on malformed input.
BEGIN;
SELECT plan(10);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.secret_digest('nope') AS bad \gset

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.authenticate_worker(:'c1', :'d1', :'w1', 'offer.pull'), '{"status":"ok"}'::jsonb,
          'ingress role: valid credential -> ok');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'ok writes nothing');

SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.authenticate_worker(:'c1', :'bad', :'w1', 'offer.pull'),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb,
          'ingress role: bad secret -> denied 401');
SELECT is(ql.authenticate_worker(:'c1', :'d1', :'w2', 'offer.pull'),
          '{"status":"denied","httpStatus":403,"reason":"worker_mismatch"}'::jsonb,
          'ingress role: other worker -> denied 403');
SELECT throws_ok(format($$SELECT ql.authenticate_worker(%L, %L::bytea, %L, 'offer.pull')$$,
                        :'c1', :'d1', upper(:'w1')),
                 'QL001', NULL, 'uppercase worker id -> QL001');
SELECT throws_ok(format($$SELECT ql.authenticate_worker(%L, %L::bytea, 'not-a-uuid', 'offer.pull')$$,
                        :'c1', :'d1'),
                 'QL001', NULL, 'malformed worker id -> QL001');
SELECT throws_ok(format($$SELECT ql.authenticate_worker(%L, %L::bytea, %L, 'DROP TABLE')$$,
                        :'c1', :'d1', :'w1'),
                 'QL001', NULL, 'malformed action -> QL001');
SELECT throws_ok('SELECT count(*) FROM ql_private.security_audit', '42501', NULL,
                 'the ingress role cannot read the audit table directly');
RESET ROLE;

SELECT ql_test.mark();
SELECT results_eq(
    $$SELECT credential_id, worker_id, action, outcome, reason
        FROM ql_private.security_audit ORDER BY id$$,
    format($$VALUES (%L::text, %L::uuid, 'offer.pull'::text, 'denied'::text, 'bad_secret'::text),
                    (%L::text, %L::uuid, 'offer.pull'::text, 'denied'::text, 'worker_mismatch'::text)$$,
           :'c1', :'w1', :'c1', :'w2'),
    'one audit row per denial, nothing for the ok call or the QL001 errors');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'reading back wrote nothing');

SELECT * FROM finish();
ROLLBACK;
