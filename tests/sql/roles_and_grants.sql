-- R-ROLE, proven from the catalog (SPEC §3, §3.4). Every assertion is a set
-- comparison over pg_proc/pg_class/pg_roles, so a new function or table that
-- forgets its REVOKE/GRANT, its pinned search_path or its classification below
-- fails here, with the offending names in the diagnostics.
--
-- Classification of the API (schema ql). A new ql function must be added to
-- exactly one list; names listed but not yet created are simply not expected.
--   worker-facing -> EXECUTE for ql_worker_ingress only
--   control plane -> EXECUTE for ql_runtime only (the ingress can reach none):
--                    the control-plane commands and the operator actions (SPEC §9)
--   reads         -> EXECUTE for ql_readonly AND ql_runtime, nobody else: the
--                    status snapshot and the inspection reads of SPEC §9
--                    (settings, run list/show, worker list)
--   sweep         -> EXECUTE for ql_sweeper AND ql_runtime, nobody else: what
--                    `qinglong runtime sweep` calls (lease sweep + promotion of
--                    due runs, the three prunes; SPEC §13.6). ql_sweeper
--                    executes these and nothing else (below, from the catalog).
--   producer      -> EXECUTE for ql_producer only: the producer API's calls
--                    (SPEC §13.4), each checking a project token's scope and
--                    project in SQL. ql_producer executes these and nothing
--                    else (below, from the catalog).
-- Decision: ql_runtime cannot execute worker-facing functions either; the
-- control plane never acts as a worker.
BEGIN;
SELECT plan(42);

CREATE TEMP TABLE api_class (name text PRIMARY KEY, role text NOT NULL) ON COMMIT DROP;
INSERT INTO api_class VALUES
    ('authenticate_worker', 'ql_worker_ingress'),
    ('record_auth_denial',  'ql_worker_ingress'),
    ('open_session',        'ql_worker_ingress'),
    ('heartbeat_session',   'ql_worker_ingress'),
    ('close_session',       'ql_worker_ingress'),
    ('pull_offer',          'ql_worker_ingress'),
    ('pull_offers',         'ql_worker_ingress'),
    ('ack_lease',           'ql_worker_ingress'),
    ('heartbeat_lease',     'ql_worker_ingress'),
    ('complete_lease',      'ql_worker_ingress'),
    ('append_log',          'ql_worker_ingress'),
    ('lease_secrets',       'ql_worker_ingress'),
    ('heartbeat_sessions',  'ql_worker_ingress'),
    ('idle_probe',          'ql_worker_ingress'),
    ('confirm_credentials', 'ql_worker_ingress'),
    ('revoked_certificates', 'ql_worker_ingress'),
    ('rotate_credential',   'ql_worker_ingress'),
    ('expiring_counts',     'ql_worker_ingress'),
    ('register_worker',     'ql_runtime'),
    ('issue_credential',    'ql_runtime'),
    ('revoke_credential',   'ql_runtime'),
    ('revoke_certificate',  'ql_runtime'),
    ('record_certificate',  'ql_runtime'),
    ('label_worker',        'ql_runtime'),
    ('publish_revision',    'ql_runtime'),
    ('prepare_task',        'ql_runtime'),
    ('enqueue_runs',        'ql_runtime'),
    ('cancel_run',          'ql_runtime'),
    ('sweep',               'ql_runtime'),
    ('sweep_leases',        'sweep'),
    ('configure_task',      'ql_runtime'),
    ('retry_run',           'ql_runtime'),
    ('cancel_runs',         'ql_runtime'),
    ('disable_worker',      'ql_runtime'),
    ('enable_worker',       'ql_runtime'),
    ('end_session',         'ql_runtime'),
    ('create_pool',         'ql_runtime'),
    ('grant_pool',          'ql_runtime'),
    ('revoke_pool',         'ql_runtime'),
    ('prune_runs',          'sweep'),
    ('prune_audit',         'sweep'),
    ('prune_fleet',         'sweep'),
    ('status_snapshot',     'read'),
    ('task_settings',       'read'),
    ('list_runs',           'read'),
    ('show_run',            'read'),
    ('run_log',             'read'),
    ('list_workers',        'read'),
    ('run_state_counts',    'read'),
    ('queue_depth',         'read'),
    ('throughput',          'read'),
    ('waiting_runs',        'read'),
    ('live_sessions',       'read'),
    ('recent_denials',      'read'),
    ('expiring_identities', 'read'),
    ('create_project_token', 'ql_runtime'),
    ('revoke_project_token', 'ql_runtime'),
    ('list_project_tokens',  'ql_runtime'),
    ('project_data_key',     'ql_runtime'),
    ('set_secret',           'ql_runtime'),
    ('list_secrets',         'ql_runtime'),
    ('delete_secret',        'ql_runtime'),
    ('list_data_keys',       'ql_runtime'),
    ('rewrap_data_keys',     'ql_runtime'),
    ('producer_enqueue',     'producer'),
    ('producer_show_run',    'producer'),
    ('producer_list_runs',   'producer'),
    ('producer_cancel_run',  'producer'),
    ('producer_retry_run',   'producer'),
    ('producer_run_log',     'producer');

