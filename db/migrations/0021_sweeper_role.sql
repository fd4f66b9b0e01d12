-- 0021 the sweeper's own role; prune_audit leaves an audit record.
--
-- 1. ql_sweeper (NOLOGIN, created cluster-wide by db/bootstrap.sql like the
--    other project roles, CONNECT granted there) may execute exactly the
--    sweeper's functions: ql.sweep_leases (lease expiry and the promotion of
--    due runs), ql.prune_runs, ql.prune_audit and ql.prune_fleet (SPEC §13.6).
--    Their function files grant EXECUTE to it (beside ql_runtime, which keeps
--    them for `admin prune`); here it gets USAGE on schema ql and nothing
--    else: no table, no sequence, no ql_private. The sweeper runs on every
--    ingress host, so that host holds a login IN ROLE ql_sweeper, never one
--    that can publish, enqueue or cancel.
-- 2. security_audit.actor and security_audit.detail: ql.prune_audit leaves one
--    row (action audit.pruned) naming the acting database role (session_user,
--    as the operator actions of SPEC §9.5 do) and what it deleted (count,
--    retention, cutoff). Both NULL on the authentication rows. detail is a
--    small object that can never carry a token or secret key.
-- 3. security_audit_pruned (id) over the audit.pruned rows: ql.prune_audit
--    finds the newest one (which it never deletes) with one index probe.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

GRANT USAGE ON SCHEMA ql TO ql_sweeper;

ALTER TABLE ql_private.security_audit
    ADD COLUMN actor text
        CONSTRAINT security_audit_actor_check
        CHECK (actor IS NULL OR octet_length(actor) BETWEEN 1 AND 63),
    ADD COLUMN detail jsonb
        CONSTRAINT security_audit_detail_check
        CHECK (detail IS NULL
               OR (jsonb_typeof(detail) = 'object' AND pg_column_size(detail) <= 1024
                   AND NOT (detail ?| ARRAY['leaseToken', 'token', 'tokenDigest', 'token_digest',
                                             'secret', 'secretDigest', 'secret_digest'])));

CREATE INDEX security_audit_pruned ON ql_private.security_audit (id)
    WHERE action = 'audit.pruned';
