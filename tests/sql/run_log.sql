-- ql.run_log (SPEC §15.3): one page of an attempt's live log — text from an
-- offset in whole UTF-8 characters, storedBytes, logBytes from the completion,
-- truncated, complete (never for a log shorter than logBytes or an ended
-- attempt without it), ended; the latest attempt by default; specific errors;
-- readable by ql_readonly and ql_runtime only.
BEGIN;
SELECT plan(38);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(32)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
UPDATE ql_private.tasks SET retry_base_ms = 0, max_attempts = 2 WHERE id = :'task'::uuid;
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4 FROM ql_test.enqueue(:'task', 4, 0) r \gset

CREATE FUNCTION pg_temp.offer(n integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0'))
$$;
CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql AS $$
    SELECT l.lease_version FROM ql_private.run_leases l WHERE l.offer_id::text = offer
$$;
-- The worker's calls for offer n (token 't' || n), at the lease's current version.
CREATE FUNCTION pg_temp.start(n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.ack_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                        l.session_id::text, l.session_generation, l.offer_id::text,
                        ql_test.token_digest('t' || n), l.lease_version, 'starting')
      FROM ql_private.run_leases l WHERE l.offer_id::text = pg_temp.offer(n)
$$;
CREATE FUNCTION pg_temp.log(n integer, off bigint, chunk text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.append_log(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                         l.session_id::text, l.session_generation, l.offer_id::text,
                         ql_test.token_digest('t' || n), l.lease_version, off, chunk)
      FROM ql_private.run_leases l WHERE l.offer_id::text = pg_temp.offer(n)
$$;
CREATE FUNCTION pg_temp.done(n integer, outcome text, result jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.complete_lease(ql_test.credential_id('w1'), ql_test.secret_digest('w1'), ql_test.worker_id('w1'),
                             l.session_id::text, l.session_generation, l.offer_id::text,
                             ql_test.token_digest('t' || n), l.lease_version, outcome,
                             CASE outcome WHEN 'failed' THEN 1 END, NULL, result)
      FROM ql_private.run_leases l WHERE l.offer_id::text = pg_temp.offer(n)
$$;
CREATE FUNCTION pg_temp.result(log_bytes bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('durationMs', 1, 'outputTail', '', 'outputBytes', 0, 'logBytes', log_bytes)
$$;

SELECT ql_test.claim('w1', :'s1', pg_temp.offer(n), 't' || n) FROM generate_series(1, 4) n;
SELECT pg_temp.start(n) FROM generate_series(1, 4) n;

-- 1. an attempt that sent nothing yet
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r1'::uuid),
          jsonb_build_object('runId', :'r1', 'attemptNumber', 1, 'offset', 0, 'text', '',
                             'storedBytes', 0, 'logBytes', NULL, 'truncated', false,
                             'complete', false, 'ended', false),
          'no log yet: empty text, nothing stored, not ended, not complete');
RESET ROLE;

-- 2. text as stored, in whole characters
SELECT pg_temp.log(1, 0, 'héllo' || chr(10));
SELECT pg_temp.log(1, 7, 'a𝄞b');
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r1'::uuid) ->> 'text', 'héllo' || chr(10) || 'a𝄞b', 'the whole log as stored');
SELECT is(ql.run_log(:'r1'::uuid) ->> 'storedBytes', '13', 'storedBytes counts UTF-8 bytes (7 + 6)');
SELECT is(ql.run_log(:'r1'::uuid, 1, 3) ->> 'text', 'llo' || chr(10) || 'a𝄞b', 'from an offset (a character boundary)');
SELECT is(ql.run_log(:'r1'::uuid, 1, 3) ->> 'offset', '3', 'the offset is answered');
SELECT is(ql.run_log(:'r1'::uuid, NULL, 0, 4) ->> 'text', 'hél', 'a page of 4 bytes: h é l');
SELECT is(ql.run_log(:'r1'::uuid, NULL, 7, 4) ->> 'text', 'a', 'a page ending inside a 4-byte character is cut back before it');
SELECT is(ql.run_log(:'r1'::uuid, NULL, 8, 4) ->> 'text', '𝄞', 'the next page starts with it');
SELECT is(ql.run_log(:'r1'::uuid, NULL, 5, 4) ->> 'text', 'o' || chr(10) || 'a', 'a page across two chunks');
SELECT is(ql.run_log(:'r1'::uuid, NULL, 13) ->> 'text', '', 'at the stored end: empty text');
SELECT is((ql.run_log(:'r1'::uuid) -> 'logBytes'), 'null'::jsonb, 'logBytes null while running');
SELECT is((ql.run_log(:'r1'::uuid) ->> 'ended')::boolean, false, 'not ended while running');
RESET ROLE;

-- 3. a follower pages through the whole log and gets exactly the stored text
SELECT pg_temp.log(1, 13, repeat('€', 1000));
CREATE TEMP TABLE follow (page integer, off bigint, txt text);
DO $$
DECLARE
    v_off bigint := 0;
    v_doc jsonb;
    v_page integer := 0;
BEGIN
    LOOP
        v_doc := ql.run_log((SELECT run_id FROM ql_private.attempt_logs LIMIT 1), NULL, v_off, 1000);
        EXIT WHEN v_doc ->> 'text' = '';
        v_page := v_page + 1;
        INSERT INTO follow VALUES (v_page, v_off, v_doc ->> 'text');
        v_off := v_off + octet_length(convert_to(v_doc ->> 'text', 'UTF8'));
    END LOOP;
END
$$;
SELECT is((SELECT string_agg(txt, '' ORDER BY page) FROM follow),
          'héllo' || chr(10) || 'a𝄞b' || repeat('€', 1000), 'pages of 1000 bytes put together = the log');
SELECT ok((SELECT bool_and(octet_length(convert_to(txt, 'UTF8')) <= 1000) FROM follow), 'no page over max bytes');

-- 4. completion: logBytes, ended, complete
SELECT pg_temp.done(1, 'succeeded', pg_temp.result(3013));
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r1'::uuid) - 'text',
          jsonb_build_object('runId', :'r1', 'attemptNumber', 1, 'offset', 0, 'storedBytes', 3013,
                             'logBytes', 3013, 'truncated', false, 'complete', true, 'ended', true),
          'ended with logBytes = storedBytes: complete');
RESET ROLE;
SELECT pg_temp.log(2, 0, 'only part');
SELECT pg_temp.done(2, 'succeeded', pg_temp.result(100));
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r2'::uuid) - 'text' - 'runId',
          jsonb_build_object('attemptNumber', 1, 'offset', 0, 'storedBytes', 9,
                             'logBytes', 100, 'truncated', false, 'complete', false, 'ended', true),
          'ended with fewer bytes stored than logBytes: never complete');
RESET ROLE;
SELECT pg_temp.log(3, 0, 'no logBytes');
SELECT pg_temp.done(3, 'succeeded', jsonb_build_object('durationMs', 1, 'outputTail', '', 'outputBytes', 0));
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r3'::uuid) -> 'logBytes', 'null'::jsonb, 'a result without logBytes: null');
SELECT is((ql.run_log(:'r3'::uuid) ->> 'complete')::boolean, false, 'ended without logBytes: not complete');
SELECT is((ql.run_log(:'r3'::uuid) ->> 'ended')::boolean, true, '... but ended');
RESET ROLE;

-- 5. truncated at the cap, then ended: not complete (shorter than logBytes), truncated
SELECT pg_temp.log(4, 0, repeat('x', 1000));
-- (a cap of 1 KiB on this attempt's log header: what a task configured so pins)
UPDATE ql_private.attempt_logs SET limit_bytes = 1024
 WHERE attempt_id = (SELECT current_attempt_id FROM ql_private.runs WHERE id = :'r4'::uuid);
SELECT pg_temp.log(4, 1000, repeat('y', 100));
SELECT pg_temp.done(4, 'failed', pg_temp.result(5000));
SET LOCAL ROLE ql_readonly;
SELECT is(ql.run_log(:'r4'::uuid, 1) - 'text' - 'runId',
          jsonb_build_object('attemptNumber', 1, 'offset', 0, 'storedBytes', 1024,
                             'logBytes', 5000, 'truncated', true, 'complete', false, 'ended', true),
          'truncated at the cap and ended: truncated, never complete, storedBytes = the cap');

-- 6. the latest attempt by default (the failed run was retried: attempt 2, no log yet)
SELECT is(ql.run_log(:'r4'::uuid) - 'runId',
          jsonb_build_object('attemptNumber', 2, 'offset', 0, 'text', '', 'storedBytes', 0,
                             'logBytes', NULL, 'truncated', false, 'complete', false, 'ended', false),
          'NULL attempt: the latest attempt (2), which has no log');
SELECT is(ql.run_log(:'r4'::uuid, 1, 996) ->> 'text', 'xxxxyyyyyyyyyyyyyyyyyyyyyyyy', 'attempt 1 still readable by number (to the cap)');
RESET ROLE;

-- 7. errors
SET LOCAL ROLE ql_readonly;
SELECT is(ql_test.error_of('SELECT ql.run_log(gen_random_uuid())'), 'QL004 runId', 'unknown run -> QL004 runId');
SELECT is(ql_test.error_of('SELECT ql.run_log(NULL)'), 'QL001 runId', 'NULL run -> QL001 runId');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, 3)', :'r4')), 'QL004 attempt', 'unknown attempt -> QL004 attempt');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, 0)', :'r4')), 'QL006 attempt', 'attempt 0 -> QL006 attempt');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 14)', :'r1')), 'QL006 offset', 'offset past the stored length -> QL006 offset');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, -1)', :'r1')), 'QL006 offset', 'negative offset -> QL006 offset');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 2)', :'r1')), 'QL006 offset', 'offset inside é -> QL006 offset');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, NULL)', :'r1')), 'QL006 offset', 'NULL offset -> QL006 offset');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 0, 3)', :'r1')), 'QL006 maxBytes', 'max bytes 3 -> QL006 maxBytes');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 0, 16777217)', :'r1')), 'QL006 maxBytes', 'max bytes over 16 MiB -> QL006 maxBytes');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 0, 16777216)', :'r1')), NULL, 'max bytes 16 MiB accepted');
SELECT is(ql_test.error_of(format('SELECT ql.run_log(%L, NULL, 0, 4)', :'r1')), NULL, 'max bytes 4 accepted');
RESET ROLE;

-- 8. who may read it
SET LOCAL ROLE ql_runtime;
SELECT is(ql.run_log(:'r1'::uuid) ->> 'storedBytes', '3013', 'ql_runtime reads it');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.run_log(%L)', :'r1'), '42501', NULL, 'ql_worker_ingress cannot read logs');
RESET ROLE;
SET LOCAL ROLE ql_producer;
SELECT throws_ok(format('SELECT ql.run_log(%L)', :'r1'), '42501', NULL, 'ql_producer only through producer_run_log');
RESET ROLE;
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql.run_log(uuid, integer, bigint, integer)'::regprocedure),
          's', 'STABLE: a read');

SELECT * FROM finish();
ROLLBACK;
