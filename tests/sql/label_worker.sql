-- ql.label_worker (SPEC §13.2 granted labels): a new worker has no self-labels;
-- grant, re-grant with a new value, remove; one worker.labels_changed event
-- naming keys (never values) and the actor; idempotent; every bad input
-- refused with its SQLSTATE and field, nothing written; a change that leaves an
-- active session's declared labels not all granted drains that session (its
-- unstarted lease released, its started one runs on), a change that keeps them
-- granted leaves it alone; switching self-labels off drains too; roles.
BEGIN;
SELECT plan(36);
\ir fixtures.psql

CREATE FUNCTION pg_temp.self_labels(p_worker text) RETURNS boolean LANGUAGE sql AS $$
    SELECT w.self_labels FROM ql_private.workers w WHERE w.id = p_worker::uuid
$$;
CREATE FUNCTION pg_temp.state(p_session text) RETURNS text LANGUAGE sql AS $$
    SELECT ws.state FROM ql_private.worker_sessions ws WHERE ws.session_id = p_session::uuid
$$;

SET LOCAL ROLE ql_runtime;
SELECT ql.register_worker('fresh') ->> 'workerId' AS fresh \gset
RESET ROLE;
SELECT is(pg_temp.self_labels(:'fresh'), false, 'a worker registered now accepts only granted labels');

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w1', '{"tenant":"bank","zone":"z1"}', p_self_labels => false),
          jsonb_build_object('workerId', :'w1', 'labels', '{"tenant":"bank","zone":"z1"}'::jsonb,
                             'selfLabels', false, 'sessionsDraining', 0, 'leasesReleased', 0),
          'grant two labels, self-labels off: {workerId, labels, selfLabels, sessionsDraining, leasesReleased}');
RESET ROLE;
SELECT is((SELECT array_agg(key || '=' || value ORDER BY key) FROM ql_private.worker_labels
            WHERE worker_id = :'w1'::uuid), ARRAY['tenant=bank', 'zone=z1'], 'stored in worker_labels');
SELECT is(pg_temp.self_labels(:'w1'), false, 'self_labels off');
SELECT is((SELECT payload FROM ql_private.events WHERE type = 'worker.labels_changed'),
          jsonb_build_object('workerId', :'w1', 'granted', '["tenant","zone"]'::jsonb,
                             'removed', '[]'::jsonb, 'selfLabels', false, 'sessionsDraining', 0,
                             'leasesReleased', 0, 'actor', session_user),
          'one worker.labels_changed event: keys only, the actor');
SELECT is((SELECT worker_id::text FROM ql_private.events WHERE type = 'worker.labels_changed'), :'w1',
          'the event names the worker');

SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w1', '{"tenant":"bank"}', '{}', false) -> 'labels',
          '{"tenant":"bank","zone":"z1"}'::jsonb, 'the same grant again: same labels');
SELECT is(ql.label_worker(:'w1') -> 'labels', '{"tenant":"bank","zone":"z1"}'::jsonb,
          'no change at all: prints the grants');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, '... and writes nothing (idempotent, no event)');

SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w1', '{"zone":"z2"}') -> 'labels', '{"tenant":"bank","zone":"z2"}'::jsonb,
          'a new value replaces the old one');
SELECT is(ql.label_worker(:'w1', p_remove => '{zone,absent}') -> 'labels', '{"tenant":"bank"}'::jsonb,
          'remove takes the grant away (a key not granted is ignored)');
RESET ROLE;
SELECT is((SELECT payload -> 'removed' FROM ql_private.events WHERE type = 'worker.labels_changed'
            ORDER BY id DESC LIMIT 1), '["zone"]'::jsonb, 'the event names the removed key');

