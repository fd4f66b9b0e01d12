-- ql_private.log_bytes (SPEC §15): any byte range of an attempt's live log,
-- reassembled from its chunks: within one chunk, across chunks, past the
-- stored end, empty; another attempt's chunks never mix in; read-only.
BEGIN;
SELECT plan(10);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset
SELECT current_attempt_id AS a1 FROM ql_private.runs WHERE id = :'r1'::uuid \gset
SELECT current_attempt_id AS a2 FROM ql_private.runs WHERE id = :'r2'::uuid \gset
INSERT INTO ql_private.attempt_logs (attempt_id, run_id, stored_bytes, limit_bytes)
VALUES (:'a1', :'r1', 10, 4194304), (:'a2', :'r2', 3, 4194304);
INSERT INTO ql_private.attempt_log_chunks (attempt_id, start_byte, content)
VALUES (:'a1', 0, 'abc'), (:'a1', 3, 'defg'), (:'a1', 7, 'hij'), (:'a2', 0, 'XYZ');

SELECT is(ql_private.log_bytes(:'a1', 0, 10), '\x6162636465666768696a'::bytea, 'the whole log: the chunks in order');
SELECT is(ql_private.log_bytes(:'a1', 4, 6), 'ef'::bytea, 'inside one chunk');
SELECT is(ql_private.log_bytes(:'a1', 2, 8), 'cdefgh'::bytea, 'across three chunks');
SELECT is(ql_private.log_bytes(:'a1', 3, 7), 'defg'::bytea, 'exactly one chunk');
SELECT is(ql_private.log_bytes(:'a1', 8, 100), 'ij'::bytea, 'past the stored end: what exists');
SELECT is(ql_private.log_bytes(:'a1', 5, 5), ''::bytea, 'an empty range');
SELECT is(ql_private.log_bytes(:'a1', 10, 20), ''::bytea, 'at the stored end: nothing');
SELECT is(ql_private.log_bytes(:'a2', 0, 10), 'XYZ'::bytea, 'another attempt''s log stays its own');
SELECT is(ql_private.log_bytes(gen_random_uuid(), 0, 10), ''::bytea, 'an attempt without a log: empty');
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'ql_private.log_bytes(uuid, bigint, bigint)'::regprocedure),
          's', 'STABLE (a read)');

SELECT * FROM finish();
ROLLBACK;
