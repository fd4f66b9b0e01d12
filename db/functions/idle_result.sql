-- ql_private.idle_result(reason, pages, candidates, claim_attempts, races, mismatches, truncated) -> jsonb
--
-- Purpose: the `idle` envelope of a pull (SPEC §4.2) in one place, so every idle
--   path reports the same stats shape. reason ∈ no_candidates | placement_mismatch
--   | capacity_full | contention.
-- Caller: ql.pull_offer, ql.pull_offers, ql_private.scan_and_claim.
-- Pure.
-- plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
-- call, a plpgsql one keeps its plan for the session (this is on the pull hot path).
CREATE OR REPLACE FUNCTION ql_private.idle_result(
    p_reason text,
    p_pages integer,
    p_candidates integer,
    p_claim_attempts integer,
    p_races integer,
    p_mismatches jsonb,
    p_truncated boolean
)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'status', 'idle',
        'reason', p_reason,
        'stats', jsonb_build_object(
            'pages', p_pages,
            'candidates', p_candidates,
            'claimAttempts', p_claim_attempts,
            'races', p_races,
            'mismatches', p_mismatches),
        'truncated', p_truncated));
END
$$;
REVOKE ALL ON FUNCTION ql_private.idle_result(text, integer, integer, integer, integer, jsonb, boolean)
    FROM PUBLIC;