CREATE TEMP VIEW api_fn AS
    SELECT p.oid, p.proname::text AS name, p.oid::regprocedure::text AS signature
      FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'ql'::regnamespace;
CREATE TEMP VIEW project_fn AS
    SELECT p.oid, n.nspname::text AS schema, p.oid::regprocedure::text AS signature,
           p.prosecdef, p.proconfig, p.proowner
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname IN ('ql', 'ql_private');
-- Tables, views, sequences etc. of every non-system schema. Excluded: temp
-- schemas (pgTAP's bookkeeping tables) and objects that belong to an extension
-- (pgTAP's own views, granted to PUBLIC, exist only in test databases).
CREATE TEMP VIEW user_rel AS
    SELECT c.oid, n.nspname::text AS schema, c.oid::regclass::text AS rel, c.relkind, c.relowner
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                        WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid
                          AND d.deptype = 'e');

-- Roles
SELECT ok((SELECT NOT rolcanlogin FROM pg_roles WHERE rolname = 'ql_owner'), 'ql_owner is NOLOGIN');
SELECT ok((SELECT NOT rolcanlogin FROM pg_roles WHERE rolname = 'ql_runtime'), 'ql_runtime is NOLOGIN');
SELECT ok((SELECT NOT rolcanlogin FROM pg_roles WHERE rolname = 'ql_worker_ingress'), 'ql_worker_ingress is NOLOGIN');
SELECT ok((SELECT NOT rolcanlogin FROM pg_roles WHERE rolname = 'ql_sweeper'), 'ql_sweeper is NOLOGIN');
SELECT ok((SELECT NOT rolcanlogin FROM pg_roles WHERE rolname = 'ql_producer'), 'ql_producer is NOLOGIN');
SELECT is((SELECT array_agg(rolname::text ORDER BY rolname) FROM pg_roles
            WHERE rolname IN ('ql_owner', 'ql_runtime', 'ql_worker_ingress', 'ql_readonly',
                              'ql_sweeper', 'ql_producer')
              AND (rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb OR rolreplication)),
          NULL, 'no project role has superuser, BYPASSRLS, CREATEROLE, CREATEDB or REPLICATION');
SELECT is((SELECT array_agg(b.rolname::text ORDER BY b.rolname)
             FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member JOIN pg_roles b ON b.oid = m.roleid
            WHERE r.rolname IN ('ql_runtime', 'ql_worker_ingress', 'ql_sweeper', 'ql_producer')), NULL,
          'the API roles inherit no other role (in particular not ql_owner)');

-- Schemas
SELECT ok(has_schema_privilege('ql_worker_ingress', 'ql', 'USAGE'), 'ingress: USAGE on ql');
SELECT ok(NOT has_schema_privilege('ql_worker_ingress', 'ql_private', 'USAGE'), 'ingress: no USAGE on ql_private');
SELECT ok(NOT has_schema_privilege('ql_runtime', 'ql_private', 'USAGE'), 'runtime: no USAGE on ql_private');
SELECT ok(has_schema_privilege('ql_sweeper', 'ql', 'USAGE')
          AND NOT has_schema_privilege('ql_sweeper', 'ql_private', 'USAGE')
          AND NOT has_schema_privilege('ql_sweeper', 'ql', 'CREATE'),
          'sweeper: USAGE on ql only (no ql_private, no CREATE)');
SELECT ok(has_schema_privilege('ql_producer', 'ql', 'USAGE')
          AND NOT has_schema_privilege('ql_producer', 'ql_private', 'USAGE')
          AND NOT has_schema_privilege('ql_producer', 'ql', 'CREATE'),
          'producer: USAGE on ql only (no ql_private, no CREATE)');
SELECT ok(NOT has_schema_privilege('ql_worker_ingress', 'ql', 'CREATE')
          AND NOT has_schema_privilege('ql_runtime', 'ql', 'CREATE')
          AND NOT has_schema_privilege('public', 'ql', 'CREATE'), 'nobody but the owner creates in ql');
SELECT is((SELECT array_agg(c.relname::text) FROM pg_class c WHERE c.relnamespace = 'ql'::regnamespace),
          NULL, 'schema ql holds no relations (only the API)');

-- Functions: ownership, definer rights, pinned search_path, no PUBLIC EXECUTE
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM project_fn
            WHERE proowner <> 'ql_owner'::regrole), NULL,
          'every ql / ql_private function is owned by ql_owner');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM project_fn
            WHERE schema = 'ql' AND NOT prosecdef), NULL,
          'every ql function is SECURITY DEFINER');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM project_fn
            WHERE prosecdef AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false)),
          NULL, 'every SECURITY DEFINER function pins search_path = pg_catalog, pg_temp');
