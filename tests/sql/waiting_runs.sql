-- ql.waiting_runs (SPEC §10): the oldest waiting runs with a placement verdict
-- against the live sessions, by the claim path's own evaluation
-- (matching_classes agrees); offered, scheduled and cancel-requested runs
-- left out; ql_readonly reads, the ingress cannot.
BEGIN;
SELECT plan(17);
\ir fixtures.psql

SELECT ql_test.publish('proj', 'plain') ->> 'taskId' AS plain \gset
SELECT ql_test.publish('proj', 'gpu', ql_test.command(
    placement => '{"required":{"executors":["remote-worker"],"labels":{"gpu":["yes"]},"runtimes":{}},"preferred":[]}'))
    ->> 'taskId' AS gpu \gset
SELECT r[1] AS p1, r[2] AS p2, r[3] AS p3, r[4] AS p4 FROM ql_test.enqueue(:'plain', 4) r \gset
SELECT r[1] AS g1 FROM ql_test.enqueue(:'gpu', 1) r \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour' WHERE id = :'p3'::uuid;
UPDATE ql_private.runs SET cancel_requested = true WHERE id = :'p4'::uuid;

CREATE FUNCTION pg_temp.verdicts(w jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_object_agg(e ->> 'runId', e ->> 'verdict') FROM jsonb_array_elements(w -> 'runs') e
$$;

-- No session yet.
SET LOCAL ROLE ql_readonly;
SELECT ql.waiting_runs() AS w0 \gset
RESET ROLE;
SELECT is((SELECT array_agg(e ->> 'runId') FROM jsonb_array_elements(:'w0'::jsonb -> 'runs') e),
          ARRAY[:'p1', :'p2', :'g1'], 'waiting runs oldest first; scheduled and cancel-requested left out');
SELECT is(pg_temp.verdicts(:'w0'),
          jsonb_build_object(:'p1', 'no_live_session', :'p2', 'no_live_session', :'g1', 'no_live_session'),
          'no live session: no_live_session');

-- A plain worker with one slot, offered p1: p1 is no longer waiting, its slot is used.
SELECT worker_id AS wn FROM ql_test.new_worker('wn') \gset
SELECT ql_test.open_session('wn', ql_test.capabilities(1)) ->> 'sessionId' AS sn \gset
SELECT ql_test.fake_lease(:'p1', :'sn', false) IS NOT NULL AS leased \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.waiting_runs() AS w1 \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is(pg_temp.verdicts(:'w1'), jsonb_build_object(:'p2', 'busy', :'g1', 'no_match'),
          'plain run: busy (the matching session is full); gpu run: no_match');
SELECT is((SELECT e FROM jsonb_array_elements(:'w1'::jsonb -> 'runs') e WHERE e ->> 'runId' = :'g1')
          - 'queuedAtMs' - 'waitingMs' - 'runId' - 'taskId',
          '{"task": "gpu", "project": "proj", "priority": 0, "verdict": "no_match", "sessionsMatching": 0,
            "sessionsWithFreeSlots": 0, "mismatches": {"executor": 0, "label": 1, "runtime": 0}}'::jsonb,
          'gpu run: why: one session lacks a required label (no label value shown)');

-- A gpu worker with free slots: the gpu run is ready; a disabled worker's session does not count.
SELECT worker_id AS wg FROM ql_test.new_worker('wg') \gset
SELECT ql_test.open_session('wg', ql_test.capabilities(2, '{"gpu":"yes"}')) ->> 'sessionId' AS sg \gset
SET LOCAL ROLE ql_runtime;
SELECT ql.waiting_runs() AS w2 \gset
RESET ROLE;
SELECT is(pg_temp.verdicts(:'w2'), jsonb_build_object(:'p2', 'ready', :'g1', 'ready'),
          'a session with free slots that both placements accept: ready');
SELECT is(:'w2'::jsonb ->> 'liveSessions', '2', 'two live sessions');
SELECT is(ql_private.placement_class_of((SELECT execution_revision_id FROM ql_private.runs WHERE id = :'g1'::uuid))
            = ANY (ql_private.matching_classes((SELECT capabilities FROM ql_private.worker_sessions
                                                 WHERE session_id = :'sn'::uuid))),
          false, 'the claim path agrees: the plain session cannot take the gpu run');
