-- ql.append_log (SPEC §15.1, §15.2): a started lease appends at the stored
-- length only; a chunk repeating stored bytes is a replay (no write); anything
-- else is log_offset with the stored length (no write); the cap pinned on the
-- lease at claim keeps the first logLimitBytes bytes, a crossing chunk cut on a
-- UTF-8 character boundary, then truncated: true; the lease fences (version
-- checked, never bumped); bad input; a pruned run takes its log along.
-- Called as ql_worker_ingress.
BEGIN;
SELECT plan(65);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(32)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT ql_test.publish('proj', 'small', ql_test.command('["small"]')) ->> 'taskId' AS small \gset
SELECT ql.configure_task(:'small', p_log_limit_bytes => 1024) ->> 'logLimitBytes' AS small_cap \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4, 0) r \gset
SELECT r[1] AS r5 FROM ql_test.enqueue(:'small', 1, 0) r \gset

CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
-- The lease's current version, read as the test's owner (what a worker that got
-- every answer holds).
CREATE FUNCTION pg_temp.version(n integer) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT l.lease_version FROM ql_private.run_leases l WHERE l.offer_id::text = pg_temp.offer(n)
$$;
CREATE FUNCTION pg_temp.wid(label text) RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT ql_test.worker_id(label)
$$;
CREATE FUNCTION pg_temp.log(n integer, off bigint, chunk text, version bigint DEFAULT NULL,
                            label text DEFAULT 'w1', token text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.append_log(ql_test.credential_id(label), ql_test.secret_digest(label),
                         pg_temp.wid(label), current_setting('test.s1'), 1, pg_temp.offer(n),
                         ql_test.token_digest(coalesce(token, 't' || n)),
                         coalesce(version, pg_temp.version(n)), off, chunk)
$$;
CREATE FUNCTION pg_temp.ack(n integer, phase text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), pg_temp.wid('w1'),
                        current_setting('test.s1'), 1, pg_temp.offer(n), ql_test.token_digest('t' || n),
                        pg_temp.version(n), phase)
$$;
CREATE FUNCTION pg_temp.stored(n integer) RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT convert_from(ql_private.log_bytes(l.attempt_id, 0, 1 << 30), 'UTF8')
      FROM ql_private.run_leases l WHERE l.offer_id::text = pg_temp.offer(n)
$$;
CREATE FUNCTION pg_temp.chunks(n integer) RETURNS bigint LANGUAGE sql SECURITY DEFINER AS $$
    SELECT count(*) FROM ql_private.attempt_log_chunks c
      JOIN ql_private.run_leases l ON l.attempt_id = c.attempt_id
     WHERE l.offer_id::text = pg_temp.offer(n)
$$;
GRANT EXECUTE ON FUNCTION pg_temp.offer(integer), pg_temp.version(integer), pg_temp.wid(text),
                          pg_temp.log(integer, bigint, text, bigint, text, text),
                          pg_temp.ack(integer, text), pg_temp.stored(integer),
                          pg_temp.chunks(integer)
    TO ql_worker_ingress;
SELECT set_config('test.s1', :'s1', true);

SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 4) n;
SELECT ql_test.claim('w1', :'s1', pg_temp.offer(5), 't5');
-- The small task's cap is raised after its claim: the claimed attempt keeps 1 KiB.
SELECT ql.configure_task(:'small', p_log_limit_bytes => 67108864) ->> 'logLimitBytes' AS raised \gset
-- So is the default task's after its claims: they keep 4 MiB.
SELECT ql.configure_task(:'task', p_log_limit_bytes => 1024) ->> 'logLimitBytes' AS lowered \gset

-- 1. before the starting ACK: QL020, nothing written
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT pg_temp.log(1, 0, 'early')$$, 'QL020', NULL,
                 'a chunk before the starting ACK -> QL020 (only a started lease appends)');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'nothing written');
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.ack(n, 'starting') FROM generate_series(1, 5) n;
RESET ROLE;

-- 2. appends at the stored length
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.version(1) AS v1 \gset
SELECT is(pg_temp.log(1, 0, 'héllo' || chr(10)),
          '{"status": "ok", "storedBytes": 7, "truncated": false}'::jsonb, 'the first chunk at 0 is appended (7 UTF-8 bytes)');
