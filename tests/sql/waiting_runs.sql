-- ql.waiting_runs (SPEC §10): the oldest waiting runs with a placement verdict
-- against the live sessions, by the claim path's own evaluation
-- (matching_classes agrees); offered, scheduled and cancel-requested runs
-- left out; ql_readonly reads, the ingress cannot.
BEGIN;
SELECT plan(11);
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

SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of('SELECT ql.waiting_runs(p_limit => 0)'), 'QL006 limit', 'limit 0 -> QL006 limit');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.waiting_runs()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
