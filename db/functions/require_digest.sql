-- ql_private.require_digest(value bytea, field text) -> bytea
--
-- Purpose: refuse a digest argument that is not exactly 32 bytes (SHA-256), so a
--   truncated or hex-encoded digest can never be stored or compared.
-- Caller: ql.ack_lease, ql.append_log, ql.complete_lease, ql.heartbeat_lease,
--   ql.issue_credential, ql.lease_secrets, ql.pull_offer, ql.pull_offers,
--   ql.rotate_credential.
-- Locks: none. Pure.
-- SQLSTATE: QL001 when NULL or not 32 bytes.
CREATE OR REPLACE FUNCTION ql_private.require_digest(p_value bytea, p_field text)
RETURNS bytea
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NULL OR octet_length(p_value) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('%s must be a 32-byte SHA-256 digest', p_field);
    END IF;
    RETURN p_value;
END
$$;
REVOKE ALL ON FUNCTION ql_private.require_digest(bytea, text) FROM PUBLIC;