SELECT is(pg_temp.log(1, 7, 'wörld'),
          '{"status": "ok", "storedBytes": 13, "truncated": false}'::jsonb, 'the next at the stored length is appended');
SELECT is(pg_temp.version(1), :'v1'::bigint, 'the lease version is not bumped by appends');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 5::bigint, 'written: the header (inserted, then updated by each append) and two chunk rows');
SELECT is(pg_temp.stored(1), 'héllo' || chr(10) || 'wörld', 'the log is the chunks in order');
SELECT is(pg_temp.chunks(1), 2::bigint, 'one row per chunk (earlier bytes never rewritten)');
SELECT results_eq(
    format($$SELECT lg.run_id::text, lg.limit_bytes, lg.stored_bytes, lg.truncated
               FROM ql_private.attempt_logs lg JOIN ql_private.runs r ON r.current_attempt_id = lg.attempt_id
              WHERE r.id = %L$$, :'r1'),
    format($$VALUES (%L, 4194304, 13::bigint, false)$$, :'r1'),
    'header: the run, the cap pinned at claim (4 MiB, not the 1 KiB configured since), 13 bytes');

-- 3. replays: the chunk again, or any part of the stored bytes -> unchanged
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(1, 7, 'wörld'),
          '{"status": "idempotent", "storedBytes": 13, "truncated": false}'::jsonb, 'the last chunk again: replay');
SELECT is(pg_temp.log(1, 0, 'héllo' || chr(10)),
          '{"status": "idempotent", "storedBytes": 13, "truncated": false}'::jsonb, 'the first chunk again: replay');
SELECT is(pg_temp.log(1, 3, 'llo' || chr(10) || 'w') ->> 'status', 'idempotent', 'stored bytes across chunks: replay');
SELECT is(pg_temp.log(1, 13, '') ->> 'status', 'idempotent', 'an empty chunk at the end: unchanged');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'replays write nothing');

-- 4. anything else: log_offset with the stored length, nothing written
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(1, 0, 'HELLO' || chr(10)),
          '{"status": "conflict", "category": "log_offset", "storedBytes": 13}'::jsonb,
          'different bytes at a stored offset -> log_offset {storedBytes}');
SELECT is(pg_temp.log(1, 20, 'gap'),
          '{"status": "conflict", "category": "log_offset", "storedBytes": 13}'::jsonb,
          'an offset past the stored length (a gap) -> log_offset');
SELECT is(pg_temp.log(1, 7, 'wörld and more') ->> 'category', 'log_offset',
          'a chunk overlapping the stored end -> log_offset (appends only at the stored length)');
SELECT is(pg_temp.log(1, 8, 'x') ->> 'category', 'log_offset', 'an offset inside a stored character -> log_offset');
SELECT is(pg_temp.log(2, 5, 'x'),
          '{"status": "conflict", "category": "log_offset", "storedBytes": 0}'::jsonb,
          'no log yet, offset 5 -> log_offset {storedBytes: 0}');
SELECT is(pg_temp.log(2, 0, ''),
          '{"status": "idempotent", "storedBytes": 0, "truncated": false}'::jsonb, 'an empty first chunk: unchanged');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'conflicts write nothing (no header for the empty first chunk either)');
SELECT is(pg_temp.stored(1), 'héllo' || chr(10) || 'wörld', 'the log is unchanged');

-- 5. the worker resumes from the answered offset: no gap, no duplicate
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(1, 13, '!') ->> 'storedBytes', '14', 'resumed at 13');
RESET ROLE;
SELECT is(pg_temp.stored(1), 'héllo' || chr(10) || 'wörld!', 'no gap, no duplicate');

-- 6. the cap (1 KiB pinned at claim on run 5's lease)
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(5, 0, repeat('x', 1000)),
          '{"status": "ok", "storedBytes": 1000, "truncated": false}'::jsonb, 'under the cap');
SELECT is(pg_temp.log(5, 1000, 'a' || repeat('€', 40)),
          '{"status": "ok", "storedBytes": 1022, "truncated": true}'::jsonb,
          'a chunk crossing the cap is cut at the last character boundary at or below it (1 + 7 x 3 bytes)');
