-- 0016 pinned task settings, bounded bulk cancel.
--
-- 1. Task settings apply to attempts claimed afterwards (SPEC §9.1), never to
--    one already under way: what a live attempt runs under is pinned on its
--    own rows when they are written, and every reader reads the pin.
--    * run_leases.lease_ttl_seconds: the task's lease TTL when the claim wrote
--      the lease (ql_private.claim_candidate); the starting ACK and every
--      heartbeat extend the lease by it (ql_private.lease_open reads it).
--    * attempts.max_attempts, retry_base_ms, retry_cap_ms: the task's retry
--      policy when the attempt was created (ql.enqueue_runs, ql.retry_run,
--      ql_private.apply_retry); the retry policy decides on the ended
--      attempt's own values (ql_private.apply_retry).
--    Existing rows are backfilled from their task's current settings (what
--    they would have read until now), then the columns are NOT NULL: a writer
--    that forgets a pin fails instead of running under NULL.
-- 2. ql.cancel_runs gains a trailing p_wait_ms integer (DEFAULT 5000): it waits,
--    bounded, for runs another transaction holds and lists what it could not
--    cancel (SPEC §9.5). A new signature, so the old one is dropped here by its
--    exact signature and the function file (re-applied right after the
--    migrations, in this same transaction) creates the new one with its grant
--    and comment.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- 1. Pinned settings.
ALTER TABLE ql_private.run_leases ADD COLUMN lease_ttl_seconds integer;
UPDATE ql_private.run_leases l
   SET lease_ttl_seconds = t.lease_ttl_seconds
  FROM ql_private.runs r
  JOIN ql_private.tasks t ON t.id = r.task_id
 WHERE r.id = l.run_id;
ALTER TABLE ql_private.run_leases ALTER COLUMN lease_ttl_seconds SET NOT NULL;
ALTER TABLE ql_private.run_leases ADD CONSTRAINT run_leases_lease_ttl_seconds_check
    CHECK (lease_ttl_seconds BETWEEN 5 AND 86400);

ALTER TABLE ql_private.attempts
    ADD COLUMN max_attempts integer,
    ADD COLUMN retry_base_ms integer,
    ADD COLUMN retry_cap_ms integer;
UPDATE ql_private.attempts a
   SET max_attempts = t.max_attempts, retry_base_ms = t.retry_base_ms,
       retry_cap_ms = t.retry_cap_ms
  FROM ql_private.runs r
  JOIN ql_private.tasks t ON t.id = r.task_id
 WHERE r.id = a.run_id;
ALTER TABLE ql_private.attempts
    ALTER COLUMN max_attempts SET NOT NULL,
    ALTER COLUMN retry_base_ms SET NOT NULL,
    ALTER COLUMN retry_cap_ms SET NOT NULL,
    ADD CONSTRAINT attempts_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 100),
    ADD CONSTRAINT attempts_retry_base_ms_check CHECK (retry_base_ms BETWEEN 0 AND 3600000),
    ADD CONSTRAINT attempts_retry_cap_ms_check CHECK (retry_cap_ms BETWEEN 0 AND 86400000);

-- 2. ql.cancel_runs(text, text, integer) replaces ql.cancel_runs(text, text)
--    (IF EXISTS: on a fresh database the functions are created after the
--    migrations).
DROP FUNCTION IF EXISTS ql.cancel_runs(text, text);
