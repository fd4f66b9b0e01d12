-- ql_private.settings() -> record of protocol constants
--
-- Purpose: one place for the protocol's timing constants and scan bounds
--   (SPEC §3.1, §5), so functions and tests read the same numbers.
-- Caller: ql.heartbeat_session, ql.open_session, ql_private.pull_bounds,
--   ql_private.session_projection.
-- Locks: none. Pure.
CREATE OR REPLACE FUNCTION ql_private.settings(
    OUT session_ttl interval,
    OUT heartbeat_interval_ms integer,
    OUT default_pages integer,
    OUT default_page_size integer,
    OUT default_claim_attempts integer,
    OUT max_pages integer,
    OUT max_page_size integer,
    OUT max_claim_attempts integer,
    OUT idle_retry_after_ms integer
)
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    -- plpgsql assignments, not a SQL SELECT: a SQL function returning a record is
    -- re-planned on every call, and every pull reads these.
    session_ttl := interval '60 seconds';
    heartbeat_interval_ms := 20000;
    default_pages := 2;
    default_page_size := 8;
    default_claim_attempts := 8;
    max_pages := 16;
    max_page_size := 64;
    max_claim_attempts := 64;
    idle_retry_after_ms := 2000;
END
$$;
REVOKE ALL ON FUNCTION ql_private.settings() FROM PUBLIC;
