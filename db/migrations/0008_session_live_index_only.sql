-- 0008 slot accounting by index-only scan.
--
-- Why (found by `qinglong bench sql`, 20k claims per level): a pull counts the
-- session's live leases twice (the unlocked capacity check, then again under the
-- session lock), and "live" needs started_at / expires_at, which the old partial
-- index run_leases_session_live (session_id) did not carry — so each count
-- visited one heap page per lease: ~1.1 ms for a session holding 175 offers
-- (162 heap blocks), growing with the slots in use. With the two columns
-- INCLUDEd the count is an index-only scan (0.11 ms for the same session, 0 heap
-- fetches) wherever the visibility map is set. Including them costs no HOT
-- update: started_at and expires_at already change an indexed expression of
-- run_leases (the expiry indexes) whenever they change.
-- The visibility map is set by vacuum; run_leases is insert-heavy (a lease per
-- claim), so insert-triggered vacuums run on an absolute threshold too.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE INDEX run_leases_session_live_counted ON ql_private.run_leases (session_id)
    INCLUDE (started_at, expires_at)
    WHERE released_at IS NULL;
DROP INDEX ql_private.run_leases_session_live;

ALTER TABLE ql_private.run_leases SET (
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0
);
