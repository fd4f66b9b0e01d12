-- 0007 queue tables always vacuum their indexes.
--
-- Why (found by `qinglong bench soak`, 10 min at 1M queued runs): PostgreSQL 14+
-- skips a vacuum's index pass when the dead item stubs cover under 2 % of the
-- table's pages (vacuum_index_cleanup = auto, "index scan bypassed"). On the
-- 1M-row runs table that is ~50k stubs: 8 of 10 autovacuums bypassed, the stubs
-- stayed, ANALYZE counted them as dead and n_dead_tup climbed to ~55k before an
-- index pass cleared it — and every keyset scan walks the matching dead index
-- entries meanwhile. Queue tables are small per row and their indexes are what
-- every pull reads, so the index pass is always worth it: ON.
-- tests/sql/autovacuum_settings.sql pins it.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.runs SET (vacuum_index_cleanup = on);
ALTER TABLE ql_private.attempts SET (vacuum_index_cleanup = on);
ALTER TABLE ql_private.run_leases SET (vacuum_index_cleanup = on);
