-- 0020 granted labels (SPEC §13.2): a worker's placement labels are the ones
-- an operator vouches for, not whatever its capabilities document claims.
--
-- 1. ql_private.worker_labels (worker_id, key, value): the labels granted to a
--    worker (`admin worker create|label --label k=v`, ql.label_worker). Keys
--    and values follow the capabilities' label rules (SPEC §4.4; the same
--    checks as ql_private.validate_capabilities). One value per key; the
--    primary key (worker_id, key) is the probe ql.open_session makes per
--    declared label.
-- 2. workers.self_labels: true = the worker's declared labels are accepted as
--    they are (the behaviour before this migration; `--self-labels`, `dev up`).
--    Every worker that exists when this runs keeps working: the column is added
--    with DEFAULT true, so each existing row reads true (explicit now, and
--    revocable with `admin worker label --self-labels false`), and the default
--    is then set to false, so a worker registered from now on accepts only its
--    granted labels unless it is created with --self-labels.
--
-- ql.open_session refuses (QL016 label_not_granted, 403) a session of a worker
-- without self_labels whose declared labels are not all granted, key and value
-- byte for byte.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.workers ADD COLUMN self_labels boolean NOT NULL DEFAULT true;
ALTER TABLE ql_private.workers ALTER COLUMN self_labels SET DEFAULT false;

CREATE TABLE ql_private.worker_labels (
    worker_id   uuid NOT NULL REFERENCES ql_private.workers(id),
    key         text NOT NULL CHECK (key ~ '^[a-z0-9][a-z0-9._/-]{0,62}$'),
    value       text NOT NULL CHECK (
                    char_length(value) BETWEEN 1 AND 128
                    AND value !~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]'),
    granted_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (worker_id, key)
);
