-- ql_private.lease_answer: the lease@v1 body built from values a lifecycle call
-- holds. Every `ok` answer of ql.ack_lease (starting, running), ql.heartbeat_lease
-- and ql.complete_lease (succeeded, cancelled) is built with it from the row the
-- call's UPDATE returned, without reading the rows again; each must equal
-- ql_private.lease_projection (the rows as stored) right after the call, key for
-- key. Also: the catalog shape of the two inlined helpers of the lifecycle path
-- (lease_answer, lease_verdict): SQL, no SET clause, not SECURITY DEFINER.
BEGIN;
SELECT plan(12);
\ir fixtures.psql

SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef
                  AND p.provolatile = 's'
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.lease_answer(ql_private.run_leases, text, boolean)'::regprocedure),
          'lease_answer: SQL, STABLE, no SET, not SECURITY DEFINER (inlined)');
SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef
                  AND p.provolatile = 'i'
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.lease_verdict(ql_private.run_leases, ql_private.worker_sessions,
                             ql_private.attempts, ql_private.runs, text, uuid, uuid, bigint, bytea,
                             timestamptz, boolean)'::regprocedure),
          'lease_verdict: SQL, IMMUTABLE, no SET, not SECURITY DEFINER (inlined)');

SELECT worker_id AS w1, credential_id AS c1, secret_digest AS d1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset
SELECT ql_test.claim('w1', :'s1', '00000000-0000-4000-8000-000000000001', 't1');
SELECT ql_test.claim('w1', :'s1', '00000000-0000-4000-8000-000000000002', 't2');

-- stored(offer): the lease@v1 body of the rows as stored now.
CREATE FUNCTION pg_temp.stored(offer text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql_private.lease_projection(l.id) FROM ql_private.run_leases l
     WHERE l.offer_id = offer::uuid
$$;
CREATE FUNCTION pg_temp.version(offer text) RETURNS bigint LANGUAGE sql AS $$
    SELECT l.lease_version FROM ql_private.run_leases l WHERE l.offer_id = offer::uuid
$$;
SELECT '00000000-0000-4000-8000-000000000001' AS o1, '00000000-0000-4000-8000-000000000002' AS o2
\gset

SELECT ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o1', ql_test.token_digest('t1'),
                    pg_temp.version(:'o1'), 'starting') AS a \gset
SELECT is(:'a'::jsonb ->> 'status', 'ok', 'starting ACK applied');
SELECT is(:'a'::jsonb -> 'lease', pg_temp.stored(:'o1'), '... its answer is the lease as stored');

SELECT ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o1', ql_test.token_digest('t1'),
                    pg_temp.version(:'o1'), 'running') AS a \gset
SELECT is(:'a'::jsonb -> 'lease', pg_temp.stored(:'o1'), 'running ACK: the lease as stored');

SELECT ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o1', ql_test.token_digest('t1'),
                          pg_temp.version(:'o1')) AS h \gset
SELECT is(:'h'::jsonb ->> 'status', 'ok', 'heartbeat applied');
SELECT is(:'h'::jsonb -> 'lease', pg_temp.stored(:'o1'), '... its answer is the lease as stored');

SELECT ql.complete_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o1', ql_test.token_digest('t1'),
                         pg_temp.version(:'o1'), 'succeeded', 0) AS c \gset
SELECT is(:'c'::jsonb ->> 'status', 'ok', 'completion applied');
SELECT is(:'c'::jsonb -> 'lease', pg_temp.stored(:'o1'), '... its answer is the lease as stored');

-- A cancel request: the flag reaches the heartbeat's and the completion's answer.
SELECT ql.ack_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o2', ql_test.token_digest('t2'),
                    pg_temp.version(:'o2'), 'starting');
SELECT ql.cancel_run(:'r2');
SELECT ql.heartbeat_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o2', ql_test.token_digest('t2'),
                          pg_temp.version(:'o2')) AS h \gset
SELECT is(:'h'::jsonb #>> '{lease,cancelRequested}', 'true',
          'heartbeat after a cancel request: cancelRequested true');
SELECT is(:'h'::jsonb -> 'lease', pg_temp.stored(:'o2'), '... and the lease as stored');
SELECT ql.complete_lease(:'c1', :'d1', :'w1', :'s1', 1, :'o2', ql_test.token_digest('t2'),
                         pg_temp.version(:'o2'), 'cancelled', 143) AS c \gset
SELECT is(:'c'::jsonb -> 'lease', pg_temp.stored(:'o2'),
          'completion as cancelled: the lease as stored');

SELECT * FROM finish();
ROLLBACK;
