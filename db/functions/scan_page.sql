-- ql_private.scan_page(p_classes, p_after_priority, p_after_seq, p_after_id, p_limit,
--                      p_now, p_snapshot, p_own)
--   -> SETOF (run_id, execution_revision_id, priority, queue_seq)
--
-- Purpose: the keyset page a pull reads next (SPEC §3.1), from the source the
--   pull is on: the whole queue (ql_private.candidate_page) while p_classes is
--   NULL, or only the runs of the given placement classes
--   (ql_private.class_candidate_page) once the pull has switched to them — the
--   fallback ql_private.scan_and_claim takes after a first page without a
--   passing candidate, so a head of runs the session cannot take is jumped over
--   instead of read page by page. Up to p_limit + 1 rows (so `truncated` is
--   exact), in no particular order: the caller orders by the key (priority DESC,
--   queue_seq, run_id), which keeps its statement exactly the one it always ran.
-- Inputs: p_classes (NULL = whole queue), the keyset position after which to
--   read (NULL = from the start), p_limit, and the pull's p_now, p_snapshot and
--   p_own (see ql_private.candidate_page: rows a concurrent claim holds are
--   passed over without a lock).
-- Fences: the candidate conditions of the two page functions (claim_candidate
--   re-checks them all on the locked rows).
-- Why a set-returning SQL function with both branches and a one-time filter:
--   LANGUAGE sql, STABLE, no SET clause and nothing volatile in the body, so the
--   planner inlines it (and the two page functions inside it) into the caller's
--   query; with the caller's generic plan each branch is pruned at run time by
--   its `p_classes IS [NOT] NULL` filter. The plan is the same as when the two
--   branches were written in the caller (docs/EXPLAIN.md shows the page
--   functions' index scans).
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.scan_and_claim.
CREATE OR REPLACE FUNCTION ql_private.scan_page(
    p_classes integer[],
    p_after_priority smallint,
    p_after_seq bigint,
    p_after_id uuid,
    p_limit integer,
    p_now timestamptz,
    p_snapshot pg_snapshot,
    p_own xid8
)
RETURNS TABLE (
    run_id uuid,
    execution_revision_id uuid,
    priority smallint,
    queue_seq bigint
)
LANGUAGE sql STABLE
AS $$
    SELECT cp.run_id, cp.execution_revision_id, cp.priority, cp.queue_seq
      FROM ql_private.candidate_page(p_after_priority, p_after_seq, p_after_id, p_limit,
                                     p_now, p_snapshot, p_own) cp
     WHERE p_classes IS NULL
    UNION ALL
    SELECT cc.run_id, cc.execution_revision_id, cc.priority, cc.queue_seq
      FROM ql_private.class_candidate_page(p_classes, p_after_priority, p_after_seq,
                                           p_after_id, p_limit, p_now, p_snapshot, p_own) cc
     WHERE p_classes IS NOT NULL
$$;
REVOKE ALL ON FUNCTION ql_private.scan_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.scan_page(
    integer[], smallint, bigint, uuid, integer, timestamptz, pg_snapshot, xid8) IS
'The next keyset page (limit + 1 rows, unordered: the caller orders by key) of a pull: ql_private.candidate_page while p_classes is NULL, else ql_private.class_candidate_page over those placement classes (the fallback after a first page without a passer). Inputs: p_classes, keyset position, p_limit, p_now, p_snapshot, p_own. Fences: the page functions'' candidate conditions. Inlinable SQL (same plan as the two branches written inline). Writes: none. Locks: none. Errors: none. Caller: ql_private.scan_and_claim.';
