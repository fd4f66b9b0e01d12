-- ql_private.lease_prelude: the one start of the five lease endpoints
-- (ql.ack_lease, ql.heartbeat_lease, ql.complete_lease, ql.append_log,
-- ql.lease_secrets). Authenticates on the first read only (a denial is
-- authenticate's envelope, nothing read), opens the lease through
-- ql_private.lease_open (its lock mode passed through) and answers what ends a
-- call without a change exactly as the endpoints answer it: conflicts, replays
-- (idempotent with the lease projection; start_failed and complete only with the
-- same details, else lease_terminal; `read`: stale_lease_version). QL001 for an
-- unknown change.
BEGIN;
SELECT plan(40);
\ir fixtures.psql

SELECT has_function('ql_private', 'lease_prelude',
                    ARRAY['text', 'bytea', 'uuid', 'uuid', 'bigint', 'uuid', 'bytea', 'bigint',
                          'text', 'text', 'text', 'ql_private.run_leases', 'text', 'integer',
                          'text', 'jsonb'],
                    'ql_private.lease_prelude exists with the documented signature');
SELECT is((SELECT provolatile::text || prosecdef::text FROM pg_proc
            WHERE proname = 'lease_prelude' AND pronamespace = 'ql_private'::regnamespace),
          'vfalse', 'VOLATILE (it locks rows), not SECURITY DEFINER (runs as its caller)');
SELECT ok(NOT has_function_privilege('ql_worker_ingress',
              (SELECT oid FROM pg_proc WHERE proname = 'lease_prelude'
                  AND pronamespace = 'ql_private'::regnamespace), 'EXECUTE'),
          'the ingress cannot call it directly');

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET lease_ttl_seconds = 45 WHERE id = :'task'::uuid;
SELECT ql_test.enqueue(:'task', 4, 0);
CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 4) n;

-- pre(offer, token, version, change, ...): the prelude for w1's session with w1's
-- credential (secret `dig`, default the right one).
CREATE FUNCTION pg_temp.pre(offer text, token text, version bigint, change text,
                            lock text DEFAULT NULL, seen ql_private.run_leases DEFAULT NULL,
                            outcome text DEFAULT NULL, exit_code integer DEFAULT NULL,
                            reason text DEFAULT NULL, result jsonb DEFAULT NULL,
                            dig bytea DEFAULT ql_test.secret_digest('w1'))
RETURNS TABLE (answer jsonb, lease ql_private.run_leases, attempt_id uuid, run_id uuid,
               ttl integer)
LANGUAGE sql AS $$
    SELECT p.answer, p.lease, (p.attempt).id, (p.run).id, p.ttl
      FROM ql_private.lease_prelude(
               ql_test.credential_id('w1'), dig, ql_test.worker_id('w1')::uuid,
               (SELECT ws.session_id FROM ql_private.worker_sessions ws
                 WHERE ws.worker_id = ql_test.worker_id('w1')::uuid), 1,
               offer::uuid, ql_test.token_digest(token), version, 'lease.ack', change, lock,
               seen, outcome, exit_code, reason, result) p
$$;
CREATE FUNCTION pg_temp.audits() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ql_private.security_audit $$;

-- 1. denial: authenticate's envelope as it is, one audit row, nothing read
SELECT pg_temp.audits() AS audits0 \gset
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting',
                                          dig => sha256('wrong'::bytea))),
          '{"status":"denied","httpStatus":401,"reason":"bad_secret"}'::jsonb,
          'wrong secret -> the denial envelope of ql_private.authenticate');
SELECT is(pg_temp.audits() - :audits0, 1::bigint, 'the denial wrote its one audit row');
SELECT is((SELECT (lease).id FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting',
                                              dig => sha256('wrong'::bytea))),
          NULL, 'denied: no lease read');
-- the locked re-read (p_seen given) does not authenticate again
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting',
                                          seen => ql_test.lease(pg_temp.offer(1)),
                                          dig => sha256('wrong'::bytea))),
          NULL, 'p_seen given: the credential is not checked again');

-- 2. the proof holds at the current version: no answer, the rows
SELECT ql_test.mark();
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')), NULL,
          'proof holds: no answer, the caller goes on');
SELECT is((SELECT (lease).offer_id::text FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')),
          pg_temp.offer(1), 'the lease by offer id');
SELECT is((SELECT attempt_id FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')),
          (ql_test.lease(pg_temp.offer(1))).attempt_id, 'its attempt');
SELECT is((SELECT run_id FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')),
          (ql_test.lease(pg_temp.offer(1))).run_id, 'its run');
SELECT is((SELECT ttl FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')), 45,
          'the TTL pinned on the lease at claim');

-- 3. conflicts: {status: conflict, category} exactly
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 'wrong', 1, 'starting')),
          '{"status":"conflict","category":"token_mismatch"}'::jsonb, 'token mismatch');
SELECT is((SELECT answer FROM pg_temp.pre(gen_random_uuid()::text, 't1', 1, 'starting')),
          '{"status":"conflict","category":"offer_foreign"}'::jsonb, 'unknown offer id');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 7, 'starting')),
          '{"status":"conflict","category":"stale_lease_version"}'::jsonb, 'another version');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'heartbeat')), NULL,
          'no heartbeat yet at version 1: no answer either (QL020 is the caller''s)');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'no write for the reads and conflicts above');

