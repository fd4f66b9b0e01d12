-- ql_private.certificate_serial(p_serial text) -> text
--
-- Purpose: the canonical form of a certificate serial number (SPEC §16.3): hex
--   as `openssl x509 -serial` prints it, in any case, with or without colons
--   (and with or without its `serial=` prefix), becomes lowercase hex without
--   colons or leading zeros ('0' for zero). What ql_private.worker_certificates
--   and ql_private.certificate_revocations store, and what the ingress compares
--   (qinglong.service.cert_revocation.serial_hex gives the same text).
-- Inputs: p_serial, at most 128 characters.
-- Returns: the canonical serial (1..40 hex digits: a serial has at most 20 octets).
-- Writes: nothing. Locks: none. Pure.
-- Errors: QL001 (COLUMN serial) NULL, empty, not hex, or more than 20 octets.
-- Caller: ql.revoke_certificate, ql.record_certificate.
CREATE OR REPLACE FUNCTION ql_private.certificate_serial(p_serial text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_hex text;
BEGIN
    IF p_serial IS NULL OR length(p_serial) > 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    v_hex := replace(lower(btrim(p_serial)), ':', '');
    IF v_hex LIKE 'serial=%' THEN
        v_hex := substr(v_hex, 8);
    END IF;
    IF v_hex !~ '^[0-9a-f]+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    v_hex := coalesce(nullif(ltrim(v_hex, '0'), ''), '0');
    IF length(v_hex) > 40 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'serial',
            MESSAGE = 'serial must be hex of at most 20 octets';
    END IF;
    RETURN v_hex;
END
$$;
REVOKE ALL ON FUNCTION ql_private.certificate_serial(text) FROM PUBLIC;
