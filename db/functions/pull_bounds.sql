-- ql_private.pull_bounds(bounds jsonb, OUT pages, OUT page_size, OUT claim_attempts)
--
-- Purpose: validate the optional per-pull bounds of SPEC §3.1. NULL or a missing
--   key takes the default (2 pages x 8 candidates, 8 claim attempts). A value
--   above its hard cap (16 / 64 / 64) is an error, never silently clamped.
-- Caller: ql.pull_offer, ql.pull_offers.
-- Locks: none. Pure.
-- SQLSTATEs: QL001 not an object / unknown key / not an integer / below 1;
--   QL002 above the hard cap.
CREATE OR REPLACE FUNCTION ql_private.pull_bounds(
    p_bounds jsonb,
    OUT pages integer,
    OUT page_size integer,
    OUT claim_attempts integer
)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    s record := ql_private.settings();
    k text;
BEGIN
    pages := s.default_pages;
    page_size := s.default_page_size;
    claim_attempts := s.default_claim_attempts;
    IF p_bounds IS NULL OR p_bounds = 'null'::jsonb THEN
        RETURN;
    END IF;
    IF jsonb_typeof(p_bounds) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'bounds must be a JSON object';
    END IF;
    FOR k IN SELECT jsonb_object_keys(p_bounds) LOOP
        IF k NOT IN ('pages', 'pageSize', 'claimAttempts') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('bounds has unknown field %s', left(k, 32));
        END IF;
    END LOOP;
    pages := ql_private.bound_value(p_bounds, 'pages', pages, s.max_pages);
    page_size := ql_private.bound_value(p_bounds, 'pageSize', page_size, s.max_page_size);
    claim_attempts := ql_private.bound_value(p_bounds, 'claimAttempts', claim_attempts,
                                             s.max_claim_attempts);
END
$$;
REVOKE ALL ON FUNCTION ql_private.pull_bounds(jsonb) FROM PUBLIC;