SELECT is(pg_temp.log(5, 1022, 'more'),
          '{"status": "ok", "storedBytes": 1022, "truncated": true}'::jsonb, 'past the cap: dropped, truncated');
SELECT is(pg_temp.log(5, 1000, 'a' || repeat('€', 40)),
          '{"status": "idempotent", "storedBytes": 1022, "truncated": true}'::jsonb,
          'the crossing chunk again: a replay');
SELECT is(pg_temp.log(5, 1000, 'b') ->> 'category', 'log_offset', 'other bytes at a stored offset: still log_offset');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 5::bigint, 'the header (inserted, updated twice) and two chunk rows: nothing for the dropped chunk');
SELECT is(pg_temp.stored(5), repeat('x', 1000) || 'a' || repeat('€', 7), 'the first 1022 bytes kept, valid UTF-8');
SELECT results_eq(
    format($$SELECT lg.limit_bytes, lg.stored_bytes, lg.truncated FROM ql_private.attempt_logs lg
               JOIN ql_private.runs r ON r.current_attempt_id = lg.attempt_id WHERE r.id = %L$$, :'r5'),
    $$VALUES (1024, 1022::bigint, true)$$,
    'the cap pinned at claim (1 KiB, not the 64 MiB configured since); truncation recorded');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(3, 0, repeat('y', 1024)) ->> 'truncated', 'false', 'exactly the cap is not truncated ...');
RESET ROLE;
UPDATE ql_private.attempt_logs SET limit_bytes = 1024
 WHERE attempt_id = (SELECT current_attempt_id FROM ql_private.runs WHERE id = :'r3'::uuid);
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(3, 0, repeat('y', 1024)) ->> 'status', 'idempotent', '... (its replay)');
SELECT is(pg_temp.log(3, 1024, 'z'),
          '{"status": "ok", "storedBytes": 1024, "truncated": true}'::jsonb, '... the next byte is');

-- 7. chunk size and input errors (nothing written)
SELECT is(pg_temp.log(4, 0, repeat('€', 21845) || 'a') ->> 'storedBytes', '65536', 'a chunk of exactly 64 KiB is accepted');
RESET ROLE;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql_test.error_of($$SELECT pg_temp.log(4, 65536, repeat('€', 21845) || 'ab')$$), 'QL002 chunk',
          'a chunk of 65537 bytes -> QL002 chunk');
SELECT is(ql_test.error_of($$SELECT pg_temp.log(4, -1, 'x')$$), 'QL001 offset', 'negative offset -> QL001 offset');
SELECT is(ql_test.error_of($$SELECT pg_temp.log(4, NULL, 'x')$$), 'QL001 offset', 'NULL offset -> QL001 offset');
SELECT is(ql_test.error_of($$SELECT pg_temp.log(4, 0, NULL)$$), 'QL001 chunk', 'NULL chunk -> QL001 chunk');
SELECT is(ql_test.error_of($$SELECT pg_temp.log(4, 0, 'x', 0)$$), 'QL001 ', 'lease version 0 -> QL001');
SELECT is(ql_test.error_of(format($$SELECT ql.append_log(%L, %L::bytea, %L, %L, 0, %L, '\x00'::bytea, 1, 0, 'x')$$,
                                  ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1',
                                  pg_temp.offer(4))), 'QL001 ', 'generation 0 -> QL001');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'bad input writes nothing');

-- 8. lease fences: the version is checked (not bumped), the lease categories
SET LOCAL ROLE ql_worker_ingress;
SELECT pg_temp.version(1) AS v_before \gset
SELECT is(ql.heartbeat_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                             pg_temp.offer(1), ql_test.token_digest('t1'), :'v_before') ->> 'status', 'ok',
          'a heartbeat bumps the version');
RESET ROLE;
SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(1, 14, 'x', :'v_before') ->> 'category', 'stale_lease_version',
          'a chunk at the version before the heartbeat -> stale_lease_version');
SELECT is(pg_temp.log(1, 14, 'x', :'v_before' + 2) ->> 'category', 'stale_lease_version',
          'a future version -> stale_lease_version');
