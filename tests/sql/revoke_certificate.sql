-- ql.revoke_certificate as ql_runtime: any spelling of a serial (case, colons,
-- serial= prefix, leading zeros) revokes the same canonical serial; a recorded
-- certificate names its worker, gets revoked_at and one event; an unknown serial
-- is revoked too; idempotent (same revokedAtMs, revoked false, no write);
-- malformed serials QL001 and nothing written.
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.record_certificate(:'w1', '0A:1B:2C', 4102444800000) AS rec \gset
SELECT ql.revoke_certificate('serial=0a1B2c') AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'serial', 'a1b2c', 'the serial is stored canonical (lowercase, no colons, no leading zero)');
SELECT is(:'r1'::jsonb ->> 'workerId', :'w1', 'a recorded certificate names its worker');
SELECT is((:'r1'::jsonb ->> 'revoked')::boolean, true, 'revoked true the first time');
SELECT is((:'r1'::jsonb ->> 'revokedAtMs')::bigint,
          (SELECT ql_private.epoch_ms(revoked_at) FROM ql_private.worker_certificates WHERE serial = 'a1b2c'),
          'the certificate row carries the revocation time');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type = 'worker.certificate_revoked'
             AND worker_id = :'w1'::uuid AND payload ->> 'serial' = 'a1b2c'
             AND payload ->> 'actor' = session_user::text), 1::bigint,
          'one worker.certificate_revoked event naming the actor');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_certificate('0A1B2C') AS r2 \gset
RESET ROLE;
SELECT is((:'r2'::jsonb ->> 'revokedAtMs')::bigint, (:'r1'::jsonb ->> 'revokedAtMs')::bigint,
          'revoking again returns the first revokedAtMs');
SELECT is((:'r2'::jsonb ->> 'revoked')::boolean, false, 'and revoked false');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'and writes nothing');

SET LOCAL ROLE ql_runtime;
SELECT ql.revoke_certificate('FF:00') AS r3 \gset
RESET ROLE;
SELECT ok(:'r3'::jsonb ->> 'serial' = 'ff00' AND (:'r3'::jsonb -> 'workerId') = 'null'::jsonb,
          'a serial never issued here is revoked too, with workerId null');
SELECT is((SELECT array_agg(serial ORDER BY seq) FROM ql_private.certificate_revocations),
          ARRAY['a1b2c', 'ff00'], 'one revocation row per serial, in order');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.revoke_certificate('xyz')$$, 'QL001', NULL, 'not hex -> QL001');
SELECT throws_ok($$SELECT ql.revoke_certificate(repeat('ab', 21))$$, 'QL001', NULL, 'over 20 octets -> QL001');
SELECT throws_ok($$SELECT ql.revoke_certificate(NULL)$$, 'QL001', NULL, 'NULL -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refusals write nothing');

SELECT * FROM finish();
ROLLBACK;
