-- 0003 lease lifecycle (SPEC §7): what the lease ACK / heartbeat / completion
-- functions and the sweeper need beyond the core schema.
--
-- run_leases.heartbeat_at / heartbeat_version: the time and the lease_version of
-- the latest lease heartbeat. ql.heartbeat_lease answers a retried heartbeat
-- (lease_version = current - 1) idempotently, without a write, only when the
-- current version was produced by a heartbeat (heartbeat_version = lease_version),
-- i.e. nothing but that heartbeat happened since the version the worker holds.
-- NULL until the first heartbeat. Both are plain columns of the existing row, so
-- a heartbeat stays a single-row HOT-friendly UPDATE (no indexed column changes
-- but expires_at, which the sweeper's partial index needs).
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.run_leases
    ADD COLUMN heartbeat_at timestamptz,
    ADD COLUMN heartbeat_version integer,
    ADD CONSTRAINT run_leases_heartbeat_version_check
        CHECK (heartbeat_version IS NULL
               OR (heartbeat_version >= 2 AND heartbeat_version <= lease_version)),
    ADD CONSTRAINT run_leases_heartbeat_started_check
        CHECK (heartbeat_at IS NULL OR started_at IS NOT NULL);