-- Bad input: nothing written.
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '["a"]')$$, :'w1')), 'QL001 labels', 'labels not an object -> QL001 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{"Tenant":"bank"}')$$, :'w1')), 'QL001 labels', 'upper-case key -> QL001 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{" tenant":"bank"}')$$, :'w1')), 'QL001 labels', 'key with a space -> QL001 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{"tenant":""}')$$, :'w1')), 'QL001 labels', 'empty value -> QL001 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{"tenant":7}')$$, :'w1')), 'QL001 labels', 'value not a string -> QL001 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{"tenant":"a\u0007b"}')$$, :'w1')), 'QL001 labels', 'control character -> QL001 labels');
SELECT is(ql_test.error_of(format('SELECT ql.label_worker(%L, %L::jsonb)', :'w1',
                                  jsonb_build_object('tenant', repeat('x', 129)))), 'QL002 labels', '129 characters -> QL002 labels');
SELECT is(ql_test.error_of(format('SELECT ql.label_worker(%L, %L::jsonb)', :'w1',
                                  (SELECT jsonb_object_agg('k' || i, 'v') FROM generate_series(1, 32) i))),
          'QL002 labels', '33 labels granted in all -> QL002 labels');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, p_remove => '{Zone}')$$, :'w1')), 'QL001 remove', 'bad key to remove -> QL001 remove');
SELECT is(ql_test.error_of(format($$SELECT ql.label_worker(%L, '{"zone":"z1"}', '{zone}')$$, :'w1')), 'QL001 remove', 'granted and removed at once -> QL001 remove');
SELECT is(ql_test.error_of(format('SELECT ql.label_worker(%L)', gen_random_uuid())), 'QL004 workerId', 'unknown worker -> QL004 workerId');
SELECT is(ql_test.error_of($$SELECT ql.label_worker('W1')$$), 'QL001 workerId', 'malformed worker id -> QL001 workerId');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused calls wrote nothing');

-- Changes while a session is open.
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS r1, r[2] AS r2 FROM ql_test.enqueue(:'task', 2, 0) r \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(4, '{"tenant":"bank"}')) ->> 'sessionId' AS s1 \gset
SELECT ql_test.fake_lease(:'r1', :'s1', false) AS unstarted \gset
SELECT ql_test.fake_lease(:'r2', :'s1', true) AS started \gset
SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w1', '{"gpu":"yes"}') -> 'sessionsDraining', '0'::jsonb,
          'a grant that keeps the declared labels granted: no session drains');
RESET ROLE;
SELECT is(pg_temp.state(:'s1'), 'active', '... the session stays active');
SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w1', '{"tenant":"Bank"}') - 'labels',
          jsonb_build_object('workerId', :'w1', 'selfLabels', false, 'sessionsDraining', 1, 'leasesReleased', 1),
          'changing the value of a declared label drains the session, releasing its unstarted lease');
RESET ROLE;
SELECT is(pg_temp.state(:'s1'), 'draining', '... the session drains (its started lease runs on)');
SELECT is((ql_test.lease(:'unstarted')).release_reason, 'session_closed', '... the unstarted lease released');
SELECT is((ql_test.lease(:'started')).released_at, NULL, '... the started lease still live');

SELECT worker_id AS w2 FROM ql_test.new_worker('w2') \gset
SELECT ql_test.open_session('w2', ql_test.capabilities(4, '{"zone":"any"}')) ->> 'sessionId' AS s2 \gset
SET LOCAL ROLE ql_runtime;
SELECT is(ql.label_worker(:'w2', p_self_labels => true) ->> 'sessionsDraining', '0',
          'self-labels on (already on): nothing drains');
SELECT is(ql.label_worker(:'w2', p_self_labels => false) ->> 'sessionsDraining', '1',
          'self-labels off with ungranted declared labels: the session drains');
RESET ROLE;
SELECT is(pg_temp.state(:'s2'), 'closed', '... and, running nothing, closes at once');

SET LOCAL ROLE ql_readonly;
SELECT throws_ok(format('SELECT ql.label_worker(%L)', :'w1'), '42501', NULL, 'ql_readonly cannot label');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.label_worker(%L)', :'w1'), '42501', NULL, 'the ingress cannot label');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
