-- ql.record_certificate as ql_runtime: a row per issued certificate (canonical
-- serial, notAfter) and one event; the same certificate again writes nothing;
-- a serial recorded for another worker, unknown workers and malformed input
-- are refused by SQLSTATE.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.record_certificate(:'w1', '00:AB:CD', 1893456000000) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb, jsonb_build_object('workerId', :'w1', 'serial', 'abcd', 'notAfterMs', 1893456000000),
          'returns the worker, the canonical serial and notAfterMs');
SELECT is((SELECT ql_private.epoch_ms(not_after) FROM ql_private.worker_certificates
            WHERE serial = 'abcd' AND worker_id = :'w1'::uuid AND revoked_at IS NULL),
          1893456000000::bigint, 'the row holds notAfter');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type = 'worker.certificate_issued'
            AND worker_id = :'w1'::uuid), 1::bigint, 'one worker.certificate_issued event');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.record_certificate(:'w1', 'ABCD', 1893456000000), :'r1'::jsonb, 'the same certificate again: same answer');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'and no write');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format($$SELECT ql.record_certificate(%L, 'abcd', 1893456000000)$$, :'w2'),
                 'QL001', NULL, 'the serial of another worker''s certificate -> QL001');
SELECT throws_ok($$SELECT ql.record_certificate('00000000-0000-0000-0000-000000000000', '01', 1)$$,
                 'QL004', NULL, 'unknown worker -> QL004');
SELECT throws_ok(format($$SELECT ql.record_certificate(%L, 'zz', 1)$$, :'w1'),
                 'QL001', NULL, 'malformed serial -> QL001');
SELECT throws_ok(format($$SELECT ql.record_certificate(%L, '01', 0)$$, :'w1'),
                 'QL001', NULL, 'notAfterMs 0 -> QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
