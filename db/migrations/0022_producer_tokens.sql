-- 0022 project tokens and the producer role (SPEC §13.4).
--
-- 1. ql_private.project_tokens: one row per token `admin token create` made.
--    The token string `qlp_<id>_<secret>` is generated and printed once by the
--    CLI; only the SHA-256 digest of the whole string is stored (token_digest,
--    32 bytes). id is the public part ([a-z0-9]{16}); scopes a non-empty subset
--    of enqueue, read, cancel, retry, log; expires_at NULL = never; revoked_at
--    set by ql.revoke_project_token (a revoked token stays listed, and refused).
--    The producer functions read a row by its primary key on every call, so a
--    revocation or an expiry takes effect on the next request.
-- 2. ql_producer (NOLOGIN, created cluster-wide by db/bootstrap.sql with CONNECT
--    on the database, like the other project roles): USAGE on schema ql and
--    nothing else here; it executes exactly the ql.producer_* functions (their
--    files grant it), each of which checks the token, its scope and its project.
--    The producer API's login is IN ROLE ql_producer only.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

GRANT USAGE ON SCHEMA ql TO ql_producer;

CREATE TABLE ql_private.project_tokens (
    id            text PRIMARY KEY CHECK (id ~ '^[a-z0-9]{16}$'),
    project_id    uuid NOT NULL REFERENCES ql_private.projects (id),
    token_digest  bytea NOT NULL CHECK (octet_length(token_digest) = 32),
    scopes        text[] NOT NULL
        CHECK (cardinality(scopes) BETWEEN 1 AND 5
               AND scopes <@ ARRAY['enqueue', 'read', 'cancel', 'retry', 'log']
               AND array_position(scopes, NULL) IS NULL),
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by    text NOT NULL CHECK (octet_length(created_by) BETWEEN 1 AND 63),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    CHECK (expires_at IS NULL OR expires_at > created_at)
);
CREATE INDEX project_tokens_project ON ql_private.project_tokens (project_id, created_at);

-- 3. runs_project_state_seq: `GET /v1/runs` without a task lists one project's
--    runs newest first (ql_private.project_runs_page), one backward range scan
--    per state like runs_task_state_seq does for a task — bounded by the page
--    whatever other projects hold.
CREATE INDEX runs_project_state_seq ON ql_private.runs (project_id, state, queue_seq);
