-- ql.cancel_run as ql_runtime: queued and dispatching runs are cancelled at once
-- (attempt cancelled, unstarted lease released, run.cancelled); started runs get
-- cancel_requested + run.cancel_requested; repeats and terminal runs write nothing.
BEGIN;
SELECT plan(22);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.open_session('w1') ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT r[1] AS queued, r[2] AS dispatching, r[3] AS started, r[4] AS done
  FROM ql_test.enqueue(:'task', 4) r \gset
SELECT ql_test.fake_lease(:'dispatching', :'s1', false) AS offer_d \gset
SELECT ql_test.fake_lease(:'started', :'s1', true) AS offer_s \gset
UPDATE ql_private.runs SET state = 'succeeded', finished_at = clock_timestamp() WHERE id = :'done'::uuid;

SET LOCAL ROLE ql_runtime;
SELECT ql.cancel_run(:'queued') AS cq \gset
SELECT ql.cancel_run(:'dispatching') AS cd \gset
SELECT ql.cancel_run(:'started') AS cs \gset
RESET ROLE;

SELECT is(:'cq'::jsonb, jsonb_build_object('runId', :'queued', 'state', 'cancelled', 'cancelRequested', true),
          'queued run -> cancelled');
SELECT results_eq(
    format($$SELECT r.state, r.finished_at IS NOT NULL, a.state, a.finished_at IS NOT NULL
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
              WHERE r.id = %L$$, :'queued'),
    $$VALUES ('cancelled'::text, true, 'cancelled'::text, true)$$, 'run and attempt cancelled, finished');
SELECT is((SELECT array_agg(type ORDER BY id) FROM ql_private.events WHERE run_id = :'queued'::uuid),
          ARRAY['run.queued', 'run.cancelled'], 'one run.cancelled event');

SELECT is(:'cd'::jsonb ->> 'state', 'cancelled', 'dispatching run with an unstarted lease -> cancelled');
SELECT results_eq(
    format($$SELECT release_reason, released_at IS NOT NULL FROM ql_private.run_leases WHERE offer_id = %L$$, :'offer_d'),
    $$VALUES ('cancelled'::text, true)$$, 'its unstarted lease released with reason cancelled');
SELECT is((SELECT count(*) FROM ql_private.events WHERE run_id = :'dispatching'::uuid AND type = 'run.cancelled'),
          1::bigint, 'one run.cancelled event');
SELECT is((SELECT payload FROM ql_private.events WHERE run_id = :'dispatching'::uuid AND type = 'run.cancelled'),
          jsonb_build_object('attemptId', (SELECT current_attempt_id FROM ql_private.runs WHERE id = :'dispatching'::uuid),
                             'offerId', :'offer_d', 'leaseReleased', true, 'actor', session_user),
          'event payload: attempt, offer, released, the acting login role (no token or digest)');

SELECT is(:'cs'::jsonb, jsonb_build_object('runId', :'started', 'state', 'starting', 'cancelRequested', true),
          'started run -> cancel requested, state unchanged');
SELECT results_eq(
    format($$SELECT r.cancel_requested, a.state, l.released_at IS NULL
               FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id
               JOIN ql_private.run_leases l ON l.attempt_id = a.id
              WHERE r.id = %L$$, :'started'),
    $$VALUES (true, 'starting'::text, true)$$, 'attempt keeps running and its lease stays live');
SELECT is((SELECT array_agg(type ORDER BY id) FROM ql_private.events WHERE run_id = :'started'::uuid),
          ARRAY['run.queued', 'run.cancel_requested'], 'one run.cancel_requested event');

-- Repeats and terminal runs: same answer, nothing written.
SELECT ql_test.mark();
SET LOCAL ROLE ql_runtime;
SELECT is(ql.cancel_run(:'queued'), :'cq'::jsonb, 'cancelling a cancelled run returns it unchanged');
SELECT is(ql.cancel_run(:'started'), :'cs'::jsonb, 'cancelling again returns the same result');
SELECT is(ql.cancel_run(:'done'), jsonb_build_object('runId', :'done', 'state', 'succeeded', 'cancelRequested', false),
          'a succeeded run is left as it is');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'repeat and terminal cancels wrote nothing');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type LIKE 'run.cancel%'), 3::bigint,
          'no second cancel event');

-- A queued run whose cancel was already requested (e.g. re-queued after loss) is still cancelled.
SELECT ql_test.enqueue(:'task', 1) AS requeued \gset
UPDATE ql_private.runs SET cancel_requested = true WHERE id = (:'requeued'::text[])[1]::uuid;
SET LOCAL ROLE ql_runtime;
SELECT is(ql.cancel_run((:'requeued'::text[])[1]) ->> 'state', 'cancelled',
          'queued with cancel_requested -> cancelled');
RESET ROLE;

SELECT is((SELECT count(*) FROM ql_private.runs WHERE state IN ('queued', 'dispatching') AND NOT cancel_requested),
          0::bigint, 'no cancelled run remains a candidate');

SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format('SELECT ql.cancel_run(%L)', gen_random_uuid()), 'QL004', NULL, 'unknown run -> QL004');
SELECT throws_ok($$SELECT ql.cancel_run('x')$$, 'QL001', NULL, 'malformed run id -> QL001');
SELECT throws_ok($$SELECT ql.cancel_run(NULL)$$, 'QL001', NULL, 'NULL run id -> QL001');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format('SELECT ql.cancel_run(%L)', :'queued'), '42501', NULL,
                 'the ingress role cannot cancel');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.run_leases WHERE released_at IS NULL), 1::bigint,
          'only the started run''s lease is still live');

SELECT * FROM finish();
ROLLBACK;
