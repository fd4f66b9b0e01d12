-- ql.lease_secrets (SPEC §14.3): the wrapped data key and ciphertexts of the
-- run's revision's secrets only to a live STARTED lease of an active session
-- whose worker still holds the run's pool, at the lease's current version;
-- otherwise a conflict category and nothing written. Never changes the lease.
-- Each delivery writes one security_audit row naming secret names only.
-- Called as ql_worker_ingress.
BEGIN;
SELECT plan(31);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2, secret_digest AS d2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(16)) ->> 'sessionId' AS s2 \gset

-- The project's data key and two secrets (bytes stand in for real wraps: the
-- database never decrypts).
SELECT ql.project_data_key('proj', repeat('ab', 16), 'kek-one', '\x000102030405060708090a0b'::bytea,
                           decode(repeat('11', 48), 'hex')) ->> 'projectId' AS project \gset
SELECT ql.set_secret('proj', 'db.password', 1, repeat('ab', 16), decode(repeat('22', 12), 'hex'),
                     decode(repeat('33', 40), 'hex')) IS NOT NULL;
SELECT ql.set_secret('proj', 'api-token', 1, repeat('ab', 16), decode(repeat('44', 12), 'hex'),
                     decode(repeat('55', 30), 'hex')) IS NOT NULL;
SELECT ql.publish_revision('proj', 'task', convert_to(
    '{"executor":"remote_worker","kind":"qinglong/command@v1","spec":{"argv":["true"],'
    '"env":{"PLAIN":"x"},"schema":"qinglong/command@v1",'
    '"secrets":{"DB_PASSWORD":"db.password","TOKEN":"api-token","TOKEN2":"api-token"},'
    '"timeoutS":30}}', 'UTF8')) ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6
  FROM ql_test.enqueue(:'task', 6, 0) r \gset

CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT coalesce((SELECT l.lease_version FROM ql_private.run_leases l
                      WHERE l.offer_id::text = offer), 1)
$$;
CREATE FUNCTION pg_temp.ack(cred text, dig bytea, worker text, session text, offer text,
                            token text)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(cred, dig, worker, session, 1, offer, ql_test.token_digest(token),
                        pg_temp.version(offer), 'starting')
$$;
-- At the lease's current version unless told.
CREATE FUNCTION pg_temp.sec(cred text, dig bytea, worker text, session text, offer text,
                            token text, version bigint DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.lease_secrets(cred, dig, worker, session, 1, offer, ql_test.token_digest(token),
                            coalesce(version, pg_temp.version(offer)))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.version(text),
                          pg_temp.ack(text, bytea, text, text, text, text),
                          pg_temp.sec(text, bytea, text, text, text, text, bigint)
    TO ql_worker_ingress;
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer) TO ql_worker_ingress;
CREATE FUNCTION pg_temp.audits() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.security_audit
     WHERE action = 'lease.secrets' AND outcome = 'allowed' $$;

SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 5) n;
SELECT ql_test.claim('w2', :'s2', pg_temp.offer(6), 't6');

-- 1. not started yet: conflict not_started, nothing written
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 't1') AS pre \gset
RESET ROLE;
SELECT is(:'pre'::jsonb, '{"status":"conflict","category":"not_started"}'::jsonb,
          'before the starting ACK -> not_started');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a refused delivery writes nothing');

-- 2. after the starting ACK: the wrapped key and the ciphertexts, audited by name
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 5) n;
SELECT pg_temp.ack(:'c2', :'d2', :'w2', :'s2', pg_temp.offer(6), 't6');
RESET ROLE;
SELECT ql_test.lease(pg_temp.offer(1)) AS lease_before \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 't1') AS ok1 \gset
RESET ROLE;
SELECT is(:'ok1'::jsonb ->> 'status', 'ok', 'started lease -> ok');
SELECT is(:'ok1'::jsonb ->> 'projectId', :'project', 'the run''s project');
SELECT is(:'ok1'::jsonb ->> 'runId', :'r1', 'the lease''s run');
SELECT is(:'ok1'::jsonb -> 'dataKey',
          jsonb_build_object('keyId', repeat('ab', 16), 'kekId', 'kek-one',
                             'nonce', '000102030405060708090a0b', 'wrappedKey', repeat('11', 48)),
          'the project''s wrapped data key (hex)');
SELECT is((SELECT array_agg(e ->> 'env' || '=' || (e ->> 'name') || '@' || (e ->> 'version')
                            ORDER BY e ->> 'env' COLLATE "C")
             FROM jsonb_array_elements(:'ok1'::jsonb -> 'secrets') e),
          ARRAY['DB_PASSWORD=db.password@1', 'TOKEN=api-token@1', 'TOKEN2=api-token@1'],
          'one entry per env name of the revision''s secrets map');
SELECT is((SELECT e ->> 'ciphertext' FROM jsonb_array_elements(:'ok1'::jsonb -> 'secrets') e
            WHERE e ->> 'env' = 'DB_PASSWORD'), repeat('33', 40), 'ciphertext as stored (hex)');
