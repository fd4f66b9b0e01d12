-- ql.expiring_identities(p_within_s bigint DEFAULT 1209600, p_limit integer DEFAULT 100) -> jsonb
--
-- Purpose: the worker credentials and client certificates that expire soon
--   (SPEC §16.3: `qinglong status`, the console and /metrics show those that
--   expire within 14 days — the default window).
--   * credentials: not revoked, expires_at in (now, now + window], and not
--     already replaced (no live successor rotated from it: a rotated
--     credential's 24 h grace is no operator's concern);
--   * certificates the control plane issued (ql_private.worker_certificates):
--     not revoked, not_after in (now, now + window], and not already renewed
--     (no live certificate of the same worker issued after it: a renewal
--     replaces the older one whatever its lifetime, so a certificate renewed
--     with a short validity shows up itself).
--   Both soonest first, through the partial expiry indexes of migrations 0028
--   and 0029.
-- Inputs: p_within_s 1 .. 31536000 (a year; NULL = 14 d), p_limit 1 .. 1000
--   (NULL = 100).
-- Returns: {withinS, credentials: [{credentialId, workerId, worker, expiresAtMs}],
--   certificates: [{serial, workerId, worker, notAfterMs}], credentialsTotal,
--   certificatesTotal (each counted up to 10000), truncated}. Never a digest.
-- Writes: nothing. Locks: none.
-- Errors: QL006 (COLUMN withinS / limit) out of bounds.
-- Caller: ql_readonly, ql_runtime, ql.expiring_counts, ql.status_snapshot.
CREATE OR REPLACE FUNCTION ql.expiring_identities(
    p_within_s bigint DEFAULT 1209600,
    p_limit integer DEFAULT 100
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_within_s bigint := coalesce(p_within_s, 1209600);
    v_limit integer := coalesce(p_limit, 100);
    v_now timestamptz := clock_timestamp();
    v_until timestamptz;
    v_credentials jsonb;
    v_certificates jsonb;
    v_credentials_total bigint;
    v_certificates_total bigint;
BEGIN
    IF v_within_s NOT BETWEEN 1 AND 31536000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'withinS',
            MESSAGE = 'withinS must be between 1 and 31536000';
    END IF;
    IF v_limit NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 1000';
    END IF;
    v_until := v_now + make_interval(secs => v_within_s);
    WITH soon AS (
        SELECT c.credential_id, c.worker_id, c.expires_at
          FROM ql_private.worker_credentials c
         WHERE c.revoked_at IS NULL AND c.expires_at > v_now AND c.expires_at <= v_until
           AND NOT EXISTS (SELECT 1 FROM ql_private.worker_credentials s
                            WHERE s.rotated_from = c.credential_id AND s.revoked_at IS NULL)
         ORDER BY c.expires_at
         LIMIT 10000)
    SELECT (SELECT count(*) FROM soon),
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                         'credentialId', page.credential_id, 'workerId', page.worker_id,
                         'worker', w.name, 'expiresAtMs', ql_private.epoch_ms(page.expires_at))
                       ORDER BY page.expires_at, page.credential_id)
                       FROM (SELECT * FROM soon ORDER BY soon.expires_at LIMIT v_limit) page
                       JOIN ql_private.workers w ON w.id = page.worker_id), '[]'::jsonb)
      INTO v_credentials_total, v_credentials;
    WITH soon AS (
        SELECT c.serial, c.worker_id, c.not_after
          FROM ql_private.worker_certificates c
         WHERE c.revoked_at IS NULL AND c.not_after > v_now AND c.not_after <= v_until
           AND NOT EXISTS (SELECT 1 FROM ql_private.worker_certificates n
                            WHERE n.worker_id = c.worker_id AND n.revoked_at IS NULL
                              AND n.not_after > v_now AND n.issued_at > c.issued_at)
         ORDER BY c.not_after
         LIMIT 10000)
    SELECT (SELECT count(*) FROM soon),
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                         'serial', page.serial, 'workerId', page.worker_id, 'worker', w.name,
                         'notAfterMs', ql_private.epoch_ms(page.not_after))
                       ORDER BY page.not_after, page.serial)
                       FROM (SELECT * FROM soon ORDER BY soon.not_after LIMIT v_limit) page
                       JOIN ql_private.workers w ON w.id = page.worker_id), '[]'::jsonb)
      INTO v_certificates_total, v_certificates;
    RETURN jsonb_build_object(
        'withinS', v_within_s,
        'credentials', v_credentials,
        'certificates', v_certificates,
        'credentialsTotal', v_credentials_total,
        'certificatesTotal', v_certificates_total,
        'truncated', v_credentials_total > v_limit OR v_certificates_total > v_limit);
END
$$;
REVOKE ALL ON FUNCTION ql.expiring_identities(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.expiring_identities(bigint, integer) TO ql_readonly, ql_runtime;
