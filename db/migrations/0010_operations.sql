-- 0010 operating it for months (SPEC §9): task settings, scheduled and
-- idempotent enqueue, results, inspection, operator actions, retention.
--
-- 1. tasks.lease_ttl_seconds may be up to 24 h (CHECK 5..86400). The other
--    policy CHECKs stay as permissive as they were; ql.configure_task enforces
--    the documented §9.1 bounds.
-- 2. runs.due_at (NULL = ready): a run scheduled for later (enqueue with a
--    delay / not-before, or a retry in backoff) is kept OUT of the candidate
--    keysets until it is due, so a pull never walks a head of future runs row by
--    row. runs_candidate_keyset and runs_class_keyset are rebuilt with
--    `AND due_at IS NULL` (same names, so plans and docs keep naming them);
--    runs_due holds the scheduled queued runs by due time: candidate_page reads
--    the due ones from it (bounded, like expired offers), the sweeper promotes
--    them (due_at := NULL) into the keysets in batches, idle_probe takes its
--    wake-up time from it. Existing queued runs still in backoff are moved
--    there (due_at := their attempt's not_before).
--    runs.idempotency_key: 1..128 chars, unique per task while the run row is
--    retained (runs_idempotency_key, partial); it goes away with the run.
-- 3. Inspection (ql.list_runs newest first, one index range per state, merged):
--    runs_state_seq (state, queue_seq) and runs_task_state_seq (task_id, state,
--    queue_seq); the latter replaces runs_task_state (task_id, state), which it
--    covers (status_snapshot's per-task counts).
--    Retention (ql.prune_runs): runs_terminal_finished (finished_at) over
--    terminal runs only.
-- 4. attempts.result: the completion's result object ({exitCode?, durationMs,
--    outputTail, outputBytes}, validated by ql.complete_lease), NULL or an
--    object of at most 12 KiB (pg_column_size: the stored jsonb, not its
--    escaped text form).
-- 5. workers.disabled_at: set by ql.disable_worker; ql_private.authenticate then
--    refuses every credential of the worker (worker_disabled, 403).
-- 6. events: operator actions on workers and sessions are events too
--    (`worker.disabled`, `session.closed`, …): the type CHECK allows the
--    `worker.` and `session.` prefixes, and events.worker_id names the worker
--    (NULL for run facts; run_id is NULL for worker/session facts).
-- 7. Retention deletes terminal runs with their attempts, leases and events
--    (ql.prune_runs), in batches that must stay index-driven. Three foreign
--    keys would make every delete run a referencing-side check that no index
--    serves — a sequential scan of a queue table per deleted row:
--      runs.current_attempt_id -> attempts   (nothing indexes current_attempt_id)
--      run_leases.run_id -> runs             (leases are indexed by attempt)
--      events.attempt_id -> attempts         (events are indexed by run)
--    Indexing those columns instead would add an index write to every claim
--    (lease + event) and to every run state change, for a check of references
--    that only SECURITY DEFINER functions write, each from rows they hold
--    locked: the lease's run is its attempt's run (run_leases.attempt_id ->
--    attempts and attempts.run_id -> runs stay), an event's attempt is one of
--    its run's (events.run_id -> runs stays), a run's current attempt is
--    inserted with it. So, as 0004 did for the revision reference, the three
--    are dropped; the claim and the enqueue lose an FK check too.
-- 8. ql.enqueue_runs and ql.complete_lease gain trailing parameters with
--    defaults (p_not_before_ms, p_delay_ms, p_key; p_result): a new signature,
--    so the old ones are dropped here and the function files (re-applied right
--    after the migrations, in this same transaction) create the new ones with
--    their grants. Named-notation callers of the old parameters are unaffected.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- 1. Task settings
ALTER TABLE ql_private.tasks DROP CONSTRAINT tasks_lease_ttl_seconds_check;
ALTER TABLE ql_private.tasks ADD CONSTRAINT tasks_lease_ttl_seconds_check
    CHECK (lease_ttl_seconds BETWEEN 5 AND 86400);

-- 2. Scheduled and idempotent runs
ALTER TABLE ql_private.runs
    ADD COLUMN due_at timestamptz,
    ADD COLUMN idempotency_key text
        CONSTRAINT runs_idempotency_key_check
        CHECK (idempotency_key IS NULL OR char_length(idempotency_key) BETWEEN 1 AND 128);

UPDATE ql_private.runs r
   SET due_at = a.not_before
  FROM ql_private.attempts a
 WHERE a.id = r.current_attempt_id
   AND r.state = 'queued' AND a.state = 'claimed'
   AND a.not_before > clock_timestamp();

DROP INDEX ql_private.runs_candidate_keyset;
CREATE INDEX runs_candidate_keyset
    ON ql_private.runs ((-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NULL;

DROP INDEX ql_private.runs_class_keyset;
CREATE INDEX runs_class_keyset
    ON ql_private.runs (placement_class, (-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NULL;

CREATE INDEX runs_due ON ql_private.runs (due_at)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NOT NULL;

CREATE UNIQUE INDEX runs_idempotency_key ON ql_private.runs (task_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- 3. Inspection and retention
CREATE INDEX runs_state_seq ON ql_private.runs (state, queue_seq);
CREATE INDEX runs_task_state_seq ON ql_private.runs (task_id, state, queue_seq);
DROP INDEX ql_private.runs_task_state;
CREATE INDEX runs_terminal_finished ON ql_private.runs (finished_at)
    WHERE state IN ('succeeded', 'failed', 'cancelled');

-- 4. Results
ALTER TABLE ql_private.attempts
    ADD COLUMN result jsonb
        CONSTRAINT attempts_result_check
        CHECK (result IS NULL
               OR (jsonb_typeof(result) = 'object' AND pg_column_size(result) <= 12288));

-- 5. Disabled workers
ALTER TABLE ql_private.workers ADD COLUMN disabled_at timestamptz;

-- 6. Worker and session events
ALTER TABLE ql_private.events DROP CONSTRAINT events_type_check;
ALTER TABLE ql_private.events ADD CONSTRAINT events_type_check
    CHECK (type ~ '^(run|attempt|lease|worker|session)\.[a-z_]+$');
ALTER TABLE ql_private.events ADD COLUMN worker_id uuid REFERENCES ql_private.workers(id);

-- 7. Foreign keys no index could serve on delete
ALTER TABLE ql_private.runs DROP CONSTRAINT runs_current_attempt_fk;
ALTER TABLE ql_private.run_leases DROP CONSTRAINT run_leases_run_id_fkey;
ALTER TABLE ql_private.events DROP CONSTRAINT events_attempt_id_fkey;

-- 8. Signatures that gain trailing parameters
DROP FUNCTION IF EXISTS ql.enqueue_runs(text, integer, integer);
DROP FUNCTION IF EXISTS ql.complete_lease(
    text, bytea, text, text, bigint, text, bytea, text, integer, text);