UPDATE ql_private.workers SET disabled_at = clock_timestamp() WHERE id = :'wg'::uuid;
SELECT is(pg_temp.verdicts(ql.waiting_runs()) ->> :'g1', 'no_match', 'a disabled worker''s session is not live');

-- SPEC §9.2's shape: more than 1000 runs scheduled for later, enqueued ahead of
-- one ready run. The panel takes the ready head from runs_candidate_keyset (and
-- overdue runs from runs_due), so the ready run is there, and only the entries
-- it lists are read.
SELECT ql_test.publish('proj', 'later') ->> 'taskId' AS later \gset
SELECT r[1] AS od FROM ql_test.enqueue(:'later', 1100) r \gset
UPDATE ql_private.runs SET due_at = clock_timestamp() + interval '1 hour'
 WHERE task_id = :'later'::uuid AND state = 'queued';
UPDATE ql_private.runs SET due_at = clock_timestamp() - interval '1 minute' WHERE id = :'od'::uuid;
SELECT r[1] AS r1 FROM ql_test.enqueue(:'later', 1) r \gset
-- r1 is a retry: created an hour ago, ready again (its current attempt's not_before) 10 s ago.
UPDATE ql_private.runs SET created_at = created_at - interval '1 hour' WHERE id = :'r1'::uuid;
UPDATE ql_private.attempts SET not_before = clock_timestamp() - interval '10 seconds'
 WHERE id = (SELECT current_attempt_id FROM ql_private.runs WHERE id = :'r1'::uuid);
-- A second plain worker declaring the same capabilities as wn (one slot, free):
-- sessions with equal capabilities share one evaluation, each is still counted.
SELECT worker_id AS wn2 FROM ql_test.new_worker('wn2') \gset
SELECT ql_test.open_session('wn2', ql_test.capabilities(1)) ->> 'sessionId' AS sn2 \gset
SET LOCAL ROLE ql_readonly;
SELECT ql.waiting_runs() AS w3 \gset
RESET ROLE;
SELECT is((SELECT array_agg(e ->> 'runId') FROM jsonb_array_elements(:'w3'::jsonb -> 'runs') e),
          ARRAY[:'p2', :'g1', :'od', :'r1'],
          'ready runs behind 1100 scheduled ones are listed, with the overdue one, by queue_seq');
SELECT is((:'w3'::jsonb ->> 'scanned')::integer, 4,
          'only the head entries are read (3 ready, 1 overdue), not the scheduled runs');
SELECT is((SELECT jsonb_build_array(e -> 'verdict', e -> 'sessionsMatching', e -> 'sessionsWithFreeSlots')
             FROM jsonb_array_elements(:'w3'::jsonb -> 'runs') e WHERE e ->> 'runId' = :'r1'),
          '["ready", 2, 1]'::jsonb,
          'two sessions with equal capabilities: both match, the one with a free slot makes it ready');
SELECT ok((SELECT (e ->> 'waitingMs')::bigint BETWEEN 10000 AND 120000
             FROM jsonb_array_elements(:'w3'::jsonb -> 'runs') e WHERE e ->> 'runId' = :'r1'),
          'a retry waits since its attempt''s not_before, not since the run''s creation an hour ago');

SELECT is(:'w3'::jsonb -> 'capabilitiesCapped', 'false'::jsonb, 'two capability sets: all evaluated');
-- 50 more sessions, each with its own capabilities: 52 distinct sets, only 50 evaluated.
SELECT count(*) AS opened FROM (
    SELECT ql_test.new_worker('cap' || g), ql_test.open_session('cap' || g,
               ql_test.capabilities(1, jsonb_build_object('host', 'h' || g)::text))
      FROM generate_series(1, 50) g) x \gset
SELECT is(ql.waiting_runs() -> 'capabilitiesCapped', 'true'::jsonb,
          'more than 50 distinct capability sets live: capabilitiesCapped');

SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.waiting_runs(p_limit => 0)'), 'QL006 limit', 'limit 0 -> QL006 limit');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.waiting_runs()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
