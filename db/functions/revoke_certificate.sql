-- ql.revoke_certificate(p_serial text) -> jsonb {serial, workerId, revokedAtMs, revoked}
--
-- Purpose: refuse a worker client certificate at every ingress (SPEC §16.3
--   `admin cert revoke --serial S`). The TLS handshake cannot know a revocation;
--   every ingress process holds the set of revoked serials
--   (qinglong.service.cert_revocation), learns a new one from the NOTIFY this
--   sends (channel ql_certificates, payload the canonical serial) and re-reads
--   ql.revoked_certificates every 2 s as well, and refuses every request made
--   over a connection whose certificate is revoked (401 certificate_revoked).
-- Inputs: p_serial, hex as `openssl x509 -serial` prints it, any case, with or
--   without colons (ql_private.certificate_serial canonicalizes it). A serial
--   the control plane never issued (another CA's certificate) is revoked all
--   the same; workerId is then null.
-- Fences: none (a revocation is always allowed).
-- Writes: one certificate_revocations row (revoked_by = session_user), the
--   matching worker_certificates row's revoked_at, and for a known certificate
--   one `worker.certificate_revoked` event (payload serial, actor); NOTIFY at
--   commit. Only the first time.
-- Locks: the revocation row (INSERT ... ON CONFLICT), the certificate row (UPDATE).
-- Idempotency: revoking a revoked serial writes and notifies nothing and returns
--   the first revokedAtMs with revoked false.
-- Errors: QL001 (COLUMN serial) NULL, not hex, more than 20 octets.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.revoke_certificate(p_serial text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_serial text := ql_private.certificate_serial(p_serial);
    v_revoked_at timestamptz;
    v_worker_id uuid;
    v_new boolean := true;
BEGIN
    INSERT INTO ql_private.certificate_revocations AS r (serial, revoked_by)
    VALUES (v_serial, left(session_user::text, 63))
    ON CONFLICT ON CONSTRAINT certificate_revocations_pkey DO NOTHING
    RETURNING r.revoked_at INTO v_revoked_at;
    IF v_revoked_at IS NULL THEN
        v_new := false;
        SELECT r.revoked_at INTO v_revoked_at FROM ql_private.certificate_revocations r
         WHERE r.serial = v_serial;
    END IF;
    UPDATE ql_private.worker_certificates c SET revoked_at = v_revoked_at
     WHERE c.serial = v_serial AND c.revoked_at IS NULL
    RETURNING c.worker_id INTO v_worker_id;
    IF v_worker_id IS NOT NULL THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.certificate_revoked', v_worker_id,
                jsonb_build_object('serial', v_serial, 'actor', session_user));
    ELSE
        SELECT c.worker_id INTO v_worker_id FROM ql_private.worker_certificates c
         WHERE c.serial = v_serial;
    END IF;
    IF v_new THEN
        PERFORM pg_notify('ql_certificates', v_serial);
    END IF;
    RETURN jsonb_build_object(
        'serial', v_serial,
        'workerId', v_worker_id,
        'revokedAtMs', ql_private.epoch_ms(v_revoked_at),
        'revoked', v_new);
END
$$;
REVOKE ALL ON FUNCTION ql.revoke_certificate(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.revoke_certificate(text) TO ql_runtime;
