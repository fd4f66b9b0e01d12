-- ql.record_auth_denial: ingress-decided denials land in security_audit with only
-- well-formed identifiers; malformed action/reason -> QL001 and no row.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1 FROM ql_test.new_worker('w1') \gset

SET LOCAL ROLE ql_worker_ingress;
SELECT lives_ok(format($$SELECT ql.record_auth_denial(%L, %L, 'offer.pull', 'identity_mismatch')$$,
                       :'c1', :'w1'),
                'ingress role records an identity mismatch');
SELECT lives_ok($$SELECT ql.record_auth_denial(NULL, NULL, 'session.open', 'missing_credential')$$,
                'missing credential with no identifiers');
SELECT lives_ok($$SELECT ql.record_auth_denial('Bearer secret!!', 'NOT-A-UUID', 'offer.pull', 'malformed_credential')$$,
                'malformed identifiers are accepted but not stored');
SELECT throws_ok($$SELECT ql.record_auth_denial(NULL, NULL, 'offer.pull', 'Bad Reason')$$,
                 'QL001', NULL, 'malformed reason -> QL001');
SELECT throws_ok($$SELECT ql.record_auth_denial(NULL, NULL, 'offer.pull', 'has.dot')$$,
                 'QL001', NULL, 'a reason category has no dots -> QL001');
SELECT throws_ok($$SELECT ql.record_auth_denial(NULL, NULL, NULL, 'missing_credential')$$,
                 'QL001', NULL, 'NULL action -> QL001');
SELECT throws_ok($$SELECT ql.record_auth_denial(NULL, NULL, repeat('a', 65), 'missing_credential')$$,
                 'QL001', NULL, 'over-long action -> QL001');
RESET ROLE;

SELECT results_eq(
    $$SELECT credential_id, worker_id, action, outcome, reason
        FROM ql_private.security_audit ORDER BY id$$,
    format($$VALUES (%L::text, %L::uuid, 'offer.pull'::text, 'denied'::text, 'identity_mismatch'::text),
                    (NULL, NULL, 'session.open', 'denied', 'missing_credential'),
                    (NULL, NULL, 'offer.pull', 'denied', 'malformed_credential')$$,
           :'c1', :'w1'),
    'three rows, identifiers only when well-formed, none for the refused calls');
SELECT is((SELECT count(*) FROM ql_private.security_audit
            WHERE credential_id LIKE '%secret%'), 0::bigint,
          'nothing resembling the bearer value was stored');

SELECT * FROM finish();
ROLLBACK;