SELECT is(ql_test.lease(pg_temp.offer(1)), :'lease_before'::ql_private.run_leases,
          'the lease row is unchanged (version, expiry, heartbeat)');
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'a delivery writes exactly one row');
SELECT is((SELECT row(credential_id, worker_id::text, outcome, reason, detail)::text
             FROM ql_private.security_audit
            WHERE action = 'lease.secrets' AND outcome = 'allowed'),
          row(:'c1'::text, :'w1'::text, 'allowed'::text, 'secrets_delivered'::text,
              jsonb_build_object('runId', :'r1', 'offerId', pg_temp.offer(1),
                                 'names', jsonb_build_array('api-token', 'db.password')))::text,
          'the audit row names the run, the offer and the secret names (sorted, once each)');
SELECT ok(NOT EXISTS (SELECT 1 FROM ql_private.security_audit a
                       WHERE a.detail::text LIKE '%3333%' OR a.detail::text LIKE '%1111%'),
          'no ciphertext or wrapped key in any audit row');

-- 3. fences: another worker's lease, token, stale version
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c2', :'d2', :'w2', :'s2', pg_temp.offer(1), 't1') ->> 'category',
          'offer_foreign', 'another worker''s lease -> offer_foreign');
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 'wrong') ->> 'category',
          'token_mismatch', 'a wrong lease token -> token_mismatch');
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 't1', 1) ->> 'category',
          'stale_lease_version', 'an older lease version -> stale_lease_version');
SELECT is(pg_temp.sec(:'c1', 'x'::bytea, :'w1', :'s1', pg_temp.offer(1), 't1') ->> 'reason',
          'malformed_credential', 'a bad credential -> the denial envelope');
SELECT throws_ok(format('SELECT pg_temp.sec(%L, %L::bytea, %L, %L, %L, %L, 0)', :'c1', :'d1',
                        :'w1', :'s1', pg_temp.offer(1), 't1'),
                 'QL001', NULL, 'lease version 0 -> QL001');
RESET ROLE;

-- 4. a heartbeat then the secrets at the new version: ok; the heartbeat's retry
--    version (current - 1) is no delivery
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(1), ql_test.token_digest('t1'),
                          pg_temp.version(pg_temp.offer(1))) IS NOT NULL;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 't1') ->> 'status', 'ok',
          'after a heartbeat, at the new version -> ok');
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(1), 't1',
                      pg_temp.version(pg_temp.offer(1)) - 1) ->> 'category',
          'stale_lease_version', 'the version before the heartbeat -> stale_lease_version');
RESET ROLE;

-- 5. expired lease
SELECT ql_test.expire_lease(pg_temp.offer(2));
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(2), 't2') ->> 'category',
          'lease_expired', 'a lease past its expiry -> lease_expired');
RESET ROLE;

-- 6. released lease (completed)
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'),
                    pg_temp.version(pg_temp.offer(3)), 'running') IS NOT NULL;
SELECT ql.complete_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'),
                         pg_temp.version(pg_temp.offer(3)), 'succeeded', 0) IS NOT NULL;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(3), 't3') ->> 'category',
          'lease_terminal', 'a completed (released) lease -> lease_terminal');
RESET ROLE;

-- 7. a missing secret (deleted after publish)
SELECT ql.delete_secret('proj', 'api-token') IS NOT NULL;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(4), 't4') ->> 'category',
          'secret_missing', 'a secret deleted since publish -> secret_missing');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'secret_missing writes nothing');
SELECT ql.set_secret('proj', 'api-token', 1, repeat('ab', 16), decode(repeat('44', 12), 'hex'),
                     decode(repeat('55', 30), 'hex')) IS NOT NULL;

-- 8. the pool grant revoked: a started lease may finish, but gets no secret
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w1'::uuid;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(4), 't4') ->> 'category',
          'pool_revoked', 'the worker no longer holds the run''s pool -> pool_revoked');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'pool_revoked writes nothing');
SELECT ql.grant_pool(:'w1', 'proj/default') IS NOT NULL;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(4), 't4') ->> 'status', 'ok',
          'an explicit grant of the run''s pool -> ok');
RESET ROLE;

-- 9. the session ended
SELECT ql.end_session(:'s1') IS NOT NULL;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c1', :'d1', :'w1', :'s1', pg_temp.offer(5), 't5') ->> 'category',
          'session_replaced', 'a closed session -> session_replaced');
RESET ROLE;

-- 9b. a worker disabled with drain: its started lease still gets its secrets
--     (the run may still be between its starting ACK and its spawn); without
--     drain it is refused like every call
SELECT ql.disable_worker(:'w2', true) IS NOT NULL;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c2', :'d2', :'w2', :'s2', pg_temp.offer(6), 't6') ->> 'status', 'ok',
          'a draining worker''s started lease gets its secrets');
RESET ROLE;
SELECT ql.enable_worker(:'w2') IS NOT NULL;
SELECT ql.disable_worker(:'w2', false) IS NOT NULL;
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.sec(:'c2', :'d2', :'w2', :'s2', pg_temp.offer(6), 't6') ->> 'reason',
          'worker_disabled', 'disabled without drain -> worker_disabled');
RESET ROLE;

-- 10. the worker role only
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.lease_secrets(%L, %L::bytea, %L, %L, 1, %L, %L::bytea, 2)',
                        :'c2', :'d2', :'w2', :'s2', pg_temp.offer(6), ql_test.token_digest('t6')),
                 '42501', NULL, 'ql_runtime cannot call ql.lease_secrets');
RESET ROLE;
SELECT is(pg_temp.audits(), 4::bigint, 'four deliveries, four audit rows');

SELECT * FROM finish();
ROLLBACK;
