-- QingLong bootstrap: cluster-level roles and database grants.
--
-- Not a migration: it is idempotent and re-run by `qinglong db migrate` as the
-- migrating session user (who needs CREATEROLE or superuser the first time)
-- before the migrator switches to `SET LOCAL ROLE ql_owner`. Roles are
-- cluster-global, so several databases in one cluster share them; duplicate
-- creation races between concurrent migrates of different databases are
-- tolerated.
DO $bootstrap$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM (VALUES
        ('ql_owner'), ('ql_runtime'), ('ql_worker_ingress'), ('ql_readonly')
    ) AS t(name)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r.name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r.name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- a concurrent migrate of another database created it
            END;
        END IF;
    END LOOP;
    -- A non-superuser migrator acts as ql_owner through membership.
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
       AND NOT pg_catalog.pg_has_role(current_user, 'ql_owner', 'MEMBER') THEN
        EXECUTE format('GRANT ql_owner TO %I', current_user);
    END IF;
    EXECUTE format('GRANT CONNECT, CREATE, TEMPORARY ON DATABASE %I TO ql_owner',
                   current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ql_runtime, ql_worker_ingress, ql_readonly',
                   current_database());
END
$bootstrap$;
