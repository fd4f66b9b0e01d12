-- ql.record_certificate(p_worker_id text, p_serial text, p_not_after_ms bigint)
--   -> jsonb {workerId, serial, notAfterMs}
--
-- Purpose: note a client certificate the control plane issued for a worker
--   (`admin worker create`, `admin worker renew-cert`, SPEC §16.3), so its
--   expiry can be shown (status, console, /metrics) and a revocation by serial
--   names its worker. The certificate itself never reaches the database.
-- Inputs: p_worker_id (lowercase canonical UUID), p_serial (hex, any case,
--   colons optional: ql_private.certificate_serial), p_not_after_ms (the
--   certificate's notAfter, epoch ms, > 0).
-- Fences: the worker exists; the serial is new or already recorded for the
--   same worker with the same notAfter.
-- Writes: one worker_certificates row and one `worker.certificate_issued`
--   event (payload serial, notAfterMs, actor) — nothing on a repeat.
-- Locks: the worker row FOR KEY SHARE; the certificate row (INSERT).
-- Idempotency: recording the same (worker, serial, notAfter) again returns the
--   same answer and writes nothing.
-- Errors: QL001 malformed worker id (COLUMN workerId), serial (COLUMN serial),
--   notAfterMs NULL or <= 0 (COLUMN notAfterMs), or the serial already recorded
--   otherwise (COLUMN serial); QL004 unknown worker.
-- Caller: ql_runtime.
CREATE OR REPLACE FUNCTION ql.record_certificate(
    p_worker_id text,
    p_serial text,
    p_not_after_ms bigint
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_serial text := ql_private.certificate_serial(p_serial);
    v_not_after timestamptz;
    v_existing ql_private.worker_certificates;
BEGIN
    IF p_not_after_ms IS NULL OR p_not_after_ms <= 0 OR p_not_after_ms > 253402300799999 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'notAfterMs',
            MESSAGE = 'notAfterMs must be a positive epoch millisecond before year 10000';
    END IF;
    v_not_after := to_timestamp(p_not_after_ms / 1000.0);
    PERFORM 1 FROM ql_private.workers w WHERE w.id = v_worker_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId',
            MESSAGE = 'worker not found';
    END IF;
    INSERT INTO ql_private.worker_certificates (serial, worker_id, not_after)
    VALUES (v_serial, v_worker_id, v_not_after)
    ON CONFLICT ON CONSTRAINT worker_certificates_pkey DO NOTHING;
    IF FOUND THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.certificate_issued', v_worker_id,
                jsonb_build_object('serial', v_serial,
                                   'notAfterMs', ql_private.epoch_ms(v_not_after),
                                   'actor', session_user));
    ELSE
        SELECT * INTO v_existing FROM ql_private.worker_certificates c
         WHERE c.serial = v_serial;
        IF v_existing.worker_id <> v_worker_id OR v_existing.not_after <> v_not_after THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
                MESSAGE = 'serial already recorded for another certificate';
        END IF;
    END IF;
    RETURN jsonb_build_object('workerId', v_worker_id, 'serial', v_serial,
                              'notAfterMs', ql_private.epoch_ms(v_not_after));
END
$$;
REVOKE ALL ON FUNCTION ql.record_certificate(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.record_certificate(text, text, bigint) TO ql_runtime;
