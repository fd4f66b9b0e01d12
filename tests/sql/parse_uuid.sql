-- ql_private.parse_uuid: an id argument -> uuid, only in the lowercase
-- canonical form (SPEC §4); QL001 with the field as message and COLUMN
-- diagnostic (never the value) for NULL or anything else.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT is(ql_private.parse_uuid('0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', 'runId'),
          '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'::uuid, 'the lowercase canonical form -> its uuid');
SELECT throws_ok($$SELECT ql_private.parse_uuid(NULL, 'runId')$$, 'QL001',
                 'runId must be a lowercase canonical UUID', 'NULL -> QL001 naming the field');
SELECT throws_ok($$SELECT ql_private.parse_uuid('0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D', 'taskId')$$, 'QL001',
                 'taskId must be a lowercase canonical UUID', 'uppercase -> QL001 (PostgreSQL would accept it)');
SELECT throws_ok($$SELECT ql_private.parse_uuid('{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}', 'x')$$, 'QL001', NULL,
                 'braces -> QL001');
SELECT throws_ok($$SELECT ql_private.parse_uuid('0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d', 'x')$$, 'QL001', NULL,
                 'no hyphens -> QL001');
SELECT throws_ok($$SELECT ql_private.parse_uuid('0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d ', 'x')$$, 'QL001', NULL,
                 'a trailing space -> QL001');
SELECT throws_ok($$SELECT ql_private.parse_uuid('', 'x')$$, 'QL001', NULL, 'empty -> QL001 (not 22P02)');
SELECT is(ql_test.error_of($$SELECT ql_private.parse_uuid('nope', 'workerId')$$), 'QL001 workerId',
          'the field is the error''s COLUMN diagnostic');
SELECT throws_like($$SELECT ql_private.parse_uuid('secret-looking-value', 'sessionId')$$,
                   'sessionId must%', 'the message never carries the value');

SELECT * FROM finish();
ROLLBACK;