SELECT is(pg_temp.log(1, 14, 'x', NULL, 'w1', 'wrong') ->> 'category', 'token_mismatch', 'another token -> token_mismatch');
SELECT is(ql.append_log(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 2,
                        pg_temp.offer(1), ql_test.token_digest('t1'), pg_temp.version(1), 14, 'x') ->> 'category',
          'session_replaced', 'another generation -> session_replaced');
SELECT is(ql.append_log(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                        pg_temp.offer(99), ql_test.token_digest('t1'), 1, 0, 'x') ->> 'category',
          'offer_foreign', 'an unknown offer -> offer_foreign');
SELECT is(ql.append_log(ql_test.credential_id('w1'), ql_test.secret_digest('w2'), :'w1', :'s1', 1,
                        pg_temp.offer(1), ql_test.token_digest('t1'), pg_temp.version(1), 14, 'x'),
          '{"status": "denied", "httpStatus": 401, "reason": "bad_secret"}'::jsonb, 'a bad secret -> denied');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'fenced chunks write nothing (the denial: one audit row)');
SELECT is((SELECT action FROM ql_private.security_audit ORDER BY id DESC LIMIT 1), 'lease.log',
          'the denial is audited as lease.log');
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(1, 14, 'x') ->> 'storedBytes', '15', 'at the version the heartbeat answered: appended');
RESET ROLE;

-- an expired lease, a completed one
SELECT ql_test.expire_lease(pg_temp.offer(2));
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(2, 0, 'late') ->> 'category', 'lease_expired', 'an expired lease -> lease_expired');
SELECT is(ql.complete_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), :'w1', :'s1', 1,
                            pg_temp.offer(1), ql_test.token_digest('t1'), pg_temp.version(1), 'succeeded', 0,
                            NULL, '{"durationMs": 1, "outputTail": "", "outputBytes": 15, "logBytes": 15}')
          ->> 'status', 'ok', 'lease 1 completes (logBytes 15)');
SELECT is(pg_temp.log(1, 15, 'after') ->> 'category', 'lease_terminal', 'a completed lease -> lease_terminal');
SELECT is(pg_temp.log(1, 0, 'héllo' || chr(10)) ->> 'category', 'lease_terminal', 'even a replay: the lease answers first');
RESET ROLE;

-- 9. a worker disabled with drain: its started lease still streams its log
SELECT ql.disable_worker(:'w1', true) ->> 'workerId' AS disabled \gset
SET LOCAL ROLE ql_worker_ingress;
SELECT is(pg_temp.log(4, 65536, 'draining') ->> 'status', 'ok', 'a draining worker''s started lease appends (lease.log allowed)');
RESET ROLE;

-- 10. who may call it
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT pg_temp.log(4, 0, 'x')$$, '42501', NULL, 'ql_runtime cannot append');
RESET ROLE;
SET LOCAL ROLE ql_readonly;
SELECT throws_ok($$SELECT pg_temp.log(4, 0, 'x')$$, '42501', NULL, 'ql_readonly cannot append');
RESET ROLE;

-- 11. retention: a pruned run takes its log along (ON DELETE CASCADE)
UPDATE ql_private.runs SET finished_at = clock_timestamp() - interval '30 days' WHERE id = :'r1'::uuid;
SELECT is((SELECT count(*) FROM ql_private.attempt_log_chunks c JOIN ql_private.attempts a ON a.id = c.attempt_id
            WHERE a.run_id = :'r1'::uuid), 4::bigint, 'run 1 has 4 chunks before pruning');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.prune_runs(14 * 86400) ->> 'runs', '1', 'run 1 pruned');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.attempt_logs WHERE run_id = :'r1'::uuid)
          + (SELECT count(*) FROM ql_private.attempt_log_chunks c
              WHERE NOT EXISTS (SELECT 1 FROM ql_private.attempts a WHERE a.id = c.attempt_id)),
          0::bigint, 'its log header and chunks are gone');
SELECT is((SELECT count(*) FROM ql_private.attempt_logs), 3::bigint, 'the other runs'' logs stay');
SELECT is((SELECT count(*) FROM pg_constraint
            WHERE conrelid IN ('ql_private.attempt_logs'::regclass, 'ql_private.attempt_log_chunks'::regclass)
              AND contype = 'f' AND confdeltype = 'c'), 2::bigint,
          'both log tables cascade from their parent');

SELECT * FROM finish();
ROLLBACK;
