-- ql.prune_audit (SPEC §9.6): security_audit rows older than the retention, in
-- batches; dry run counts only; bounds; roles.
BEGIN;
SELECT plan(8);
\ir fixtures.psql

INSERT INTO ql_private.security_audit (occurred_at, action, outcome, reason)
SELECT clock_timestamp() - make_interval(days => d) + interval '1 hour', 'offer.pull', 'denied', 'bad_secret'
  FROM generate_series(1, 40) d;
SET LOCAL ROLE ql_runtime;
SELECT ql_test.mark();
SELECT is(ql.prune_audit(30 * 86400, 5, true), '{"securityAudit": 5, "more": true}'::jsonb, 'dry run counts a batch');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and deletes nothing');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 5, "more": true}'::jsonb, 'a full batch: more');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 5, "more": true}'::jsonb, 'the next batch');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 0, "more": false}'::jsonb, 'the ten older than 30 days are gone');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.security_audit), 30::bigint, 'the 30 within the retention stay');
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.prune_audit(-5)'), 'QL006 retainAudit', 'negative retention -> QL006 retainAudit');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.prune_audit(0)', '42501', NULL, 'the ingress cannot prune');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
