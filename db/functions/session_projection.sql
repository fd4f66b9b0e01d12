-- ql_private.session_projection(session) -> jsonb
--
-- Purpose: the `qinglong/session@v1` body without schema (SPEC §5): workerId,
--   sessionId, generation, expiresAtMs, capabilitiesDigest, heartbeatIntervalMs.
--   One projection so open/heartbeat/close can never drift apart.
-- Caller: ql.open_session, ql.heartbeat_session, ql.close_session.
-- Locks: none. Pure. SQLSTATEs: none.
-- plpgsql rather than SQL: a SQL function with a SET clause is re-planned on every
-- call, a plpgsql one keeps its plan for the session (this is on the pull hot path).
CREATE OR REPLACE FUNCTION ql_private.session_projection(s ql_private.worker_sessions)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT jsonb_build_object(
        'workerId', s.worker_id,
        'sessionId', s.session_id,
        'generation', s.generation,
        'expiresAtMs', ql_private.epoch_ms(s.expires_at),
        'capabilitiesDigest', s.capabilities_digest,
        'heartbeatIntervalMs', (SELECT heartbeat_interval_ms FROM ql_private.settings())));
END
$$;
REVOKE ALL ON FUNCTION ql_private.session_projection(ql_private.worker_sessions) FROM PUBLIC;
