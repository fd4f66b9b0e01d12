-- ql.revoked_certificates as ql_worker_ingress: pages of serials after a
-- sequence number, oldest first; lastSeq echoes p_after_seq when nothing is
-- new; bad arguments QL001; writes nothing.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_certificate('01') \gset
SELECT ql.revoke_certificate('02') \gset
SELECT ql.revoke_certificate('03') \gset
RESET ROLE;

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.revoked_certificates(0, 2) AS p1 \gset
SELECT ql.revoked_certificates((:'p1'::jsonb ->> 'lastSeq')::bigint, 2) AS p2 \gset
SELECT ql.revoked_certificates((:'p2'::jsonb ->> 'lastSeq')::bigint, 2) AS p3 \gset
RESET ROLE;
SELECT is(:'p1'::jsonb -> 'serials', '["1", "2"]'::jsonb, 'the first page, oldest first');
SELECT is(:'p2'::jsonb -> 'serials', '["3"]'::jsonb, 'the next page after lastSeq');
SELECT ok((:'p3'::jsonb -> 'serials') = '[]'::jsonb
          AND (:'p3'::jsonb ->> 'lastSeq') = (:'p2'::jsonb ->> 'lastSeq'),
          'nothing new: no serials, lastSeq unchanged');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'reads write nothing');

SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT ql.revoked_certificates(-1, 10)$$, 'QL001', NULL, 'negative seq -> QL001');
SELECT throws_ok($$SELECT ql.revoked_certificates(0, 0)$$, 'QL001', NULL, 'limit 0 -> QL001');
SELECT throws_ok($$SELECT ql.revoked_certificates(0, 10001)$$, 'QL001', NULL, 'limit above 10000 -> QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