-- The per-run worker calls pin their planning (generic plans, no sequential
-- scans, no JIT): a pooled connection keeps its plans for months, and one made
-- while the lease tables were small must not stay a sequential scan.
SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname) FROM pg_proc p
            WHERE p.pronamespace = 'ql'::regnamespace
              AND p.proconfig @> ARRAY['plan_cache_mode=force_generic_plan',
                                       'enable_seqscan=off', 'jit=off']),
          ARRAY['ack_lease', 'append_log', 'complete_lease', 'heartbeat_lease', 'heartbeat_sessions',
                'lease_secrets', 'pull_offer', 'pull_offers'],
          'the per-run worker calls pin generic plans without sequential scans or JIT');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM project_fn
            WHERE has_function_privilege('public', oid, 'EXECUTE')), NULL,
          'no ql / ql_private function is executable by PUBLIC');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM project_fn
            WHERE schema = 'ql_private'
              AND (has_function_privilege('ql_worker_ingress', oid, 'EXECUTE')
                   OR has_function_privilege('ql_runtime', oid, 'EXECUTE')
                   OR has_function_privilege('ql_readonly', oid, 'EXECUTE')
                   OR has_function_privilege('ql_sweeper', oid, 'EXECUTE')
                   OR has_function_privilege('ql_producer', oid, 'EXECUTE'))), NULL,
          'no API role holds EXECUTE on a ql_private helper');

-- Parameter names: every parameter of every ql function is p_<name>. Callers use
-- named notation (qinglong.db.api: `ql.ack_lease(p_credential_id => ...)`), so a
-- name is part of the API; the prefix also keeps a parameter apart from the
-- column it is compared with. An unnamed parameter fails too.
SELECT is((SELECT array_agg(x.arg ORDER BY x.arg)
             FROM (SELECT p.oid::regprocedure::text || ': ' || coalesce(nullif(a.name, ''), '<unnamed>') AS arg
                     FROM pg_catalog.pg_proc p
                    CROSS JOIN LATERAL unnest(coalesce(p.proargnames,
                                                       array_fill(NULL::text, ARRAY[p.pronargs::integer])))
                          AS a(name)
                    WHERE p.pronamespace = 'ql'::regnamespace
                      AND (a.name IS NULL OR a.name !~ '^p_[a-z][a-z0-9_]*$')) x),
          NULL, 'every parameter of every ql function is named p_<name>');

