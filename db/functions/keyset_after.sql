-- ql_private.keyset_after(p_priority, p_queue_seq, p_id, p_after_priority,
--                         p_after_seq, p_after_id) -> boolean
--
-- Purpose: THE keyset position of the dispatch candidate scans (SPEC §3.1,
--   R-CAND): true when the run keyed (p_priority, p_queue_seq, p_id) comes
--   after the position (p_after_priority, p_after_seq, p_after_id) in claim
--   order, priority DESC, queue_seq, id — one row comparison on the ascending
--   key (-priority, queue_seq, id), the key of the keyset indexes
--   (runs_candidate_keyset, runs_class_keyset, runs_pool_keyset,
--   runs_pool_class_keyset). A NULL position (the first page) is before every
--   run: each NULL part stands for the smallest value of its type.
-- Why a function that costs nothing: LANGUAGE sql, IMMUTABLE, one expression,
--   each parameter used once, no SET clause, not SECURITY DEFINER, not STRICT:
--   the planner inlines it into the calling query before planning, so the scan
--   sees the row comparison itself and uses it as the `Index Cond` of the
--   keyset index (docs/EXPLAIN.md) — a plpgsql helper, or any of the above
--   broken, would be a per-row filter and read the queue from its head. Every
--   scan's ORDER BY -(priority::integer), queue_seq, id must stay the same key.
-- Inputs: the run's priority, queue_seq, id; the position's (NULL: none).
-- Writes: none. Locks: none. Errors: none.
-- Caller: ql_private.candidate_page, ql_private.ready_candidate_page,
--   ql_private.class_candidate_page, ql_private.pool_candidate_page,
--   ql_private.pool_ready_candidate_page, ql_private.pool_class_candidate_page.
CREATE OR REPLACE FUNCTION ql_private.keyset_after(
    p_priority smallint,
    p_queue_seq bigint,
    p_id uuid,
    p_after_priority smallint,
    p_after_seq bigint,
    p_after_id uuid
)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT (-(p_priority::integer), p_queue_seq, p_id)
           > (coalesce(-(p_after_priority::integer), -2147483648),
              coalesce(p_after_seq, -9223372036854775808),
              coalesce(p_after_id, '00000000-0000-0000-0000-000000000000'::uuid))
$$;
REVOKE ALL ON FUNCTION ql_private.keyset_after(smallint, bigint, uuid, smallint, bigint, uuid)
    FROM PUBLIC;
