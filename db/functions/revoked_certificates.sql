-- ql.revoked_certificates(p_after_seq bigint, p_limit integer) -> jsonb {serials, lastSeq}
--
-- Purpose: what an ingress process needs to refuse revoked worker certificates
--   (SPEC §16.3): the serials revoked after the last one it holds, oldest first.
--   Each process calls it when ql_certificates notifies and every 2 s anyway
--   (qinglong.service.cert_revocation); revocations are never deleted, so the
--   sequence is complete and an idle call reads one index probe.
-- Inputs: p_after_seq (>= 0; 0 = from the start), p_limit 1..10000.
-- Returns: {serials: [canonical serial, ...] (<= p_limit, by seq), lastSeq: the
--   seq of the last one returned, or p_after_seq when none}. A full page means
--   more may follow: call again after lastSeq.
-- Writes: nothing. Locks: none (index range scan of certificate_revocations_seq_key).
-- Errors: QL001 p_after_seq NULL or negative, p_limit NULL or outside 1..10000.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.revoked_certificates(p_after_seq bigint, p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_result jsonb;
BEGIN
    IF p_after_seq IS NULL OR p_after_seq < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'afterSeq',
            MESSAGE = 'afterSeq must be >= 0';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'limit',
            MESSAGE = 'limit must be between 1 and 10000';
    END IF;
    SELECT jsonb_build_object(
               'serials', coalesce(jsonb_agg(page.serial ORDER BY page.seq), '[]'::jsonb),
               'lastSeq', coalesce(max(page.seq), p_after_seq))
      INTO v_result
      FROM (SELECT r.serial, r.seq FROM ql_private.certificate_revocations r
             WHERE r.seq > p_after_seq ORDER BY r.seq LIMIT p_limit) page;
    RETURN v_result;
END
$$;
REVOKE ALL ON FUNCTION ql.revoked_certificates(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.revoked_certificates(bigint, integer) TO ql_worker_ingress;
