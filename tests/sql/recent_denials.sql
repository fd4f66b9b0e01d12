-- ql.recent_denials (SPEC §10): the latest authentication denials, newest
-- first, allowed entries and entries older than 24 h left out, limited; no
-- secret, digest or token; ql_readonly reads, the ingress cannot.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1 FROM ql_test.new_worker('w1') \gset
INSERT INTO ql_private.security_audit (occurred_at, credential_id, worker_id, action, outcome, reason)
VALUES (clock_timestamp() - interval '25 hours', :'c1', :'w1'::uuid, 'pull', 'denied', 'too_old'),
       (clock_timestamp() - interval '3 minutes', :'c1', :'w1'::uuid, 'pull', 'denied', 'bad_secret'),
       (clock_timestamp() - interval '2 minutes', :'c1', :'w1'::uuid, 'session.open', 'allowed', 'ok'),
       (clock_timestamp() - interval '1 minute', NULL, NULL, 'session.open', 'denied', 'unknown_credential');

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.recent_denials() AS d \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is((SELECT array_agg(e ->> 'reason') FROM jsonb_array_elements(:'d'::jsonb -> 'denials') e),
          ARRAY['unknown_credential', 'bad_secret'], 'denials of the last 24 h, newest first; allowed ones left out');
SELECT is((:'d'::jsonb -> 'denials' -> 1) - 'atMs',
          jsonb_build_object('action', 'pull', 'reason', 'bad_secret', 'workerId', :'w1', 'credentialId', :'c1'),
          'a denial: action, reason, worker and credential id');
SELECT ok(:'d'::text !~* 'secret_?digest|token|"secret"', 'no secret, digest or token field');
SET LOCAL ROLE ql_runtime;
SELECT is(jsonb_array_length(ql.recent_denials(p_limit => 1) -> 'denials'), 1, 'limit 1: one denial');
SELECT is(ql_test.error_of('SELECT ql.recent_denials(p_limit => 101)'), 'QL006 limit', 'limit 101 -> QL006 limit');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.recent_denials()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
