-- ql.expiring_counts (SPEC §16.3, /metrics): as ql_worker_ingress, the counts of
-- credentials and issued certificates expiring within the window — the totals
-- of ql.expiring_identities, never a name or id; QL006 (COLUMN withinS) out of
-- bounds; only the ingress (and the owner) may call it.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT ql.register_worker('soon') ->> 'workerId' AS w \gset
SELECT ql.issue_credential(:'w', 'soonsoonsoonsoo1', ql_test.secret_digest('s1'), 3 * 86400) \gset
SELECT ql.issue_credential(:'w', 'soonsoonsoonsoo2', ql_test.secret_digest('s2'), 86400) \gset
SELECT ql.issue_credential(:'w', 'latelatelatelat1', ql_test.secret_digest('l1'), 30 * 86400) \gset
SELECT ql.issue_credential(:'w', 'revokedrevokedr1', ql_test.secret_digest('r1'), 86400) \gset
SELECT ql.revoke_credential('revokedrevokedr1') \gset
SELECT ql.record_certificate(:'w', 'aa', ql_private.epoch_ms(clock_timestamp() + interval '5 days')) \gset
SELECT ql.register_worker('cert') ->> 'workerId' AS w2 \gset
SELECT ql.record_certificate(:'w2', 'bb', ql_private.epoch_ms(clock_timestamp() + interval '40 days')) \gset

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.expiring_counts(14 * 86400) AS c14 \gset
SELECT ql.expiring_counts(2 * 86400) AS c2 \gset
SELECT ql.expiring_counts(365 * 86400) AS c365 \gset
SELECT ql.expiring_counts(1) AS c1 \gset
RESET ROLE;
SELECT is(:'c14'::jsonb, '{"credentials": 2, "certificates": 1}'::jsonb,
          '14 days: two credentials (not the revoked or the later one), one certificate');
SELECT is(:'c2'::jsonb, '{"credentials": 1, "certificates": 0}'::jsonb, '2 days: one credential, no certificate');
SELECT is(:'c365'::jsonb, '{"credentials": 3, "certificates": 2}'::jsonb, 'a year: every unrevoked one');
SELECT is(:'c1'::jsonb, '{"credentials": 0, "certificates": 0}'::jsonb, 'one second: none');
SELECT is(:'c14'::jsonb,
          jsonb_build_object('credentials', ql.expiring_identities(14 * 86400, 1) -> 'credentialsTotal',
                             'certificates', ql.expiring_identities(14 * 86400, 1) -> 'certificatesTotal'),
          'the totals of ql.expiring_identities (not bounded by its list limit)');

SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT ql.expiring_counts(0)$$, 'QL006', 'withinS must be between 1 and 31536000',
                 'withinS 0 -> QL006');
SELECT throws_ok($$SELECT ql.expiring_counts(31536001)$$, 'QL006', NULL, 'above a year -> QL006');
SELECT throws_ok($$SELECT ql.expiring_counts(NULL)$$, 'QL006', NULL, 'NULL -> QL006');
RESET ROLE;
SELECT is(ql_test.error_of('SELECT ql.expiring_counts(-5)'), 'QL006 withinS', 'COLUMN withinS');
SET LOCAL ROLE ql_readonly;
SELECT throws_ok($$SELECT ql.expiring_counts(60)$$, '42501', NULL, 'ql_readonly may not call it');
RESET ROLE;
SET LOCAL ROLE ql_producer;
SELECT throws_ok($$SELECT ql.expiring_counts(60)$$, '42501', NULL, 'nor ql_producer');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
