-- ql_private.matching_classes(capabilities) -> integer[]
--
-- Purpose: the placement classes (migration 0006) that have runs waiting AND
--   whose required placement the given worker capabilities satisfy, by the same
--   evaluation as every candidate (ql_private.placement_evaluate on
--   {required}). A pull calls it only when its first keyset page had no passing
--   candidate and reads the classes it returns through
--   ql_private.class_candidate_page.
-- Waiting: the class has a ready queued run (runs_class_keyset) or a scheduled
--   queued run that is due at clock_timestamp() (runs_class_due, migration
--   0017): ql_private.waiting_classes, a skip scan of each index (one descent
--   per class that has such a run, then one past the last), so classes
--   without waiting runs — every placement ever enqueued stays a
--   class until ql.prune_fleet removes it — cost nothing: 5,000 stale classes
--   beside one waiting class cost the pull what one class does
--   (docs/BENCHMARKS.md). A class with only future runs costs one more
--   descent (its earliest due_at), never an evaluation.
-- Cost: one index descent per waiting class and index, one placement
--   evaluation per waiting class; independent of queue depth and of the number
--   of classes ever made.
-- Plan: no SET clause — the caller's settings (ql.pull_offer: sequential scans
--   off) hold, so the skip scans stay index-driven whatever the statistics.
-- Caller: ql_private.scan_and_claim.
-- Locks: none.
--   Read-only. SQLSTATEs: QL001 from placement_evaluate (capabilities not an
--   object).
CREATE OR REPLACE FUNCTION ql_private.matching_classes(p_capabilities jsonb)
RETURNS integer[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_waiting integer[];
BEGIN
    -- The waiting classes first, then each looked up by its key: a join would
    -- be free to hash all of placement_classes.
    v_waiting := ARRAY(SELECT w.class_id FROM ql_private.waiting_classes(v_now) w(class_id));
    RETURN (
        SELECT coalesce(array_agg(pc.id ORDER BY pc.id), '{}')
          FROM unnest(v_waiting) k(class_id)
         CROSS JOIN LATERAL (
               SELECT c.id, c.required FROM ql_private.placement_classes c
                WHERE c.id = k.class_id) pc
         CROSS JOIN LATERAL ql_private.placement_evaluate(
               jsonb_build_object('required', pc.required), p_capabilities) pe
         WHERE pe.passed);
END
$$;
REVOKE ALL ON FUNCTION ql_private.matching_classes(jsonb) FROM PUBLIC;
