-- 0009 one parameter convention: every parameter of a ql. function is p_<name>.
--
-- Why: callers (the typed Python API) use named notation, `ql.ack_lease(
-- p_credential_id => …)`, so a parameter name is part of the contract; one
-- prefix everywhere also keeps parameters apart from the column names they are
-- compared with, without qualifying them by the function name.
-- PostgreSQL refuses CREATE OR REPLACE FUNCTION that renames an input parameter,
-- so every function whose parameter names change is dropped here, by its exact
-- old signature. The migrator re-applies every db/functions/*.sql right after the
-- migrations, in this same transaction, so each comes back at once from its file,
-- with its REVOKE/GRANT and COMMENT (which live there too): no caller ever sees
-- it missing, and a database migrated from 0008 ends up exactly like a fresh one.
-- Nothing else depends on these functions in the catalog (no view, default or
-- trigger uses them; plpgsql bodies that call them are resolved at run time).
-- Types, order and defaults of every signature are unchanged.
-- IF EXISTS: on a fresh database the functions do not exist yet here (they are
-- created after the migrations).
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- The API (schema ql).
DROP FUNCTION IF EXISTS ql.ack_lease(text, bytea, text, text, bigint, text, bytea, text, text);
DROP FUNCTION IF EXISTS ql.authenticate_worker(text, bytea, text, text);
DROP FUNCTION IF EXISTS ql.cancel_run(text);
DROP FUNCTION IF EXISTS ql.close_session(text, bytea, text, text, bigint);
DROP FUNCTION IF EXISTS ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text);
DROP FUNCTION IF EXISTS ql.enqueue_runs(text, integer, integer);
DROP FUNCTION IF EXISTS ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint);
DROP FUNCTION IF EXISTS ql.heartbeat_session(text, bytea, text, text, bigint);
DROP FUNCTION IF EXISTS ql.heartbeat_sessions(jsonb);
DROP FUNCTION IF EXISTS ql.idle_ping(text);
DROP FUNCTION IF EXISTS ql.issue_credential(text, text, bytea);
DROP FUNCTION IF EXISTS ql.open_session(text, bytea, text, bytea);
DROP FUNCTION IF EXISTS ql.publish_revision(text, text, bytea);
DROP FUNCTION IF EXISTS ql.record_auth_denial(text, text, text, text);
DROP FUNCTION IF EXISTS ql.register_worker(text);
DROP FUNCTION IF EXISTS ql.revoke_credential(text);
DROP FUNCTION IF EXISTS ql.sweep_leases(integer);

-- Helpers renamed to the same convention where they were reworked (the lease
-- fence, the pull's page loop).
DROP FUNCTION IF EXISTS ql_private.lease_fence(ql_private.run_leases, uuid, uuid, bigint, bytea);
DROP FUNCTION IF EXISTS ql_private.scan_and_claim(
    ql_private.worker_sessions, uuid, bytea, integer, integer, integer);
