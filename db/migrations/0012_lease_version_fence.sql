-- 0012 lease version fence (SPEC §7): every lease ACK, heartbeat and completion
-- carries the lease version the worker last saw.
--
-- Why: without it a heartbeat retried after a lost answer extended the lease a
-- second time, and an ACK or completion decided on an older view of the lease
-- was applied to a newer one. The current version applies a change and answers
-- version + 1; the same request repeated after a lost answer (its version is
-- the one just consumed and it asks for the change that was made) answers the
-- current lease and writes nothing; any other version is the conflict
-- `stale_lease_version` (ql_private.lease_open decides, for all three).
--
-- What changes in the catalog: ql.ack_lease and ql.complete_lease gain a
-- required p_lease_version bigint (after p_token_digest); ql.heartbeat_lease's
-- p_lease_version loses its DEFAULT NULL (NULL is now refused with QL001, so no
-- caller can skip the fence by leaving it off); ql_private.lease_open gains
-- p_lease_version and p_change. PostgreSQL can neither add an input parameter
-- nor remove a default with CREATE OR REPLACE FUNCTION, so each is dropped here
-- by its exact old signature; the migrator re-applies every db/functions/*.sql
-- right after the migrations in this same transaction, so each comes back at
-- once from its file with its REVOKE/GRANT and COMMENT (no caller ever sees it
-- missing; a migrated database ends up exactly like a fresh one). Nothing in
-- the catalog depends on them (plpgsql bodies resolve calls at run time).
-- IF EXISTS: on a fresh database they do not exist yet here.
--
-- No column is added: the change that produced a lease's current version is
-- read off the row (release reason, heartbeat_version, the attempt's state);
-- see ql_private.lease_open. From this migration on, releases by a completion
-- or a start failure also bump lease_version (the functions do it; existing
-- rows are not rewritten: a lease released before it simply answers
-- lease_terminal to a repeated completion instead of idempotent).
--
-- Runs as ql_owner. Immutable once landed: fix forward.

DROP FUNCTION IF EXISTS ql.ack_lease(text, bytea, text, text, bigint, text, bytea, text, text);
DROP FUNCTION IF EXISTS ql.heartbeat_lease(text, bytea, text, text, bigint, text, bytea, bigint);
DROP FUNCTION IF EXISTS ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text, jsonb);
DROP FUNCTION IF EXISTS ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, text);
