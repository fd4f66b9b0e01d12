-- ql.prune_audit (SPEC §9.6, §13.6): security_audit rows older than the
-- retention, in batches; dry run counts only; every call that deleted rows
-- leaves one audit.pruned row naming the acting login (session_user) and what
-- it deleted; the newest audit.pruned row is never deleted; bounds; roles.
BEGIN;
SELECT plan(17);
\ir fixtures.psql

-- A sweeper's login (rolled back with the file): a member of ql_sweeper only.
CREATE ROLE ql_test_audit_sweeper LOGIN IN ROLE ql_sweeper;

INSERT INTO ql_private.security_audit (occurred_at, action, outcome, reason)
SELECT clock_timestamp() - make_interval(days => d) + interval '1 hour', 'offer.pull', 'denied', 'bad_secret'
  FROM generate_series(1, 40) d;
SET LOCAL ROLE ql_runtime;
SELECT ql_test.mark();
SELECT is(ql.prune_audit(30 * 86400, 5, true), '{"securityAudit": 5, "more": true}'::jsonb, 'dry run counts a batch');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and deletes nothing (and records no prune)');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 5, "more": true}'::jsonb, 'a full batch: more');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 5, "more": true}'::jsonb, 'the next batch');
SELECT is(ql.prune_audit(30 * 86400, 5), '{"securityAudit": 0, "more": false}'::jsonb, 'the ten older than 30 days are gone');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.security_audit WHERE action <> 'audit.pruned'), 30::bigint,
          'the 30 within the retention stay');
SELECT results_eq(
    $$SELECT actor, outcome, reason, detail - 'cutoffMs', credential_id, worker_id
        FROM ql_private.security_audit WHERE action = 'audit.pruned' ORDER BY id$$,
    $$VALUES (session_user::text COLLATE "default", 'allowed', 'retention',
              '{"securityAudit": 5, "retainS": 2592000, "batch": 5}'::jsonb, NULL::text, NULL::uuid),
             (session_user::text COLLATE "default", 'allowed', 'retention',
              '{"securityAudit": 5, "retainS": 2592000, "batch": 5}'::jsonb, NULL::text, NULL::uuid)$$,
    'each batch that deleted rows left one audit.pruned row naming the login and the count; the empty one none');
SELECT is((SELECT count(*) FROM ql_private.security_audit
            WHERE action = 'audit.pruned'
              AND abs((detail ->> 'cutoffMs')::bigint
                      - ql_private.epoch_ms(occurred_at - interval '30 days')) < 1000), 2::bigint,
          '... and the cutoff it applied (now - retention, epoch ms)');

-- The sweeper's login prunes everything: its row names it, not the role it acts through.
SET LOCAL SESSION AUTHORIZATION ql_test_audit_sweeper;
SELECT ql.prune_audit(0, 100) AS swept \gset
RESET SESSION AUTHORIZATION;
SELECT is(:'swept'::jsonb, '{"securityAudit": 31, "more": false}'::jsonb,
          'retention 0 as the sweeper login: the 30 rows and the older prune row, not the newest');
SELECT results_eq(
    $$SELECT actor, (detail ->> 'securityAudit')::bigint, (detail ->> 'retainS')::bigint
        FROM ql_private.security_audit ORDER BY id$$,
    $$VALUES (session_user::text COLLATE "default", 5::bigint, 2592000::bigint),
             ('ql_test_audit_sweeper'::text, 31::bigint, 0::bigint)$$,
    'left: the newest earlier prune row and the sweeper login''s own, naming it (session_user)');
SET LOCAL SESSION AUTHORIZATION ql_test_audit_sweeper;
SELECT ql.prune_audit(0, 100) AS again \gset
RESET SESSION AUTHORIZATION;
SELECT is(:'again'::jsonb, '{"securityAudit": 1, "more": false}'::jsonb,
          'a second pass deletes the older prune row ...');
SELECT results_eq(
    $$SELECT actor, action FROM ql_private.security_audit ORDER BY id$$,
    $$VALUES ('ql_test_audit_sweeper'::text, 'audit.pruned'::text)$$,
    '... records nothing for it (retention does not feed itself) and keeps the newest prune row');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_audit(0), '{"securityAudit": 0, "more": false}'::jsonb,
          'the newest prune row survives any retention: the last prune stays on record');
RESET ROLE;

SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.prune_audit(-5)'), 'QL006 retainAudit', 'negative retention -> QL006 retainAudit');
RESET ROLE;
SELECT throws_ok($$INSERT INTO ql_private.security_audit (action, outcome, reason, detail)
                   VALUES ('audit.pruned', 'allowed', 'retention', '{"secret": "x"}')$$,
                 '23514', NULL, 'an audit detail can never carry a secret key');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.prune_audit(0)', '42501', NULL, 'the ingress cannot prune');
RESET ROLE;
SET LOCAL ROLE ql_readonly;
SELECT throws_ok('SELECT ql.prune_audit(0)', '42501', NULL, 'the read-only role cannot prune');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
