-- 0025 secrets (SPEC §14.1-14.3): stored only encrypted, delivered only to a
-- started lease.
--
-- 1. ql_private.project_data_keys: one AES-256 data key per project, stored
--    only wrapped (AES-256-GCM) by a key-encryption key (KEK) that is never in
--    the database: a 0600 key file given to the control plane and the ingress
--    (service/secrets_crypto.py). key_id names the data key (every ciphertext
--    carries it), kek_id the KEK that wraps it; nonce (12 bytes) and
--    wrapped_key (32 bytes + the 16-byte GCM tag) are the wrap. The wrap's
--    associated data binds it to (project id, key id), so a wrapped key copied
--    to another project's row does not unwrap. `admin secret rotate-kek`
--    (ql.rewrap_data_keys) replaces kek_id, nonce and wrapped_key of every row
--    in one transaction; key_id never changes.
-- 2. ql_private.secrets: the current version of each secret of a project:
--    name ^[a-z][a-z0-9_.-]{0,63}$, version (1, 2, ... per set; AAD-bound),
--    key_id (the project's data key), nonce (12 bytes), ciphertext (the value,
--    8 B - 16 KiB, + the 16-byte tag). The GCM associated data is (project id,
--    name, version, key id), so no row can be swapped for another one, and an
--    older version cannot replace a newer one unnoticed.
-- 3. security_audit.detail may hold up to 4 KiB: a delivery's audit row names
--    the secret names it delivered (never a value), up to 16 per command.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE TABLE ql_private.project_data_keys (
    project_id   uuid PRIMARY KEY REFERENCES ql_private.projects (id),
    key_id       text NOT NULL UNIQUE CHECK (key_id ~ '^[a-f0-9]{32}$'),
    kek_id       text NOT NULL CHECK (kek_id ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    nonce        bytea NOT NULL CHECK (octet_length(nonce) = 12),
    wrapped_key  bytea NOT NULL CHECK (octet_length(wrapped_key) = 48),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE ql_private.secrets (
    project_id   uuid NOT NULL REFERENCES ql_private.project_data_keys (project_id),
    name         text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_.-]{0,63}$'),
    version      integer NOT NULL CHECK (version >= 1),
    key_id       text NOT NULL CHECK (key_id ~ '^[a-f0-9]{32}$'),
    nonce        bytea NOT NULL CHECK (octet_length(nonce) = 12),
    ciphertext   bytea NOT NULL
        CHECK (octet_length(ciphertext) BETWEEN 8 + 16 AND 16384 + 16),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (project_id, name)
);

ALTER TABLE ql_private.security_audit DROP CONSTRAINT security_audit_detail_check;
ALTER TABLE ql_private.security_audit ADD CONSTRAINT security_audit_detail_check
    CHECK (detail IS NULL
           OR (jsonb_typeof(detail) = 'object' AND pg_column_size(detail) <= 4096
               AND NOT (detail ?| ARRAY['leaseToken', 'token', 'tokenDigest', 'token_digest',
                                         'secret', 'secretDigest', 'secret_digest',
                                         'value', 'values'])));
