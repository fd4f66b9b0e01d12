-- ql_private.certificate_serial (SPEC §16.3): a serial as openssl prints it —
-- any case, colons or not, `serial=` prefix or not — -> lowercase hex without
-- colons or leading zeros ('0' for zero); QL001 (COLUMN serial) for NULL,
-- empty, non-hex, more than 20 octets or more than 128 characters.
BEGIN;
SELECT plan(13);
\ir fixtures.psql

SELECT is(ql_private.certificate_serial('0A:1B:2C'), 'a1b2c', 'colons dropped, lowercase, leading zero dropped');
SELECT is(ql_private.certificate_serial('serial=00FF'), 'ff', 'the serial= prefix of openssl -serial');
SELECT is(ql_private.certificate_serial('SERIAL=0a'), 'a', '... in any case');
SELECT is(ql_private.certificate_serial('  abcdef  '), 'abcdef', 'surrounding blanks trimmed');
SELECT is(ql_private.certificate_serial('00:00'), '0', 'zero -> ''0''');
SELECT is(ql_private.certificate_serial('00' || repeat('f', 40)), repeat('f', 40),
          '20 octets after leading zeros: accepted');
SELECT throws_ok($$SELECT ql_private.certificate_serial(NULL)$$, 'QL001',
                 'serial must be hex of at most 20 octets', 'NULL -> QL001');
SELECT throws_ok($$SELECT ql_private.certificate_serial('')$$, 'QL001', NULL, 'empty -> QL001');
SELECT throws_ok($$SELECT ql_private.certificate_serial('serial=')$$, 'QL001', NULL, 'a prefix alone -> QL001');
SELECT throws_ok($$SELECT ql_private.certificate_serial('0x1f')$$, 'QL001', NULL, 'not hex (0x) -> QL001');
SELECT throws_ok(format('SELECT ql_private.certificate_serial(%L)', '1' || repeat('0', 40)), 'QL001', NULL,
                 '41 hex digits (over 20 octets) -> QL001');
SELECT throws_ok(format('SELECT ql_private.certificate_serial(%L)', repeat('0', 129)), 'QL001', NULL,
                 'more than 128 characters -> QL001 (even zeros)');
SELECT is(ql_test.error_of($$SELECT ql_private.certificate_serial('zz')$$), 'QL001 serial',
          'the COLUMN diagnostic is serial');

SELECT * FROM finish();
ROLLBACK;