-- The API classification
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM api_fn
            WHERE name NOT IN (SELECT name FROM api_class)), NULL,
          'every ql function is classified worker-facing, control plane or read in this test');
SELECT is((SELECT array_agg(name ORDER BY name) FROM api_class
            WHERE name IN ('authenticate_worker', 'record_auth_denial', 'open_session',
                           'heartbeat_session', 'close_session', 'pull_offer', 'register_worker',
                           'issue_credential', 'revoke_credential', 'publish_revision',
                           'enqueue_runs', 'cancel_run', 'ack_lease', 'heartbeat_lease',
                           'complete_lease', 'sweep_leases')
              AND name NOT IN (SELECT name FROM api_fn)), NULL,
          'the core API exists');
SELECT set_eq(
    $$SELECT signature FROM api_fn WHERE has_function_privilege('ql_worker_ingress', oid, 'EXECUTE')$$,
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role = 'ql_worker_ingress'$$,
    'ql_worker_ingress executes exactly the worker-facing functions');
SELECT set_eq(
    $$SELECT signature FROM api_fn WHERE has_function_privilege('ql_runtime', oid, 'EXECUTE')$$,
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role IN ('ql_runtime', 'read', 'sweep')$$,
    'ql_runtime executes exactly the control-plane, sweep and read functions (none of the worker-facing ones)');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM api_fn JOIN api_class USING (name)
            WHERE role IN ('ql_runtime', 'sweep')
              AND has_function_privilege('ql_worker_ingress', oid, 'EXECUTE')),
          NULL, 'the ingress cannot reach any control-plane or sweep function');
-- The sweeper (SPEC §13.6): both sets come from the catalog, over every function
-- of ql AND ql_private, so a grant to ql_sweeper anywhere else fails here.
SELECT set_eq(
    $$SELECT signature FROM project_fn WHERE has_function_privilege('ql_sweeper', oid, 'EXECUTE')$$,
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role = 'sweep'$$,
    'ql_sweeper executes exactly the sweep functions (nothing control-plane, read or worker-facing)');
SELECT set_eq(
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role = 'sweep'$$,
    ARRAY['ql.prune_audit(bigint,integer,boolean)', 'ql.prune_fleet(bigint,integer,boolean)',
          'ql.prune_runs(bigint,integer,boolean)', 'ql.sweep_leases(integer)'],
    'the sweep functions are the lease sweep (with promotion) and the three prunes');
SELECT is((SELECT array_agg(name ORDER BY name) FROM api_fn JOIN api_class USING (name)
            WHERE has_function_privilege('ql_sweeper', oid, 'EXECUTE')
              AND name IN ('publish_revision', 'prepare_task', 'enqueue_runs', 'cancel_run', 'cancel_runs',
                           'retry_run', 'register_worker', 'issue_credential',
                           'revoke_credential', 'configure_task', 'disable_worker',
                           'enable_worker', 'end_session', 'create_pool', 'grant_pool',
                           'revoke_pool')),
          NULL, 'the sweeper publishes, enqueues, cancels, retries and grants nothing');
-- The producer API (SPEC §13.4): over every function of ql AND ql_private.
SELECT set_eq(
    $$SELECT signature FROM project_fn WHERE has_function_privilege('ql_producer', oid, 'EXECUTE')$$,
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role = 'producer'$$,
    'ql_producer executes exactly the producer functions (nothing control-plane, read, sweep or worker-facing)');
SELECT set_eq(
    $$SELECT name FROM api_fn JOIN api_class USING (name) WHERE role = 'producer'$$,
    ARRAY['producer_cancel_run', 'producer_enqueue', 'producer_list_runs', 'producer_retry_run',
          'producer_run_log', 'producer_show_run'],
    'the producer functions are enqueue, show, list, cancel, retry and the log');
