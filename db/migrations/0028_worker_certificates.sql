-- 0028 worker certificates: renewal and revocation (SPEC §16.3).
--
-- 1. ql_private.worker_certificates: one row per client certificate the control
--    plane issued for a worker (`admin worker create`, `admin worker renew-cert`),
--    keyed by its serial number: lowercase hex without colons or leading zeros
--    (ql_private.certificate_serial). not_after is the certificate's notAfter, so
--    `qinglong status`, the console and /metrics can show the ones expiring
--    soon; revoked_at mirrors a revocation of that serial. Certificates issued by
--    another CA are not listed here and can still be revoked (2.).
-- 2. ql_private.certificate_revocations: one row per revoked serial (known to 1.
--    or not). seq orders them so every ingress process fetches only what is new
--    (ql.revoked_certificates); rows are never deleted or updated, so "after
--    seq N" is complete. ql.revoke_certificate sends NOTIFY ql_certificates
--    (payload: the serial) at commit; the processes also re-read every few
--    seconds, so a lost notification delays a refusal by at most that period.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE TABLE ql_private.worker_certificates (
    serial      text PRIMARY KEY CHECK (serial ~ '^(0|[1-9a-f][0-9a-f]{0,39})$'),
    worker_id   uuid NOT NULL REFERENCES ql_private.workers (id),
    not_after   timestamptz NOT NULL,
    issued_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at  timestamptz
);
CREATE INDEX worker_certificates_worker ON ql_private.worker_certificates (worker_id);
CREATE INDEX worker_certificates_live_not_after ON ql_private.worker_certificates (not_after)
    WHERE revoked_at IS NULL;

CREATE TABLE ql_private.certificate_revocations (
    serial      text PRIMARY KEY CHECK (serial ~ '^(0|[1-9a-f][0-9a-f]{0,39})$'),
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    revoked_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_by  text NOT NULL CHECK (octet_length(revoked_by) BETWEEN 1 AND 63)
);
