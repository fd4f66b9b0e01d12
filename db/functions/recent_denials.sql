-- ql.recent_denials(p_limit integer DEFAULT 20) -> jsonb
--
-- Purpose: the console overview's latest authentication denials (SPEC §10):
--   {denials: [{atMs, action, reason, workerId, credentialId}], windowS,
--   scanned, capped}, newest first, at most p_limit, of the last 24 hours. The
--   credential id is the public half of a credential (what an operator revokes
--   by); the audit table holds no secret, digest or token, so none can be shown.
-- Cost: one backward range of security_audit_time (occurred_at) over the
--   window, reading at most 10000 audit rows (allowed ones included): `capped`
--   when the scan stopped there before finding p_limit denials.
-- Inputs: p_limit 1..100 (default 20).
-- Fences: none (an operator's read).
-- Writes: none (STABLE). Locks: none. Idempotency: read-only.
-- Errors: QL006 limit out of 1..100 (COLUMN limit).
-- Caller: ql_readonly (the console), ql_runtime.
CREATE OR REPLACE FUNCTION ql.recent_denials(p_limit integer DEFAULT 20)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_scan_cap constant integer := 10000;
    v_window constant interval := interval '24 hours';
    v_rows jsonb;
    v_found integer;
    v_scanned integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 100';
    END IF;
    WITH recent AS (
        SELECT a.id, a.occurred_at, a.action, a.reason, a.worker_id, a.credential_id, a.outcome
          FROM ql_private.security_audit a
         WHERE a.occurred_at > clock_timestamp() - v_window
         ORDER BY a.occurred_at DESC
         LIMIT v_scan_cap
    ), denied AS (
        SELECT d.*, row_number() OVER (ORDER BY d.occurred_at DESC, d.id DESC) AS ord
          FROM recent d WHERE d.outcome = 'denied'
    )
    SELECT (SELECT jsonb_agg(jsonb_build_object(
                   'atMs', ql_private.epoch_ms(d.occurred_at),
                   'action', d.action,
                   'reason', d.reason,
                   'workerId', d.worker_id,
                   'credentialId', d.credential_id) ORDER BY d.ord)
              FROM denied d WHERE d.ord <= p_limit),
           (SELECT count(*) FROM denied),
           (SELECT count(*) FROM recent)
      INTO v_rows, v_found, v_scanned;
    RETURN jsonb_build_object(
        'denials', coalesce(v_rows, '[]'::jsonb),
        'windowS', extract(epoch FROM v_window)::integer,
        'scanned', v_scanned,
        'capped', v_scanned >= v_scan_cap AND v_found < p_limit);
END
$$;
REVOKE ALL ON FUNCTION ql.recent_denials(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.recent_denials(integer) TO ql_readonly, ql_runtime;