SELECT is((SELECT array_agg(signature ORDER BY signature) FROM api_fn JOIN api_class USING (name)
            WHERE role = 'producer'
              AND (has_function_privilege('ql_runtime', oid, 'EXECUTE')
                   OR has_function_privilege('ql_worker_ingress', oid, 'EXECUTE')
                   OR has_function_privilege('ql_readonly', oid, 'EXECUTE')
                   OR has_function_privilege('ql_sweeper', oid, 'EXECUTE'))),
          NULL, 'no other role executes a producer function');
SELECT set_eq(
    $$SELECT signature FROM api_fn WHERE has_function_privilege('ql_readonly', oid, 'EXECUTE')$$,
    $$SELECT signature FROM api_fn JOIN api_class USING (name) WHERE role = 'read'$$,
    'ql_readonly executes exactly the read functions (no action, nothing worker-facing)');
SELECT is((SELECT array_agg(f.signature ORDER BY f.signature)
             FROM api_fn f JOIN api_class c USING (name) JOIN pg_catalog.pg_proc p ON p.oid = f.oid
            WHERE c.role = 'read' AND f.name <> 'status_snapshot' AND p.provolatile <> 's'), NULL,
          'every read of SPEC 9 is STABLE (plpgsql then refuses any write in it)');
SELECT function_privs_are('ql', 'status_snapshot', ARRAY[]::text[], 'ql_readonly', ARRAY['EXECUTE'],
                          'monitoring: EXECUTE on ql.status_snapshot (granted to ql_runtime too)');
SELECT function_privs_are('ql', 'open_session', ARRAY['text', 'bytea', 'text', 'bytea'],
                          'ql_worker_ingress', ARRAY['EXECUTE'], 'ingress: EXECUTE on ql.open_session');
SELECT function_privs_are('ql', 'publish_revision', ARRAY['text', 'text', 'bytea', 'text', 'text'],
                          'ql_worker_ingress', ARRAY[]::text[], 'ingress: nothing on ql.publish_revision');

-- Relations: owned by ql_owner, no direct privileges for the API roles
SELECT is((SELECT array_agg(rel ORDER BY rel) FROM user_rel
            WHERE schema IN ('ql', 'ql_private') AND relowner <> 'ql_owner'::regrole), NULL,
          'every table and sequence in ql / ql_private is owned by ql_owner');
SELECT is((SELECT array_agg(rel ORDER BY rel) FROM user_rel
            WHERE relkind <> 'S'
              AND has_table_privilege('ql_worker_ingress', oid,
                                      'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')),
          NULL, 'ql_worker_ingress has no privilege on any table in any schema');
SELECT is((SELECT array_agg(rel ORDER BY rel) FROM user_rel
            WHERE (relkind <> 'S'
                   AND has_table_privilege('ql_sweeper', oid,
                                           'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
               OR (relkind = 'S' AND has_sequence_privilege('ql_sweeper', oid, 'USAGE, SELECT, UPDATE'))),
          NULL, 'ql_sweeper has no privilege on any table or sequence in any schema');
SELECT is((SELECT array_agg(rel ORDER BY rel) FROM user_rel
            WHERE (relkind <> 'S'
                   AND has_table_privilege('ql_producer', oid,
                                           'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'))
               OR (relkind = 'S' AND has_sequence_privilege('ql_producer', oid, 'USAGE, SELECT, UPDATE'))),
          NULL, 'ql_producer has no privilege on any table or sequence in any schema');
SELECT is((SELECT array_agg(rel ORDER BY rel) FROM user_rel
            WHERE schema IN ('ql', 'ql_private')
              AND ((relkind <> 'S' AND (has_table_privilege('ql_runtime', oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
                                        OR has_table_privilege('public', oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')))
                   OR (relkind = 'S' AND (has_sequence_privilege('ql_runtime', oid, 'USAGE, SELECT, UPDATE')
                                          OR has_sequence_privilege('ql_worker_ingress', oid, 'USAGE, SELECT, UPDATE')
                                          OR has_sequence_privilege('public', oid, 'USAGE, SELECT, UPDATE'))))),
          NULL, 'nobody but the owner reads or writes ql_private tables and sequences directly');

SELECT * FROM finish();
ROLLBACK;
