-- ql.expiring_identities as ql_readonly (SPEC 16.3): credentials and issued
-- certificates expiring within the window, soonest first; revoked, already
-- expired, later, rotated and renewed ones are left out; bounds QL006.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT ql.register_worker('soon') ->> 'workerId' AS w \gset
SELECT ql.issue_credential(:'w', 'soonsoonsoonsoo1', ql_test.secret_digest('s1'), 3 * 86400) \gset
SELECT ql.issue_credential(:'w', 'soonsoonsoonsoo2', ql_test.secret_digest('s2'), 86400) \gset
SELECT ql.issue_credential(:'w', 'latelatelatelat1', ql_test.secret_digest('l1'), 30 * 86400) \gset
SELECT ql.issue_credential(:'w', 'nevernevernever1', ql_test.secret_digest('n1')) \gset
SELECT ql.issue_credential(:'w', 'revokedrevokedr1', ql_test.secret_digest('r1'), 86400) \gset
SELECT ql.revoke_credential('revokedrevokedr1') \gset
-- Rotated (a live successor): the predecessor's grace is nobody's concern.
SELECT ql.issue_credential(:'w', 'rotatedrotatedr1', ql_test.secret_digest('o1'), 2 * 86400) \gset
SELECT ql.rotate_credential('rotatedrotatedr1', ql_test.secret_digest('o1'), :'w',
                            'successorsucces1', ql_test.secret_digest('o2')) \gset
SELECT ql.record_certificate(:'w', 'aa', ql_private.epoch_ms(clock_timestamp() + interval '5 days')) \gset
SELECT ql.record_certificate(:'w', 'bb', ql_private.epoch_ms(clock_timestamp() + interval '100 days')) \gset
SELECT ql.register_worker('cert') ->> 'workerId' AS w2 \gset
SELECT ql.record_certificate(:'w2', 'cc', ql_private.epoch_ms(clock_timestamp() + interval '2 days')) \gset
SELECT ql.record_certificate(:'w2', 'dd', ql_private.epoch_ms(clock_timestamp() + interval '3 days')) \gset
SELECT ql.revoke_certificate('dd') \gset
-- Renewed with a shorter validity: the newer certificate is the one that counts.
SELECT ql.register_worker('short') ->> 'workerId' AS w3 \gset
SELECT ql.record_certificate(:'w3', 'ee', ql_private.epoch_ms(clock_timestamp() + interval '100 days')) \gset
SELECT ql.record_certificate(:'w3', 'ff', ql_private.epoch_ms(clock_timestamp() + interval '7 days')) \gset

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.expiring_identities() AS e \gset
RESET ROLE;
SELECT is((SELECT array_agg(x ->> 'credentialId') FROM jsonb_array_elements(:'e'::jsonb -> 'credentials') x),
          ARRAY['soonsoonsoonsoo2', 'successorsucces1', 'soonsoonsoonsoo1'],
          'credentials within 14 days, soonest first (not revoked, later, never-expiring or rotated ones; a successor has its own lifetime)');
SELECT is((SELECT array_agg(x ->> 'serial') FROM jsonb_array_elements(:'e'::jsonb -> 'certificates') x),
          ARRAY['cc', 'ff'],
          'certificates within 14 days that are neither revoked nor renewed (a later issue renews, even a shorter one)');
SELECT is(:'e'::jsonb -> 'credentials' -> 0 ->> 'worker', 'soon', 'each names its worker');
SELECT ok(NOT (:'e'::jsonb -> 'credentials' -> 0) ?| ARRAY['secretDigest', 'secret_digest'], 'never a digest');
SELECT is((:'e'::jsonb ->> 'credentialsTotal')::int, 3, 'the total');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'writes nothing');

SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.expiring_counts(1209600), '{"credentials": 3, "certificates": 2}'::jsonb,
          'the ingress reads the counts');
RESET ROLE;
SET LOCAL ROLE ql_readonly;
SELECT throws_ok($$SELECT ql.expiring_identities(0, 10)$$, 'QL006', NULL, 'window 0 -> QL006');
SELECT throws_ok($$SELECT ql.expiring_identities(60, 1001)$$, 'QL006', NULL, 'limit above 1000 -> QL006');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
