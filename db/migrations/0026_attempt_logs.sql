-- 0026 live logs (SPEC §15): an attempt's combined output, streamed by its
-- worker while the command runs.
--
-- 1. ql_private.attempt_logs: one header row per attempt that sent any log
--    (written by the first ql.append_log of a started lease): stored_bytes =
--    the length in bytes of the UTF-8 log stored so far (the only offset an
--    append is accepted at), limit_bytes = the cap pinned on the attempt's
--    lease at its claim (below), truncated = bytes past the cap were dropped.
--    attempt_id references the attempt ON DELETE CASCADE: a log goes with its
--    attempt, so pruning a run (ql.prune_runs, SPEC §9.6) removes its log.
--    run_id is the attempt's run (readers find a run's logs without a join).
-- 2. ql_private.attempt_log_chunks: the log itself, one row per accepted
--    chunk, keyed by (attempt_id, start_byte). An append inserts one row and
--    never rewrites earlier bytes: one growing bytea value would be copied
--    (and re-TOASTed) whole on every append, O(n^2) over a 64 MiB log. The
--    chunks reference their header ON DELETE CASCADE; the primary key is the
--    index every read and the cascade use. content is never empty.
-- 3. tasks.log_limit_bytes: the task's `logLimitBytes` (SPEC §15.2; default
--    4 MiB, 1 KiB - 64 MiB; ql.configure_task). run_leases.log_limit_bytes:
--    the task's value when the claim wrote the lease
--    (ql_private.claim_candidate), like lease_ttl_seconds (0016): a task
--    configured since does not reach an attempt already claimed. Existing
--    leases get the default (what they would have had), as do rows written by
--    a tool that predates the column.
-- 4. ql.configure_task gains a trailing p_log_limit_bytes integer (DEFAULT
--    NULL): a new signature, so the old one is dropped here by its exact
--    signature and the function file (re-applied right after the migrations,
--    in this same transaction) creates the new one with its grant and comment.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- 1, 2. The log tables.
CREATE TABLE ql_private.attempt_logs (
    attempt_id    uuid PRIMARY KEY REFERENCES ql_private.attempts (id) ON DELETE CASCADE,
    run_id        uuid NOT NULL,
    stored_bytes  bigint NOT NULL DEFAULT 0 CHECK (stored_bytes BETWEEN 0 AND limit_bytes),
    limit_bytes   integer NOT NULL CHECK (limit_bytes BETWEEN 1024 AND 67108864),
    truncated     boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX attempt_logs_run ON ql_private.attempt_logs (run_id);

CREATE TABLE ql_private.attempt_log_chunks (
    attempt_id  uuid NOT NULL REFERENCES ql_private.attempt_logs (attempt_id) ON DELETE CASCADE,
    start_byte  bigint NOT NULL CHECK (start_byte >= 0),
    content     bytea NOT NULL CHECK (octet_length(content) BETWEEN 1 AND 65536),
    PRIMARY KEY (attempt_id, start_byte)
);

-- 3. The per-task cap and its pin on the lease.
ALTER TABLE ql_private.tasks ADD COLUMN log_limit_bytes integer NOT NULL DEFAULT 4194304
    CONSTRAINT tasks_log_limit_bytes_check CHECK (log_limit_bytes BETWEEN 1024 AND 67108864);
ALTER TABLE ql_private.run_leases ADD COLUMN log_limit_bytes integer NOT NULL DEFAULT 4194304
    CONSTRAINT run_leases_log_limit_bytes_check CHECK (log_limit_bytes BETWEEN 1024 AND 67108864);

-- 4. ql.configure_task(text, integer, integer, integer, integer, boolean, integer)
--    replaces the six-argument one (IF EXISTS: on a fresh database the
--    functions are created after the migrations).
DROP FUNCTION IF EXISTS ql.configure_task(text, integer, integer, integer, integer, boolean);
