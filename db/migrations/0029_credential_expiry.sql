-- 0029 credential expiry and self-rotation (SPEC §16.2).
--
-- worker_credentials gains:
--   ttl_s         the lifetime a credential was issued with (`--credential-ttl`,
--                 default 90 d at the CLI); NULL = never expires (credentials
--                 issued before this migration, and test fixtures). A credential
--                 rotated from it (ql.rotate_credential) inherits it.
--   expires_at    created_at + ttl_s, or earlier once it is rotated: then the
--                 old credential stays valid until its successor is first used
--                 or 24 h pass, whichever comes first. ql_private.authenticate
--                 refuses an expired credential (401 expired_credential).
--   rotated_from  the credential this one replaced (its predecessor).
--   first_used_at the first time this credential authenticated, recorded only
--                 for a credential with a predecessor (the one write its first
--                 use costs: it retires the predecessor at once).
-- ql.issue_credential gains p_ttl_s (a new signature: the old one is dropped
-- here, the function file creates the new one).
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.worker_credentials
    ADD COLUMN ttl_s bigint CHECK (ttl_s IS NULL OR ttl_s BETWEEN 10 AND 315360000),
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN rotated_from text REFERENCES ql_private.worker_credentials (credential_id),
    ADD COLUMN first_used_at timestamptz,
    ADD CONSTRAINT worker_credentials_expiry_after_creation
        CHECK (expires_at IS NULL OR expires_at > created_at - interval '1 second'),
    ADD CONSTRAINT worker_credentials_first_use_of_successors
        CHECK (first_used_at IS NULL OR rotated_from IS NOT NULL);
CREATE INDEX worker_credentials_rotated_from ON ql_private.worker_credentials (rotated_from)
    WHERE rotated_from IS NOT NULL;
CREATE INDEX worker_credentials_live_expiry ON ql_private.worker_credentials (expires_at)
    WHERE revoked_at IS NULL AND expires_at IS NOT NULL;

DROP FUNCTION IF EXISTS ql.issue_credential(text, text, bytea);
