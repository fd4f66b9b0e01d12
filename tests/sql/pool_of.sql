-- ql_private.pool_of: P/N resolved to its pool; malformed or unknown refused
-- naming the field `pool`.
BEGIN;
SELECT plan(5);
\ir fixtures.psql

SELECT ql.create_pool('acme', 'gpu') ->> 'poolId' AS gpu \gset
SELECT is((ql_private.pool_of('acme/gpu')).id, :'gpu'::uuid, 'acme/gpu resolves to its pool');
SELECT is((ql_private.pool_of('acme/default')).name, 'default', 'the default pool resolves');
SELECT is(ql_test.error_of($$SELECT ql_private.pool_of('acme')$$), 'QL001 pool', 'no slash: QL001 naming pool');
SELECT is(ql_test.error_of($$SELECT ql_private.pool_of('acme/GPU')$$), 'QL001 pool', 'bad pool name: QL001 naming pool');
SELECT is(ql_test.error_of($$SELECT ql_private.pool_of('acme/cpu')$$), 'QL004 pool', 'unknown pool: QL004 naming pool');

SELECT * FROM finish();
ROLLBACK;
