-- ql.register_worker as ql_runtime: a new worker per call; bad names -> QL001.
BEGIN;
SELECT plan(7);
\ir fixtures.psql

SET LOCAL ROLE ql_runtime;
SELECT ql.register_worker('edge-router.01') AS r1 \gset
SELECT ql.register_worker('edge-router.01') AS r2 \gset
SELECT throws_ok($$SELECT ql.register_worker('-leading-dash')$$, 'QL001', NULL, 'bad first character -> QL001');
SELECT throws_ok($$SELECT ql.register_worker('has space')$$, 'QL001', NULL, 'space -> QL001');
SELECT throws_ok($$SELECT ql.register_worker(NULL)$$, 'QL001', NULL, 'NULL -> QL001');
SELECT throws_ok(format('SELECT ql.register_worker(%L)', repeat('a', 129)), 'QL001', NULL, '129 chars -> QL001');
RESET ROLE;

SELECT is((SELECT array_agg(k) FROM jsonb_object_keys(:'r1'::jsonb) k), ARRAY['workerId'], 'returns {workerId}');
SELECT is((SELECT name FROM ql_private.workers WHERE id = (:'r1'::jsonb ->> 'workerId')::uuid),
          'edge-router.01', 'worker stored with its name');
SELECT isnt(:'r1'::jsonb ->> 'workerId', :'r2'::jsonb ->> 'workerId',
            'names are labels: the same name twice is two workers');

SELECT * FROM finish();
ROLLBACK;
