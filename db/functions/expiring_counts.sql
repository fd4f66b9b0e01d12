-- ql.expiring_counts(p_within_s bigint) -> jsonb {credentials, certificates}
--
-- Purpose: what the ingress exports on /metrics (SPEC §16.3): how many worker
--   credentials and control-plane-issued certificates expire within
--   p_within_s (the counts of ql.expiring_identities, which the ingress's role
--   may not call: it reads no names). Each ingress process reads it once a
--   minute on its certificate-revocation connection.
-- Inputs: p_within_s 1 .. 31536000.
-- Returns: {credentials, certificates}, each counted up to 10000.
-- Writes: nothing. Locks: none.
-- Errors: QL006 (COLUMN withinS) out of bounds.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.expiring_counts(p_within_s bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_found jsonb;
BEGIN
    IF p_within_s IS NULL OR p_within_s NOT BETWEEN 1 AND 31536000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'withinS',
            MESSAGE = 'withinS must be between 1 and 31536000';
    END IF;
    v_found := ql.expiring_identities(p_within_s, 1);
    RETURN jsonb_build_object('credentials', v_found -> 'credentialsTotal',
                              'certificates', v_found -> 'certificatesTotal');
END
$$;
REVOKE ALL ON FUNCTION ql.expiring_counts(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.expiring_counts(bigint) TO ql_worker_ingress;
