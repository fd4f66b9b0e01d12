-- ql.live_sessions(p_limit integer DEFAULT 200, p_worker_ids text[] DEFAULT NULL) -> jsonb
--
-- Purpose: the open (active or draining) worker sessions with what the console's workers page and
--   waiting panel show (SPEC §10): {sessions: [{workerId, worker, disabled,
--   sessionId, generation, executors, labels, runtimes, slots, slotsUsed,
--   slotsFree, lastSeenAtMs, expiresAtMs, expired, draining}], truncated}. Sessions by
--   worker name (then session id), at most p_limit; `truncated` when more are
--   active. With p_worker_ids, only the sessions of those workers (the console's
--   workers page asks for the workers it lists, one page at a time). slotsUsed counts the session's live leases that hold a slot: started,
--   or offered and not yet expired (the rule status_snapshot uses). lastSeenAtMs
--   is the last heartbeat (the open time before the first one); `expired` = past
--   expires_at and not yet closed by the sweeper. Capabilities are the worker's
--   own declaration (labels, runtimes, executors): never a secret, a digest or a
--   token. `draining` marks a session that takes no new runs but still holds
--   leases (its runs finish there): hiding it would hide where those run.
-- Cost: the active and draining sessions (worker_sessions_one_active and
--   worker_sessions_draining, migration 0011; one probe each per listed worker
--   id when given), each with its worker by
--   primary key and one index-only count of run_leases_session_live_counted;
--   sorted and cut to p_limit.
-- Inputs: p_limit 1..1000 (default 200); p_worker_ids NULL (all workers) or at
--   most 1000 lowercase canonical UUIDs.
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL006 limit out of 1..1000 (COLUMN limit), more than 1000 worker ids
--   (COLUMN workerIds); QL001 malformed worker id (COLUMN workerIds).
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.live_sessions(p_limit integer DEFAULT 200,
                                            p_worker_ids text[] DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_rows jsonb;
    v_count integer;
    v_ids uuid[];
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_worker_ids IS NOT NULL THEN
        IF cardinality(p_worker_ids) > 1000 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'workerIds',
                MESSAGE = 'at most 1000 worker ids';
        END IF;
        v_ids := ARRAY(SELECT ql_private.parse_uuid(w, 'workerIds') FROM unnest(p_worker_ids) w);
    END IF;
    WITH listed AS (
        SELECT s.worker_id, w.name, w.disabled_at, s.session_id, s.generation, s.state,
               s.capabilities, s.slots, s.heartbeat_at, s.expires_at
          FROM ql_private.worker_sessions s
          JOIN ql_private.workers w ON w.id = s.worker_id
         WHERE s.state IN ('active', 'draining')
           AND (v_ids IS NULL OR s.worker_id = ANY (v_ids))
         ORDER BY w.name, s.session_id
         LIMIT p_limit + 1
    )
    SELECT jsonb_agg(jsonb_build_object(
               'workerId', x.worker_id,
               'worker', x.name,
               'disabled', x.disabled_at IS NOT NULL,
               'sessionId', x.session_id,
               'generation', x.generation,
               'executors', coalesce(x.capabilities -> 'executors', '[]'::jsonb),
               'labels', coalesce(x.capabilities -> 'labels', '{}'::jsonb),
               'runtimes', coalesce(x.capabilities -> 'runtimes', '{}'::jsonb),
               'slots', x.slots,
               'draining', x.state = 'draining',
               'slotsUsed', u.used,
               'slotsFree', greatest(x.slots - u.used, 0),
               'lastSeenAtMs', ql_private.epoch_ms(x.heartbeat_at),
               'expiresAtMs', ql_private.epoch_ms(x.expires_at),
               'expired', x.expires_at <= v_now)
               ORDER BY x.name, x.session_id) FILTER (WHERE x.ord <= p_limit),
           count(*)
      INTO v_rows, v_count
      FROM (SELECT l.*, row_number() OVER (ORDER BY l.name, l.session_id) AS ord
              FROM listed l) x
     CROSS JOIN LATERAL (
           SELECT count(*)::integer AS used FROM ql_private.run_leases rl
            WHERE rl.session_id = x.session_id AND rl.released_at IS NULL
              AND (rl.started_at IS NOT NULL OR rl.expires_at > v_now)) u;
    RETURN jsonb_build_object('sessions', coalesce(v_rows, '[]'::jsonb),
                              'truncated', v_count > p_limit);
END
$$;
REVOKE ALL ON FUNCTION ql.live_sessions(integer, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.live_sessions(integer, text[]) TO ql_readonly, ql_runtime;
