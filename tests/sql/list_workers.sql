-- ql.list_workers (SPEC §9.4): workers in id order with their credentials (id
-- and state only), disabled flag and active session (labels, slots, live
-- leases, last seen); keyset pages; never a secret or digest; ql_readonly and
-- ql_runtime read, the ingress cannot.
BEGIN;
SELECT plan(15);
\ir fixtures.psql

SELECT worker_id AS w1, credential_id AS c1 FROM ql_test.new_worker('w1') \gset
SELECT worker_id AS w2, credential_id AS c2 FROM ql_test.new_worker('w2') \gset
SELECT ql.revoke_credential(:'c2') IS NOT NULL AS revoked \gset
SELECT ql_test.open_session('w1', ql_test.capabilities(3, '{"region":"eu-1"}')) ->> 'sessionId' AS s1 \gset
SELECT ql_test.publish('proj', 'task') ->> 'taskId' AS task \gset
SELECT r[1] AS run FROM ql_test.enqueue(:'task', 1) r \gset
SELECT ql_test.fake_lease(:'run', :'s1', false) AS offer \gset
UPDATE ql_private.workers SET disabled_at = clock_timestamp() WHERE id = :'w2'::uuid;
-- w2: explicit grants only (the fixtures grant every pool).
UPDATE ql_private.workers SET all_pools = false WHERE id = :'w2'::uuid;
SELECT ql.create_pool('proj', 'gpu') IS NOT NULL AS pooled \gset
SELECT ql.create_pool('bank', 'eu') IS NOT NULL AS pooled \gset
SELECT ql.grant_pool(:'w2', 'proj/gpu') IS NOT NULL AS granted \gset
SELECT ql.grant_pool(:'w2', 'bank/eu') IS NOT NULL AS granted \gset
SELECT ql.label_worker(:'w2', '{"tenant":"bank"}', p_self_labels => false) IS NOT NULL AS labelled \gset

CREATE FUNCTION pg_temp.worker(page jsonb, id text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT e FROM jsonb_array_elements(page -> 'workers') e WHERE e ->> 'workerId' = id
$$;
GRANT EXECUTE ON FUNCTION pg_temp.worker(jsonb, text) TO ql_readonly;

SELECT max(id::text) AS last_worker FROM ql_private.workers \gset
SELECT ql_test.mark();
SET LOCAL ROLE ql_readonly;
SELECT ql.list_workers() AS page \gset
RESET ROLE;
SELECT is((SELECT array_agg(e ->> 'workerId') FROM jsonb_array_elements(:'page'::jsonb -> 'workers') e),
          (SELECT array_agg(id::text ORDER BY id) FROM ql_private.workers), 'every worker, in id order');
SELECT is(:'page'::jsonb -> 'next', 'null'::jsonb, 'one page: next null');
SELECT is(pg_temp.worker(:'page', :'w1') - 'session',
          jsonb_build_object('workerId', :'w1', 'name', 'w1', 'disabled', false,
                             'allPools', true, 'pools', '[]'::jsonb, 'poolsCapped', false,
                             'selfLabels', true, 'grantedLabels', '{}'::jsonb,
                             'credentials', jsonb_build_array(jsonb_build_object('credentialId', :'c1', 'state', 'active'))),
          'w1: name, enabled, every pool, self-labels, no label granted, its active credential');
SELECT is((pg_temp.worker(:'page', :'w1') -> 'session') - 'lastSeenAtMs',
          jsonb_build_object('sessionId', :'s1', 'generation', 1, 'state', 'active',
                             'labels', '{"region": "eu-1"}'::jsonb, 'slots', 3, 'liveLeases', 1),
          'w1: its active session with labels, slots and live leases');
SELECT ok((pg_temp.worker(:'page', :'w1') #>> '{session,lastSeenAtMs}')::bigint > 0, 'lastSeenAtMs');
SELECT is(pg_temp.worker(:'page', :'w2'),
          jsonb_build_object('workerId', :'w2', 'name', 'w2', 'disabled', true,
                             'allPools', false, 'pools', '["bank/eu", "proj/gpu"]'::jsonb, 'poolsCapped', false,
                             'selfLabels', false, 'grantedLabels', '{"tenant": "bank"}'::jsonb,
                             'credentials', jsonb_build_array(jsonb_build_object('credentialId', :'c2', 'state', 'revoked')),
                             'session', NULL),
          'w2: disabled, its granted pools (P/N, sorted), granted labels only, revoked credential, no session');
SELECT ok(:'page'::text !~* 'secret|digest|token', 'no secret, digest or token anywhere');
SET LOCAL ROLE ql_runtime;
SELECT ql.list_workers(p_limit => 1) AS p1 \gset
SELECT is(jsonb_array_length(:'p1'::jsonb -> 'workers'), 1, 'limit 1: one worker');
SELECT is(ql.list_workers(p_limit => 1, p_after => :'p1'::jsonb ->> 'next') #>> '{workers,0,workerId}',
          :'last_worker', 'next continues with the following worker');
RESET ROLE;
-- More than 100 explicit grants: the first 100 listed, poolsCapped.
SELECT count(*) AS made FROM (SELECT ql.create_pool('many', 'p' || lpad(i::text, 3, '0'))
                                FROM generate_series(1, 101) i) x \gset
INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id)
SELECT :'w2'::uuid, pl.id FROM ql_private.pools pl JOIN ql_private.projects pr ON pr.id = pl.project_id
 WHERE pr.name = 'many' AND pl.name <> 'default';
SET LOCAL ROLE ql_runtime;
SELECT is((SELECT jsonb_build_array(jsonb_array_length(w -> 'pools'), w -> 'poolsCapped')
             FROM pg_temp.worker(ql.list_workers(), :'w2') w),
          '[100, true]'::jsonb, '103 grants: 100 listed, poolsCapped');
SELECT is(ql_test.error_of('SELECT ql.list_workers(p_limit => 0)'), 'QL006 limit', 'limit 0 -> QL006 limit');
SELECT is(ql_test.error_of($$SELECT ql.list_workers(p_after => 'x')$$), 'QL001 after', 'malformed cursor -> QL001 after');
RESET ROLE;
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok('SELECT ql.list_workers()', '42501', NULL, 'the ingress cannot read it');
RESET ROLE;

-- A draining session (operator drain) is listed, with what it still runs.
UPDATE ql_private.run_leases SET started_at = clock_timestamp() WHERE offer_id = :'offer'::uuid;
SET LOCAL ROLE ql_runtime;
SELECT ql.end_session(:'s1', true) ->> 'state' AS drained \gset
SELECT is((pg_temp.worker(ql.list_workers(), :'w1') -> 'session') - 'lastSeenAtMs' - 'labels' - 'slots',
          jsonb_build_object('sessionId', :'s1', 'generation', 1, 'state', 'draining', 'liveLeases', 1),
          'w1: its draining session, still running one lease');
SELECT ql.end_session(:'s1') IS NOT NULL AS closed \gset
SELECT is(pg_temp.worker(ql.list_workers(), :'w1') -> 'session', 'null'::jsonb, 'closed: no session');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
