-- 0001 core schema: API/private schemas, the tables of SPEC §2, their indexes.
--
-- Runs as ql_owner (the migrator does SET LOCAL ROLE ql_owner), so every object
-- created here is owned by ql_owner. Immutable once landed: fix forward.

CREATE SCHEMA IF NOT EXISTS ql_private AUTHORIZATION ql_owner;
CREATE SCHEMA IF NOT EXISTS ql AUTHORIZATION ql_owner;

-- GRANT USAGE ON SCHEMA ql is the boundary; nobody but the owner sees ql_private.
REVOKE ALL ON SCHEMA ql_private FROM PUBLIC;
REVOKE ALL ON SCHEMA ql FROM PUBLIC;
GRANT USAGE ON SCHEMA ql TO ql_runtime, ql_worker_ingress, ql_readonly;

-- Functions are created by later files; new ones must not be callable by PUBLIC
-- even if a file forgets its REVOKE (the pgTAP catalog test still demands it).
ALTER DEFAULT PRIVILEGES FOR ROLE ql_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

CREATE TABLE ql_private.projects (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE ql_private.tasks (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id           uuid NOT NULL REFERENCES ql_private.projects(id),
    name                 text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    enabled              boolean NOT NULL DEFAULT true,
    current_revision_id  uuid,
    lease_ttl_seconds    integer NOT NULL DEFAULT 60 CHECK (lease_ttl_seconds BETWEEN 5 AND 3600),
    max_attempts         integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    retry_base_ms        integer NOT NULL DEFAULT 1000 CHECK (retry_base_ms BETWEEN 0 AND 3600000),
    retry_cap_ms         integer NOT NULL DEFAULT 300000 CHECK (retry_cap_ms BETWEEN 0 AND 86400000),
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (project_id, name)
);

CREATE TABLE ql_private.execution_revisions (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    task_id         uuid NOT NULL REFERENCES ql_private.tasks(id),
    revision        integer NOT NULL CHECK (revision >= 1),
    kind            text NOT NULL CHECK (kind = 'qinglong/command@v1'),
    executor        text NOT NULL CHECK (executor = 'remote_worker'),
    spec            jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    -- NULL on rows written before placement existed (R-REV-2).
    placement       jsonb CHECK (placement IS NULL OR jsonb_typeof(placement) = 'object'),
    canonical       bytea NOT NULL,
    content_digest  text NOT NULL CHECK (content_digest ~ '^sha256:[0-9a-f]{64}$'),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (task_id, revision)
);

ALTER TABLE ql_private.tasks
    ADD CONSTRAINT tasks_current_revision_fk
    FOREIGN KEY (current_revision_id) REFERENCES ql_private.execution_revisions(id);

CREATE SEQUENCE ql_private.run_queue_seq AS bigint;

CREATE TABLE ql_private.runs (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id             uuid NOT NULL REFERENCES ql_private.projects(id),
    task_id                uuid NOT NULL REFERENCES ql_private.tasks(id),
    execution_revision_id  uuid NOT NULL REFERENCES ql_private.execution_revisions(id),
    priority               smallint NOT NULL DEFAULT 0,
    -- FIFO position; a sequence makes it unique without a unique index, which
    -- would tempt the planner away from the keyset index below.
    queue_seq              bigint NOT NULL DEFAULT nextval('ql_private.run_queue_seq'),
    state                  text NOT NULL DEFAULT 'queued' CHECK (state IN
        ('queued', 'dispatching', 'starting', 'running', 'succeeded', 'failed', 'cancelled')),
    runtime_owned          boolean NOT NULL DEFAULT true,
    cancel_requested       boolean NOT NULL DEFAULT false,
    current_attempt_id     uuid,
    created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at            timestamptz
);
ALTER SEQUENCE ql_private.run_queue_seq OWNED BY ql_private.runs.queue_seq;

-- Keyset candidate discovery (R-CAND): priority DESC, FIFO, stable id, only
-- queued runs, so the index stays as small as the waiting queue and a scan never
-- walks past runs already offered. (A `dispatching` run always has a live
-- unstarted lease; when that lease expires the run is found through
-- run_leases_live_expiry instead — see db/functions/candidate_page.sql.)
-- Priority is negated (as integer: -(-32768) overflows smallint) so the
-- mixed-direction order is one ascending key: a keyset position is then a single
-- row comparison, i.e. one index range scan, never a filter over skipped rows.
CREATE INDEX runs_candidate_keyset
    ON ql_private.runs ((-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested;
CREATE INDEX runs_task_state ON ql_private.runs (task_id, state);

CREATE TABLE ql_private.attempts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id       uuid NOT NULL REFERENCES ql_private.runs(id),
    attempt_no   integer NOT NULL CHECK (attempt_no >= 1),
    executor     text NOT NULL CHECK (executor = 'remote_worker'),
    state        text NOT NULL DEFAULT 'claimed' CHECK (state IN
        ('claimed', 'starting', 'running', 'succeeded', 'failed', 'lost', 'cancelled')),
    not_before   timestamptz NOT NULL DEFAULT clock_timestamp(),
    exit_code    integer,
    reason       text CHECK (reason IS NULL OR reason ~ '^[a-z][a-z0-9_]{0,63}$'),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at  timestamptz,
    UNIQUE (run_id, attempt_no)
);

ALTER TABLE ql_private.runs
    ADD CONSTRAINT runs_current_attempt_fk
    FOREIGN KEY (current_attempt_id) REFERENCES ql_private.attempts(id);

CREATE TABLE ql_private.workers (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE ql_private.worker_credentials (
    credential_id  text PRIMARY KEY CHECK (credential_id ~ '^[a-z0-9]{16}$'),
    worker_id      uuid NOT NULL REFERENCES ql_private.workers(id),
    -- SHA-256 of the 43 ASCII bytes of the secret; the secret itself is never stored.
    secret_digest  bytea NOT NULL CHECK (octet_length(secret_digest) = 32),
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at     timestamptz
);
CREATE INDEX worker_credentials_worker ON ql_private.worker_credentials (worker_id);

CREATE TABLE ql_private.worker_sessions (
    session_id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    worker_id               uuid NOT NULL REFERENCES ql_private.workers(id),
    generation              bigint NOT NULL CHECK (generation >= 1),
    state                   text NOT NULL DEFAULT 'active'
        CHECK (state IN ('active', 'draining', 'closed')),
    expires_at              timestamptz NOT NULL,
    capabilities            jsonb NOT NULL,
    capabilities_canonical  bytea NOT NULL,
    capabilities_digest     text NOT NULL CHECK (capabilities_digest ~ '^sha256:[0-9a-f]{64}$'),
    slots                   integer NOT NULL CHECK (slots BETWEEN 1 AND 256),
    opened_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_at               timestamptz,
    UNIQUE (worker_id, generation)
);
-- At most one active session per worker: opening another replaces it.
CREATE UNIQUE INDEX worker_sessions_one_active ON ql_private.worker_sessions (worker_id)
    WHERE state = 'active';

CREATE TABLE ql_private.run_leases (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id             uuid NOT NULL REFERENCES ql_private.attempts(id),
    run_id                 uuid NOT NULL REFERENCES ql_private.runs(id),
    worker_id              uuid NOT NULL REFERENCES ql_private.workers(id),
    session_id             uuid NOT NULL REFERENCES ql_private.worker_sessions(session_id),
    session_generation     bigint NOT NULL,
    lease_generation       integer NOT NULL CHECK (lease_generation >= 1),
    lease_version          integer NOT NULL DEFAULT 1 CHECK (lease_version >= 1),
    offer_id               uuid NOT NULL UNIQUE,
    -- SHA-256 of the worker's lease token; the token itself never reaches the database.
    token_digest           bytea NOT NULL CHECK (octet_length(token_digest) = 32),
    execution_revision_id  uuid NOT NULL REFERENCES ql_private.execution_revisions(id),
    content_digest         text NOT NULL CHECK (content_digest ~ '^sha256:[0-9a-f]{64}$'),
    placement_score        integer NOT NULL CHECK (placement_score >= 0),
    claimed_at             timestamptz NOT NULL,
    expires_at             timestamptz NOT NULL,
    started_at             timestamptz,
    released_at            timestamptz,
    release_reason         text CHECK (release_reason IN
        ('expired', 'session_replaced', 'session_closed', 'completed', 'lost', 'cancelled',
         'start_failed')),
    updated_at             timestamptz NOT NULL,
    CHECK ((released_at IS NULL) = (release_reason IS NULL)),
    UNIQUE (attempt_id, lease_generation)
);
-- R-LEASE-1: at most one live lease per attempt.
CREATE UNIQUE INDEX run_leases_one_live ON ql_private.run_leases (attempt_id)
    WHERE released_at IS NULL;
-- Slot accounting of a session reads only its live leases.
CREATE INDEX run_leases_session_live ON ql_private.run_leases (session_id)
    WHERE released_at IS NULL;
-- The sweeper finds expired live leases without scanning history.
CREATE INDEX run_leases_live_expiry ON ql_private.run_leases (expires_at)
    WHERE released_at IS NULL;
-- Candidate discovery finds runs whose offer expired unstarted through this one
-- (they are `dispatching`, outside runs_candidate_keyset); normally a handful.
CREATE INDEX run_leases_unstarted_expiry ON ql_private.run_leases (expires_at)
    WHERE released_at IS NULL AND started_at IS NULL;

CREATE TABLE ql_private.events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type        text NOT NULL CHECK (type ~ '^(run|attempt|lease)\.[a-z_]+$'),
    run_id      uuid REFERENCES ql_private.runs(id),
    attempt_id  uuid REFERENCES ql_private.attempts(id),
    -- Never tokens or digests of tokens (R-LEASE-2); enforced by a CHECK below.
    payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (NOT (payload ?| ARRAY['leaseToken', 'token', 'tokenDigest', 'token_digest',
                                 'secret', 'secretDigest', 'secret_digest']))
);
CREATE INDEX events_run ON ql_private.events (run_id, id);

CREATE TABLE ql_private.security_audit (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    credential_id  text CHECK (credential_id IS NULL OR credential_id ~ '^[a-z0-9]{16}$'),
    worker_id      uuid,
    action         text NOT NULL CHECK (action ~ '^[a-z][a-z0-9_.]{0,63}$'),
    outcome        text NOT NULL CHECK (outcome IN ('allowed', 'denied')),
    reason         text NOT NULL CHECK (reason ~ '^[a-z][a-z0-9_]{0,63}$')
);
CREATE INDEX security_audit_time ON ql_private.security_audit (occurred_at);

-- R-REV-1: execution revisions are immutable.
CREATE FUNCTION ql_private.refuse_revision_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'QL021',
        MESSAGE = format('execution revisions are immutable (%s refused)', TG_OP);
END
$$;
REVOKE ALL ON FUNCTION ql_private.refuse_revision_change() FROM PUBLIC;

CREATE TRIGGER execution_revisions_immutable
    BEFORE UPDATE OR DELETE ON ql_private.execution_revisions
    FOR EACH ROW EXECUTE FUNCTION ql_private.refuse_revision_change();
CREATE TRIGGER execution_revisions_no_truncate
    BEFORE TRUNCATE ON ql_private.execution_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION ql_private.refuse_revision_change();
