-- ql.close_session: closes and releases unstarted leases; idempotent re-close
-- writes nothing; fences; an expired session can still be closed.
BEGIN;
SELECT plan(20);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.secret_digest('nope') AS bad \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2') ->> 'sessionId' AS other \gset
SELECT format('SELECT ql.close_session(%L, %L::bytea, %L, %%L, %%s)', :'c1', :'d1', :'w1') AS cl \gset
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS run_a, r[2] AS run_b FROM ql_test.enqueue(:'task', 2) r \gset
SELECT ql_test.fake_lease(:'run_a', :'s1', false) AS offer_a \gset
SELECT ql_test.fake_lease(:'run_b', :'s1', true) AS offer_b \gset

-- Denied first: nothing closed.
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.close_session(:'c1', :'bad', :'w1', :'s1', 1) ->> 'reason', 'bad_secret', 'bad secret -> denied');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s1'::uuid), 'active',
          'a denied close leaves the session active');
SELECT is((SELECT action FROM ql_private.security_audit ORDER BY id DESC LIMIT 1), 'session.close',
          'audited as session.close');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'cl', gen_random_uuid(), 1), 'QL010', NULL, 'unknown session -> QL010');
SELECT throws_ok(format(:'cl', :'other', 1), 'QL010', NULL, 'another worker''s session -> QL010');
SELECT throws_ok(format(:'cl', :'s1', 2), 'QL011', NULL, 'wrong generation -> QL011');
SELECT throws_ok(format(:'cl', :'s1', 'NULL'), 'QL001', NULL, 'generation NULL -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'fenced closes wrote nothing');

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.close_session(:'c1', :'d1', :'w1', :'s1', 1) AS c \gset
RESET ROLE;
SELECT is(:'c'::jsonb ->> 'status', 'ok', 'ingress role closes its session');
SELECT is(:'c'::jsonb -> 'session', ql_private.session_projection(
              (SELECT ws FROM ql_private.worker_sessions ws WHERE session_id = :'s1'::uuid)),
          'returns the session projection');
SELECT results_eq(
    format($$SELECT state, closed_at IS NOT NULL FROM ql_private.worker_sessions WHERE session_id = %L$$, :'s1'),
    $$VALUES ('closed'::text, true)$$, 'session closed with closed_at');
SELECT results_eq(
    format($$SELECT release_reason FROM ql_private.run_leases WHERE offer_id = %L$$, :'offer_a'),
    $$VALUES ('session_closed'::text)$$, 'unstarted lease released session_closed');
SELECT results_eq(
    format($$SELECT released_at IS NULL FROM ql_private.run_leases WHERE offer_id = %L$$, :'offer_b'),
    $$VALUES (true)$$, 'started lease stays live');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.close_session(:'c1', :'d1', :'w1', :'s1', 1), :'c'::jsonb,
          'closing again returns the same ok result');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'idempotent re-close writes nothing');

-- Replaced sessions cannot be "closed" (their close was the replacement).
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s2 \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s3 \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format(:'cl', :'s2', 2), 'QL011', NULL, 'closing a replaced session -> QL011');
SELECT throws_ok(format(:'cl', :'s1', 1), 'QL011', NULL,
                 'a closed session later followed by a newer one -> QL011');
RESET ROLE;

-- Expired but active: closing it frees its offers now instead of at the sweep.
SELECT ql_test.expire_session(:'s3');
SELECT ql_test.fake_lease(:'run_a', :'s3', false) AS offer_c \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.close_session(:'c1', :'d1', :'w1', :'s3', 3) ->> 'status', 'ok', 'an expired session can be closed');
RESET ROLE;
SELECT is((SELECT state FROM ql_private.worker_sessions WHERE session_id = :'s3'::uuid), 'closed',
          'expired session is now closed');
SELECT is((SELECT release_reason FROM ql_private.run_leases WHERE offer_id = :'offer_c'::uuid),
          'session_closed', 'and its unstarted lease released');

SELECT * FROM finish();
ROLLBACK;
