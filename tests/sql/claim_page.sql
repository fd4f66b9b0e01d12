-- ql_private.claim_page: the claim step of one page of a pull — claim order
-- (priority DESC, placement score DESC, queue order), the session lock and slot
-- re-check before the pull's first claim, the attempt budget, and the counts it
-- answers (attempts, races). The claim statement itself is claim_candidate's
-- (tests/py/test_pull_offer.py); whole pulls are in pull_offer.sql.
BEGIN;
SELECT plan(24);
\ir fixtures.psql

SELECT has_function('ql_private', 'claim_page',
                    ARRAY['ql_private.worker_sessions', 'uuid[]', 'integer[]', 'smallint[]', 'uuid',
                          'bytea', 'integer', 'boolean'],
                    'ql_private.claim_page(worker_sessions, uuid[], integer[], smallint[], uuid, bytea, integer, boolean) exists');

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1 \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(1)) ->> 'sessionId' AS s2 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3, r[4] AS r4, r[5] AS r5, r[6] AS r6, r[7] AS r7
  FROM ql_test.enqueue(:'task', 7, 0) r \gset

-- claim(session, runs, scores, priorities, attempts_left, session_locked) -> one row
-- (run_id 'none' when nothing was claimed); each call claims with a fresh offer id.
CREATE FUNCTION pg_temp.claim(session text, runs text[], scores integer[], priorities integer[],
                              attempts_left integer DEFAULT 8, locked boolean DEFAULT false)
RETURNS TABLE (run_id text, score text, attempts integer, races integer, session_locked text,
               capacity_full text)
LANGUAGE sql AS $$
    SELECT coalesce(c.offer #>> '{candidate,runId}', 'none'),
           coalesce(c.offer ->> 'placementScore', 'none'), c.attempts,
           c.races, c.session_locked::text, c.capacity_full::text
      FROM ql_private.worker_sessions ws
     CROSS JOIN LATERAL ql_private.claim_page(ws, runs::uuid[], scores, priorities::smallint[],
                                              gen_random_uuid(), sha256('token'::bytea),
                                              attempts_left, locked) c
     WHERE ws.session_id = session::uuid
$$;

-- 1. the first passer is claimed; the session lock is taken for it
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r1', :'r2'], ARRAY[0, 0], ARRAY[0, 0]) \gset c1_
SELECT is(:'c1_run_id'::text, :'r1', 'equal scores: the first passer (queue order) is claimed');
SELECT is(:'c1_attempts' || '/' || :'c1_races', '1/0', 'one claim attempt, no race');
SELECT is(:'c1_session_locked'::text, 'true', 'the session row was locked for the claim');
SELECT is(:'c1_capacity_full'::text, 'false', 'a free slot');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r1'::uuid), 'dispatching',
          'the claimed run is dispatching');
SELECT is((SELECT count(*)::integer FROM ql_private.events
            WHERE run_id = :'r1'::uuid AND type = 'run.dispatched'), 1, 'one run.dispatched event');

-- 2. claim order: a higher score first within a priority, never across priorities
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r2', :'r3', :'r4'], ARRAY[0, 5, 5], ARRAY[0, 0, 0]) \gset c2_
SELECT is(:'c2_run_id'::text, :'r3', 'same priority: the higher score first, the earlier of equals');
SELECT is(:'c2_score'::text, '5', '... with its placement score on the offer');
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r2', :'r4'], ARRAY[0, 9], ARRAY[1, 0]) \gset c3_
SELECT is(:'c3_run_id'::text, :'r2', 'a higher priority is claimed before a higher score');

-- 3. races: a passer claimed since the scan is passed over and counted
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r1', :'r3', :'r4'], ARRAY[0, 0, 0], ARRAY[0, 0, 0]) \gset c4_
SELECT is(:'c4_run_id'::text, :'r4', 'runs claimed since the scan are passed over');
SELECT is(:'c4_attempts' || '/' || :'c4_races', '1/2', '... each counted as a race, one attempt');
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r1', :'r3'], ARRAY[0, 0], ARRAY[0, 0]) \gset c5_
SELECT is(:'c5_run_id'::text, 'none', 'every passer gone: nothing claimed');
SELECT is(:'c5_attempts' || '/' || :'c5_races', '0/2', '... no attempt, two races');

-- 4. the attempt budget
SELECT ql_test.mark();
SELECT * FROM pg_temp.claim(:'s1', ARRAY[:'r5'], ARRAY[0], ARRAY[0], 0) \gset c6_
SELECT is(:'c6_run_id' || '/' || :'c6_attempts' || '/' || :'c6_session_locked',
          'none/0/false', 'no attempt left: nothing tried, no session lock');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and nothing written');

-- 5. the slot re-check: a full session claims nothing
SELECT * FROM pg_temp.claim(:'s2', ARRAY[:'r5'], ARRAY[0], ARRAY[0]) \gset c7_
SELECT is(:'c7_run_id'::text, :'r5', 'w2 (one slot) claims r5');
SELECT ql_test.mark();
SELECT * FROM pg_temp.claim(:'s2', ARRAY[:'r6'], ARRAY[0], ARRAY[0]) \gset c8_
SELECT is(:'c8_capacity_full' || '/' || :'c8_run_id' || '/' || :'c8_attempts',
          'true/none/0', 'its slot taken: capacity_full, no claim, no attempt');
SELECT is(:'c8_session_locked'::text, 'false', '... and the pull does not hold the session');
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... nothing written');
SELECT * FROM pg_temp.claim(:'s2', ARRAY[:'r6'], ARRAY[0], ARRAY[0], 8, true) \gset c9_
SELECT is(:'c9_run_id'::text, :'r6',
          'session already locked by this pull: no second re-check (the pull did it once)');

-- 6. the session re-check raises for a session replaced since the pull's fence
SELECT ql_test.open_session('w1', ql_test.capabilities(16)) ->> 'sessionId' AS s1b \gset
SELECT throws_ok(format('SELECT * FROM pg_temp.claim(%L, ARRAY[%L], ARRAY[0], ARRAY[0])', :'s1', :'r7'),
                 'QL011', NULL, 'the session was replaced: QL011 from the re-check');
SELECT is((SELECT state FROM ql_private.runs WHERE id = :'r7'::uuid), 'queued', '... and r7 stays queued');
SELECT is((SELECT count(*)::integer FROM pg_temp.claim(:'s1b', ARRAY[:'r7'], ARRAY[0], ARRAY[0])
            WHERE run_id = :'r7'), 1, 'the new session claims it');

SELECT * FROM finish();
ROLLBACK;
