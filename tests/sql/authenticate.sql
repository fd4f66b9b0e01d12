-- ql_private.authenticate: every denial reason, its one audit row and nothing
-- else written; an allowed call writes nothing at all.
BEGIN;
SELECT plan(33);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT worker_id AS w3, credential_id AS c3, secret_digest AS d3 FROM ql_test.new_worker('w3') \gset
SELECT ql.revoke_credential(:'c3') IS NOT NULL AS revoked \gset

-- Allowed: NULL and not a single row touched.
SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'offer.pull'), NULL,
          'valid credential of the worker is allowed (NULL)');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'an allowed authentication writes nothing');

-- Each denial: the envelope, exactly one write (the audit row), the audit row itself.
SELECT ql_test.mark();
SELECT is(ql_private.authenticate('NOT-A-CREDENTIAL', :'d1', :'w1'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":401,"reason":"malformed_credential"}'::jsonb,
          'malformed credential id -> 401 malformed_credential');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'malformed id: one write');
SELECT results_eq(
    $$SELECT credential_id, worker_id, action, outcome, reason
        FROM ql_private.security_audit ORDER BY id DESC LIMIT 1$$,
    format($$VALUES (NULL::text, %L::uuid, 'offer.pull'::text, 'denied'::text, 'malformed_credential'::text)$$, :'w1'),
    'malformed id audit row stores no credential id');

SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c1', '\x0102'::bytea, :'w1'::uuid, 'session.open'),
          '{"status":"denied","httpStatus":401,"reason":"malformed_credential"}'::jsonb,
          'digest of the wrong length -> 401 malformed_credential');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'short digest: one write');
SELECT results_eq(
    $$SELECT credential_id, action, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1$$,
    format($$VALUES (%L::text, 'session.open'::text, 'malformed_credential'::text)$$, :'c1'),
    'a well-formed credential id is kept even when the digest is malformed');

SELECT is(ql_private.authenticate(:'c1', NULL, :'w1'::uuid, 'offer.pull') ->> 'reason',
          'malformed_credential', 'NULL digest -> malformed_credential');
SELECT is(ql_private.authenticate(NULL, :'d1', :'w1'::uuid, 'offer.pull') ->> 'reason',
          'malformed_credential', 'NULL credential id -> malformed_credential');

SELECT ql_test.mark();
SELECT is(ql_private.authenticate('0000000000000000', :'d1', :'w1'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":401,"reason":"unknown_credential"}'::jsonb,
          'unknown credential -> 401 unknown_credential');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'unknown credential: one write');
SELECT results_eq(
    $$SELECT credential_id, worker_id, outcome, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1$$,
    format($$VALUES ('0000000000000000'::text, %L::uuid, 'denied'::text, 'unknown_credential'::text)$$, :'w1'),
    'unknown credential audit row');

SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c1', ql_test.secret_digest('other'), :'w1'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb,
          'wrong secret -> 401 bad_secret');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'bad secret: one write');
SELECT results_eq(
    $$SELECT credential_id, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1$$,
    format($$VALUES (%L::text, 'bad_secret'::text)$$, :'c1'),
    'bad secret audit row');

SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c3', :'d3', :'w3'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":401,"reason":"revoked_credential"}'::jsonb,
          'revoked credential -> 401 revoked_credential');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'revoked credential: one write');
SELECT is(ql_private.authenticate(:'c3', ql_test.secret_digest('other'), :'w3'::uuid, 'offer.pull') ->> 'reason',
          'bad_secret', 'without the secret a revoked credential is just a bad secret (no state leak)');

SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w2'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":403,"reason":"worker_mismatch"}'::jsonb,
          'credential of another worker -> 403 worker_mismatch');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'worker mismatch: one write');
SELECT results_eq(
    $$SELECT credential_id, worker_id, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1$$,
    format($$VALUES (%L::text, %L::uuid, 'worker_mismatch'::text)$$, :'c1', :'w2'),
    'worker mismatch audit row names the claimed worker');

SELECT is((SELECT count(*) FROM ql_private.security_audit WHERE outcome = 'denied'), 9::bigint,
          'nine denials, nine audit rows');
SELECT is((SELECT count(*) FROM information_schema.columns
            WHERE table_schema = 'ql_private' AND table_name = 'security_audit'
              AND data_type = 'bytea'), 0::bigint,
          'security_audit has no column that could hold a secret digest');

SELECT throws_ok(format($$SELECT ql_private.authenticate(%L, %L::bytea, %L::uuid, 'Bad Action')$$,
                        :'c1', :'d1', :'w1'),
                 'QL001', NULL, 'malformed action is a caller bug: QL001');
SELECT throws_ok(format($$SELECT ql_private.authenticate(%L, %L::bytea, NULL, 'offer.pull')$$,
                        :'c1', :'d1'),
                 'QL001', NULL, 'NULL worker id: QL001');
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'lease.heartbeat'), NULL,
          'still allowed after all those denials (no lockout state)');
SELECT is((SELECT count(*) FROM ql_private.security_audit WHERE reason NOT IN
            ('malformed_credential', 'unknown_credential', 'bad_secret', 'revoked_credential',
             'worker_mismatch', 'worker_disabled')), 0::bigint,
          'only the documented reason categories were written');

-- SPEC §9.5: a disabled worker's credentials are refused with 403
-- worker_disabled (audited); enabling it lets them in again. A bad secret is
-- still reported as such first (the caller learns nothing without the secret).
UPDATE ql_private.workers SET disabled_at = clock_timestamp() WHERE id = :'w1'::uuid;
SELECT ql_test.mark();
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'offer.pull'),
          '{"status":"denied","httpStatus":403,"reason":"worker_disabled"}'::jsonb,
          'disabled worker -> 403 worker_disabled');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'one write: the audit row');
SELECT results_eq(
    $$SELECT credential_id, worker_id, action, outcome, reason FROM ql_private.security_audit
       ORDER BY id DESC LIMIT 1$$,
    format($$VALUES (%L::text, %L::uuid, 'offer.pull'::text, 'denied'::text, 'worker_disabled'::text)$$,
           :'c1', :'w1'),
    'audited like every denial');
SELECT is(ql_private.authenticate(:'c1', sha256('wrong'::bytea), :'w1'::uuid, 'offer.pull') ->> 'reason',
          'bad_secret', 'a wrong secret of a disabled worker is still bad_secret');
UPDATE ql_private.workers SET disabled_at = NULL WHERE id = :'w1'::uuid;
SELECT is(ql_private.authenticate(:'c1', :'d1', :'w1'::uuid, 'offer.pull'), NULL, 're-enabled: allowed');

SELECT * FROM finish();
ROLLBACK;
