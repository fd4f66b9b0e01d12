-- ql_private.credential_first_use(p_credential_id text, p_predecessor_id text) -> void
--
-- Purpose: the first successful authentication of a rotated credential (SPEC
--   §16.2) retires its predecessor: the old credential stays valid only "until
--   the new one is first used or 24 h pass". Records first_used_at on the new
--   credential (so this runs once) and moves the predecessor's expires_at to
--   now; NOTIFY ql_dispatch 'c:<predecessor>' so every ingress replica's idle
--   view drops what it believed about the old credential.
-- Inputs: p_credential_id (the rotated credential, authenticated by the caller),
--   p_predecessor_id (its rotated_from).
-- Writes: the two worker_credentials rows (only while first_used_at is NULL).
-- Locks: the new credential's row, then the predecessor's (UPDATE, in that order).
-- Idempotency: a second call (a concurrent first use) changes nothing.
-- Errors: none of its own.
-- Caller: ql_private.authenticate (as ql_owner).
CREATE OR REPLACE FUNCTION ql_private.credential_first_use(
    p_credential_id text,
    p_predecessor_id text
)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE ql_private.worker_credentials c SET first_used_at = clock_timestamp()
     WHERE c.credential_id = p_credential_id AND c.first_used_at IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE ql_private.worker_credentials c
       SET expires_at = least(coalesce(c.expires_at, 'infinity'), clock_timestamp())
     WHERE c.credential_id = p_predecessor_id;
    PERFORM pg_notify('ql_dispatch', 'c:' || p_predecessor_id);
END
$$;
REVOKE ALL ON FUNCTION ql_private.credential_first_use(text, text) FROM PUBLIC;
