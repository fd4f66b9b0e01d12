-- ql.list_workers(p_limit integer DEFAULT 1000, p_after text DEFAULT NULL) -> jsonb
--
-- Purpose: the workers and their sessions, for `admin worker list` and the
--   console (SPEC §9.4): {workers: [{workerId, name, disabled, allPools,
--   pools: ["P/N", ...], poolsCapped, selfLabels,
--   grantedLabels: {key: value} (SPEC §13.2, ql.label_worker), credentials:
--   [{credentialId, state: "active"|"revoked"|"expired" (SPEC §16.2)}],
--   session: {sessionId,
--   generation, state, labels, slots, liveLeases, lastSeenAtMs} | null}], next}.
--   Workers in id order, one keyset page; `next` = the last listed worker id
--   (pass it as p_after), null at the end. `session` is the worker's open
--   session: the active one (at most one, worker_sessions_one_active), else a
--   draining one (an operator drain, SPEC §9.5: `state` says which, and
--   liveLeases what it still runs; worker_sessions_draining); labels come from its
--   capabilities; liveLeases = its unreleased leases (started or not, expired
--   or not: what the sweeper has not released yet); lastSeenAtMs = its last
--   heartbeat (the open time before the first one). Credentials: the newest
--   100 of the worker, oldest first, id and state only. Pools (SPEC §13.1):
--   allPools = the `--pool '*'` grant (every pool, present and future); pools
--   = its explicit grants as `P/N`, sorted, at most 100 (the first 100 by pool
--   id; poolsCapped when it holds more). Never a secret, a
--   secret digest or a token digest.
-- Cost: one primary-key range of workers (<= p_limit + 1), then per worker one
--   credentials range (worker_credentials_worker), one pool-grants range
--   (worker_pool_grants primary key, <= 101 rows, each with its pool and
--   project by primary key), one granted-labels range
--   (worker_labels primary key, <= 32 rows), one open-session probe and
--   one live-lease count (run_leases_session_live_counted, index-only).
-- Inputs: p_limit 1..1000 (default 1000), p_after (NULL or a worker id).
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL001 malformed cursor (COLUMN after); QL006 limit out of 1..1000
--   (COLUMN limit).
-- Caller: ql_readonly, ql_runtime.
CREATE OR REPLACE FUNCTION ql.list_workers(p_limit integer DEFAULT 1000, p_after text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_max_credentials constant integer := 100;
    v_max_pools constant integer := 100;
    v_after uuid := '00000000-0000-0000-0000-000000000000';
    v_workers jsonb;
    v_count integer;
    v_last uuid;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    IF p_after IS NOT NULL THEN
        v_after := ql_private.parse_uuid(p_after, 'after');
    END IF;

    WITH page AS MATERIALIZED (
        SELECT w.id, w.name, w.disabled_at, w.self_labels, w.all_pools
          FROM ql_private.workers w
         WHERE w.id > v_after
         ORDER BY w.id
         LIMIT p_limit + 1
    ), listed AS (
        SELECT p.*, row_number() OVER (ORDER BY p.id) AS ord FROM page p
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'workerId', x.id,
               'name', x.name,
               'disabled', x.disabled_at IS NOT NULL,
               'allPools', x.all_pools,
               'pools', coalesce((
                   SELECT jsonb_agg(g.pool ORDER BY g.pool) FILTER (WHERE g.ord <= v_max_pools)
                     FROM (SELECT pr.name || '/' || pl.name AS pool,
                                  row_number() OVER (ORDER BY gg.pool_id) AS ord
                             FROM (SELECT wg.pool_id FROM ql_private.worker_pool_grants wg
                                    WHERE wg.worker_id = x.id
                                    ORDER BY wg.pool_id
                                    LIMIT v_max_pools + 1) gg
                             JOIN ql_private.pools pl ON pl.id = gg.pool_id
                             JOIN ql_private.projects pr ON pr.id = pl.project_id) g),
                   '[]'::jsonb),
               'poolsCapped', (SELECT count(*) > v_max_pools FROM (
                                   SELECT 1 FROM ql_private.worker_pool_grants wg
                                    WHERE wg.worker_id = x.id
                                    LIMIT v_max_pools + 1) c),
               'selfLabels', x.self_labels,
               'grantedLabels', coalesce((
                   SELECT jsonb_object_agg(g.key, g.value) FROM ql_private.worker_labels g
                    WHERE g.worker_id = x.id), '{}'::jsonb),
               'credentials', coalesce((
                   SELECT jsonb_agg(jsonb_build_object(
                              'credentialId', c.credential_id,
                              'state', CASE WHEN c.revoked_at IS NOT NULL THEN 'revoked'
                                            WHEN c.expires_at <= clock_timestamp()
                                                THEN 'expired'
                                            ELSE 'active' END)
                              ORDER BY c.created_at, c.credential_id)
                     FROM (SELECT cc.credential_id, cc.revoked_at, cc.created_at, cc.expires_at
                             FROM ql_private.worker_credentials cc
                            WHERE cc.worker_id = x.id
                            ORDER BY cc.created_at DESC, cc.credential_id DESC
                            LIMIT v_max_credentials) c), '[]'::jsonb),
               'session', (
                   SELECT jsonb_build_object(
                              'sessionId', s.session_id,
                              'generation', s.generation,
                              'state', s.state,
                              'labels', coalesce(s.capabilities -> 'labels', '{}'::jsonb),
                              'slots', s.slots,
                              'liveLeases', (SELECT count(*) FROM ql_private.run_leases l
                                              WHERE l.session_id = s.session_id
                                                AND l.released_at IS NULL),
                              'lastSeenAtMs', ql_private.epoch_ms(s.heartbeat_at))
                     FROM ql_private.worker_sessions s
                    WHERE s.worker_id = x.id AND s.state IN ('active', 'draining')
                    ORDER BY s.state = 'active' DESC, s.generation DESC
                    LIMIT 1))
               ORDER BY x.id) FILTER (WHERE x.ord <= p_limit), '[]'::jsonb),
           count(*)::integer,
           (array_agg(x.id ORDER BY x.id) FILTER (WHERE x.ord = p_limit))[1]
      INTO v_workers, v_count, v_last
      FROM listed x;
    RETURN jsonb_build_object('workers', v_workers,
                              'next', CASE WHEN v_count > p_limit THEN v_last::text END);
END
$$;
REVOKE ALL ON FUNCTION ql.list_workers(integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.list_workers(integer, text) TO ql_readonly, ql_runtime;
