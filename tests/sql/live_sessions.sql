-- ql.live_sessions (SPEC §10): open (active or draining, marked) sessions by worker name with
-- capabilities, slot use (started or unexpired offered leases) and last seen;
-- closed sessions absent; filtered by worker ids; never a secret, digest or token; ql_readonly reads,
-- the ingress cannot.
BEGIN;
SELECT plan(11);
\ir fixtures.psql

SELECT worker_id AS wa FROM ql_test.new_worker('wa') \gset
SELECT worker_id AS wb FROM ql_test.new_worker('wb') \gset
SELECT worker_id AS wc FROM ql_test.new_worker('wc') \gset
SELECT ql_test.open_session('wb', ql_test.capabilities(4, '{"gpu":"yes"}', '{"python":"3.11.4"}')) ->> 'sessionId' AS sb \gset
SELECT ql_test.open_session('wa', ql_test.capabilities(2)) ->> 'sessionId' AS sa \gset
SELECT ql_test.open_session('wc') ->> 'sessionId' AS sc \gset
UPDATE ql_private.worker_sessions SET state = 'closed', closed_at = clock_timestamp() WHERE session_id = :'sc'::uuid;
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2, r[3] AS r3 FROM ql_test.enqueue(:'task', 3) r \gset
SELECT ql_test.fake_lease(:'r1', :'sb', true) AS o1 \gset
SELECT ql_test.fake_lease(:'r2', :'sb', false) AS o2 \gset
SELECT ql_test.fake_lease(:'r3', :'sb', false) AS o3 \gset
-- An offer past its expiry no longer holds a slot.
SELECT ql_test.expire_lease(:'o3');
UPDATE ql_private.workers SET disabled_at = clock_timestamp() WHERE id = :'wa'::uuid;

SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.live_sessions() AS page \gset
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'a read writes nothing');
SELECT is((SELECT array_agg(e ->> 'worker') FROM jsonb_array_elements(:'page'::jsonb -> 'sessions') e),
          ARRAY['wa', 'wb'], 'active sessions by worker name; the closed one absent');
SELECT is((:'page'::jsonb -> 'sessions' -> 1) - 'lastSeenAtMs' - 'expiresAtMs',
          jsonb_build_object('workerId', :'wb', 'worker', 'wb', 'disabled', false, 'sessionId', :'sb',
                             'generation', 1, 'executors', '["remote-worker"]'::jsonb,
                             'labels', '{"gpu": "yes"}'::jsonb, 'runtimes', '{"python": "3.11.4"}'::jsonb,
                             'slots', 4, 'draining', false, 'slotsUsed', 2, 'slotsFree', 2,
                             'expired', false),
          'wb: capabilities, 2 of 4 slots used (started + live offer; the expired offer frees its slot)');
SELECT is(:'page'::jsonb #> '{sessions,0,disabled}', 'true'::jsonb, 'wa: its worker is disabled');
SELECT ok(:'page'::text !~* 'secret|digest|token', 'no secret, digest or token anywhere');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.live_sessions(p_limit => 1) -> 'truncated', 'true'::jsonb, 'limit 1 of 2: truncated');
SELECT is(ql_test.error_of('SELECT ql.live_sessions(p_limit => 0)'), 'QL006 limit', 'limit 0 -> QL006 limit');
SELECT is((SELECT array_agg(e ->> 'worker') FROM jsonb_array_elements(
              ql.live_sessions(p_worker_ids => ARRAY[:'wb', :'wc']) -> 'sessions') e),
          ARRAY['wb'], 'p_worker_ids: only those workers'' active sessions');
SELECT is(ql_test.error_of($$SELECT ql.live_sessions(p_worker_ids => ARRAY['nope'])$$),
          'QL001 workerIds', 'malformed worker id -> QL001 workerIds');
RESET ROLE;
-- A draining session takes no new run but still holds its leases: listed, marked.
SELECT worker_id AS wd FROM ql_test.new_worker('wd') \gset
SELECT ql_test.open_session('wd') ->> 'sessionId' AS sd \gset
UPDATE ql_private.worker_sessions SET state = 'draining' WHERE session_id = :'sd'::uuid;
SET LOCAL ROLE ql_readonly;
SELECT is((SELECT jsonb_object_agg(e ->> 'worker', e -> 'draining')
             FROM jsonb_array_elements(ql.live_sessions() -> 'sessions') e),
          '{"wa": false, "wb": false, "wd": true}'::jsonb, 'a draining session is listed, marked draining');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.live_sessions()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
