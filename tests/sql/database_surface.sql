-- The database surface as db/bootstrap.sql leaves it (SPEC §3.4), pinned from the
-- catalog. Test databases are copies of a migrated template and CREATE DATABASE
-- does not copy a database ACL, so this file applies the bootstrap itself, inside
-- its own transaction (rolled back). The same after a real `migrate`, and the
-- refused connection of an unrelated login: tests/py/test_database_surface.py.
BEGIN;
SELECT plan(4);

\ir ../../db/bootstrap.sql
RESET search_path;  -- the bootstrap pins it for its transaction; pgTAP lives in public

SELECT is((SELECT array_agg(a.privilege_type::text ORDER BY a.privilege_type)
             FROM pg_catalog.pg_database d
            CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a
            WHERE d.datname = pg_catalog.current_database() AND a.grantee = 0),
          NULL, 'PUBLIC holds nothing on the database (no CONNECT, no TEMPORARY)');
SELECT is((SELECT array_agg(r ORDER BY r)
             FROM unnest(ARRAY['ql_owner', 'ql_runtime', 'ql_worker_ingress', 'ql_readonly']) r
            WHERE NOT has_database_privilege(r, pg_catalog.current_database(), 'CONNECT')),
          NULL, 'every project role may connect');
SELECT is((SELECT array_agg(r ORDER BY r)
             FROM unnest(ARRAY['ql_runtime', 'ql_worker_ingress', 'ql_readonly']) r
            WHERE has_database_privilege(r, pg_catalog.current_database(), 'TEMPORARY')
               OR has_database_privilege(r, pg_catalog.current_database(), 'CREATE')),
          NULL, 'the API roles create nothing in the database, temporary objects included');
SELECT ok(has_database_privilege('ql_owner', pg_catalog.current_database(), 'CREATE'),
          'ql_owner creates (migrations)');

SELECT * FROM finish();
ROLLBACK;