-- 4. replays answer exactly what the endpoint answers
SELECT is(ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(1), ql_test.token_digest('t1'),
                    1, 'starting') ->> 'status', 'ok', 'setup: ql.ack_lease');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')),
          ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(1), ql_test.token_digest('t1'),
                       1, 'starting'),
          'starting replay: the answer of ql.ack_lease''s replay');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 1, 'starting')),
          jsonb_build_object('status', 'idempotent', 'lease',
                             ql_private.lease_projection((ql_test.lease(pg_temp.offer(1))).id)),
          'idempotent with the current lease projection');
SELECT is(ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(1),
                          ql_test.token_digest('t1'), 2) ->> 'status', 'ok', 'setup: ql.heartbeat_lease');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 2, 'heartbeat')),
          ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(1),
                             ql_test.token_digest('t1'), 2),
          'heartbeat replay: the answer of ql.heartbeat_lease''s replay');
SELECT is((SELECT answer ->> 'status' FROM pg_temp.pre(pg_temp.offer(1), 't1', 2, 'heartbeat')),
          'idempotent', '... idempotent');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 2, 'read')),
          '{"status":"conflict","category":"stale_lease_version"}'::jsonb,
          '`read` (lease_secrets): a heartbeat''s retry is stale, no delivery');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(1), 't1', 3, 'read')), NULL,
          '`read` at the current version: no answer');

-- start_failed: idempotent only with the same reason
SELECT is(ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(2), ql_test.token_digest('t2'),
                    1, 'start_failed', 'image_pull') ->> 'status', 'ok', 'setup: ql.ack_lease');
SELECT is((SELECT answer ->> 'status' FROM pg_temp.pre(pg_temp.offer(2), 't2', 1, 'start_failed',
                                                       reason => 'image_pull')),
          'idempotent', 'start_failed replay with the same reason: idempotent');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(2), 't2', 1, 'start_failed',
                                          reason => 'other_reason')),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'start_failed replay with another reason: lease_terminal');

-- complete: idempotent only with the same outcome, exit code, reason and result
SELECT is(ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(3), ql_test.token_digest('t3'),
                    1, 'starting') ->> 'status', 'ok', 'setup: ql.ack_lease');
SELECT is(ql.complete_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(3),
                         ql_test.token_digest('t3'), 2, 'succeeded', 0) ->> 'status', 'ok', 'setup: ql.complete_lease');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(3), 't3', 2, 'complete',
                                          outcome => 'succeeded', exit_code => 0)),
          ql.complete_lease(:'c1', :'d1', :'w1', :'s1', 1, pg_temp.offer(3),
                            ql_test.token_digest('t3'), 2, 'succeeded', 0),
          'complete replay: the answer of ql.complete_lease''s replay');
SELECT is((SELECT answer ->> 'status' FROM pg_temp.pre(pg_temp.offer(3), 't3', 2, 'complete',
                                                       outcome => 'succeeded', exit_code => 0)),
          'idempotent', '... idempotent');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(3), 't3', 2, 'complete',
                                          outcome => 'succeeded')),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'another exit code: lease_terminal');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(3), 't3', 2, 'complete',
                                          outcome => 'failed', exit_code => 0, reason => 'failed')),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'another outcome: lease_terminal');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(3), 't3', 2, 'complete',
                                          outcome => 'succeeded', exit_code => 0,
                                          result => '{"durationMs": 1}'::jsonb)),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'another result: lease_terminal');
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(3), 't3', 3, 'complete',
                                          outcome => 'succeeded', exit_code => 0)),
          '{"status":"conflict","category":"lease_terminal"}'::jsonb,
          'a released lease at its current version: lease_terminal');

-- 5. the lock mode reaches lease_open: attempt -> run -> lease, in its order
CREATE EXTENSION pgrowlocks;
SELECT is((SELECT answer FROM pg_temp.pre(pg_temp.offer(4), 't4', 1, 'starting',
                                          'attempt_run_lease',
                                          ql_test.lease(pg_temp.offer(4)))),
          NULL, 'locked re-read: no answer');
SELECT is((SELECT array_to_string(l.modes, ',') FROM pgrowlocks('ql_private.run_leases') l
            JOIN ql_private.run_leases rl ON rl.ctid = l.locked_row
           WHERE rl.offer_id = pg_temp.offer(4)::uuid),
          'For Update', 'attempt_run_lease: the lease FOR UPDATE (and its attempt and run)');

-- 6. errors
SELECT throws_ok(format('SELECT * FROM pg_temp.pre(%L, %L, 1, %L)', pg_temp.offer(4), 't4', 'bogus'),
                 'QL001', 'change must be starting, running, start_failed, heartbeat, complete, log or read',
                 'unknown change -> QL001');
SELECT throws_ok(format('SELECT * FROM pg_temp.pre(%L, %L, 1, %L, %L)', pg_temp.offer(4), 't4',
                        'starting', 'bogus'),
                 'QL001', NULL, 'unknown lock mode (lease_open) -> QL001');

SELECT * FROM finish();
ROLLBACK;
