-- ql_private.xid_in_progress(xid, snapshot, own) -> boolean
--
-- Purpose: whether a tuple's 32-bit xmax names a transaction that is still in
--   progress in `snapshot` — i.e. the row is locked or being updated right now
--   by a concurrent claim. candidate_page uses it to pass over such rows without
--   taking a lock (a lock writes WAL; an idle pull must not).
-- A 32-bit xid is widened against the snapshot's epoch: it is taken as
--   xmin + ((xid - xmin) mod 2^32). An xid more than 2^31 behind xmin (older, so
--   finished) or 0 (no xmax) is not in progress; one at or above the snapshot's
--   xmax counts as in progress only within 4096 of it (transactions that took
--   an xid after the snapshot). That bound keeps a MultiXactId in xmax — which
--   the xmax column shows as a plain number from another counter — from being
--   read as a far-future transaction and hiding a free row for long: at worst it
--   is passed over while the xid counter is within 4096 below it.
-- `own` is the caller's own transaction id (pg_current_xact_id_if_assigned(),
--   NULL before it wrote anything): rows this transaction itself locked or
--   wrote are never "held by someone else".
-- It is a hint, never a fence: the claim re-checks every row under FOR NO KEY
--   UPDATE SKIP LOCKED.
-- Pure SQL expression, inlined by the planner.
-- Caller: ql_private.candidate_page, ql_private.class_candidate_page,
--   ql_private.pool_candidate_page, ql_private.pool_class_candidate_page,
--   ql_private.pool_ready_candidate_page, ql_private.ready_candidate_page.
--   SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.xid_in_progress(
    p_xid xid,
    p_snapshot pg_snapshot,
    p_own xid8
)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_xid <> '0'::xid
       AND p_xid IS DISTINCT FROM p_own::xid
       AND ((p_xid::text::bigint
             - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
             + 4294967296) % 4294967296) < 2147483648
       AND pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint
           + (p_xid::text::bigint
              - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
              + 4294967296) % 4294967296
           < pg_catalog.pg_snapshot_xmax(p_snapshot)::text::bigint + 4096
       AND NOT pg_catalog.pg_visible_in_snapshot(
               (pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint
                + (p_xid::text::bigint
                   - pg_catalog.pg_snapshot_xmin(p_snapshot)::text::bigint % 4294967296
                   + 4294967296) % 4294967296)::text::xid8,
               p_snapshot)
$$;
REVOKE ALL ON FUNCTION ql_private.xid_in_progress(xid, pg_snapshot, xid8) FROM PUBLIC;
