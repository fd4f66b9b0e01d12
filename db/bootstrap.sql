-- QingLong bootstrap: cluster-level roles and database grants.
--
-- Not a migration: it is idempotent and re-run by `qinglong db migrate` as the
-- migrating session user (who needs CREATEROLE or superuser the first time)
-- before the migrator switches to `SET LOCAL ROLE ql_owner`. Roles are
-- cluster-global, so several databases in one cluster share them; duplicate
-- creation races between concurrent migrates of different databases are
-- tolerated.
--
-- The database surface: PUBLIC keeps CONNECT and TEMPORARY on a new database,
-- and LISTEN/NOTIFY need no privilege beyond CONNECT, so any login of the
-- cluster could watch the `ql_dispatch` channel (revocations, session changes)
-- or flood it. The bootstrap therefore revokes CONNECT and TEMPORARY from
-- PUBLIC and grants CONNECT to the project's roles only (logins act through
-- membership: the ingress login is IN ROLE ql_worker_ingress, the sweeper's
-- login IN ROLE ql_sweeper, the producer API's IN ROLE ql_producer, and so on).
-- Superusers connect regardless. Database ACLs are not copied by CREATE
-- DATABASE ... TEMPLATE, which is why this runs on every migrate, not once in
-- a migration.
--
-- search_path is pinned (transaction-local) before anything runs, and every
-- catalog object and function below is pg_catalog-qualified, so no object a
-- session user can create shadows what this block calls.
SET LOCAL search_path = pg_catalog, pg_temp;
DO $bootstrap$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM (VALUES
        ('ql_owner'), ('ql_runtime'), ('ql_worker_ingress'), ('ql_readonly'), ('ql_sweeper'),
        ('ql_producer')
    ) AS t(name)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r.name) THEN
            BEGIN
                EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r.name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- a concurrent migrate of another database created it
            END;
        END IF;
    END LOOP;
    -- A non-superuser migrator acts as ql_owner through membership.
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER)
       AND NOT pg_catalog.pg_has_role(CURRENT_USER, 'ql_owner', 'MEMBER') THEN
        EXECUTE pg_catalog.format('GRANT ql_owner TO %I', CURRENT_USER);
    END IF;
    EXECUTE pg_catalog.format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC',
                              pg_catalog.current_database());
    EXECUTE pg_catalog.format('GRANT CONNECT, CREATE, TEMPORARY ON DATABASE %I TO ql_owner',
                              pg_catalog.current_database());
    EXECUTE pg_catalog.format(
        'GRANT CONNECT ON DATABASE %I TO ql_runtime, ql_worker_ingress, ql_readonly, ql_sweeper, '
        'ql_producer',
        pg_catalog.current_database());
END
$bootstrap$;
