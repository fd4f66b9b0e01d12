-- ql_private.matching_classes(capabilities) -> integer[]
--
-- Purpose: the placement classes (migration 0006) whose required placement the
--   given worker capabilities satisfy, by the same evaluation as every
--   candidate (ql_private.placement_evaluate on {required}). A pull calls it
--   only when its first keyset page had no passing candidate; cost is one
--   evaluation per class (classes are distinct required placements — few).
-- Caller: ql_private.scan_and_claim. Locks: none. Read-only. SQLSTATEs: QL001
--   from placement_evaluate (capabilities not an object).
CREATE OR REPLACE FUNCTION ql_private.matching_classes(p_capabilities jsonb)
RETURNS integer[]
LANGUAGE plpgsql STABLE
-- placement_classes is tiny and read whole: a sequential scan is the plan (the
-- caller, ql.pull_offer, disables them for the queue's index paths).
SET enable_seqscan = on
AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(pc.id ORDER BY pc.id), '{}')
              FROM ql_private.placement_classes pc
             CROSS JOIN LATERAL ql_private.placement_evaluate(
                   jsonb_build_object('required', pc.required), p_capabilities) pe
             WHERE pe.passed);
END
$$;
REVOKE ALL ON FUNCTION ql_private.matching_classes(jsonb) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.matching_classes(jsonb) IS
'Placement classes whose required placement the capabilities satisfy (placement_evaluate on {required}). Read-only. Caller: ql_private.scan_and_claim.';
