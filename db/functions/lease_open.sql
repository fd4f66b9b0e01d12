-- ql_private.lease_open(p_offer_id, p_worker_id, p_session_id, p_generation,
--                       p_token_digest, p_lease_version, p_change, p_lock DEFAULT NULL,
--                       p_seen DEFAULT NULL)
--   -> (lease, attempt, run, ttl, category)
--
-- Purpose: the opening every lease lifecycle call shares once it has parsed and
--   authenticated its caller (ql.ack_lease, ql.heartbeat_lease,
--   ql.complete_lease; SPEC §7; ql.append_log, SPEC §15.1): find the lease by offer id, take the row locks
--   the call's change needs in the one order below, and read the lease, its
--   attempt, its run, the lease TTL pinned on the lease by its claim
--   (run_leases.lease_ttl_seconds: what a starting ACK or a heartbeat extends
--   the lease by; a later task configure does not reach it, SPEC §9.1), its
--   session, its revision's digest and so the fence
--   verdict (ql_private.lease_verdict) in ONE statement, so one snapshot, taken
--   after those locks. The caller then decides on what it got:
--   answer a conflict or an exact replay, raise an illegal transition, or apply
--   its change. The lease version is fenced here too, once, for all three
--   callers (SPEC §7, see "Version fence" below). Callers read twice: first
--   with p_lock NULL (replays, conflicts and illegal transitions are answered
--   without a lock or a write: a row lock writes WAL), then, only when a change
--   is due, with the lock the change needs, and decide again on the locked rows.
-- Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest:
--   the caller's proof, already parsed (and the worker authenticated);
--   p_lease_version: the version the worker last saw (NOT NULL, >= 1: the
--   callers check it before authenticating); p_change: the change the request
--   asks for, `starting` | `running` | `start_failed` | `heartbeat` |
--   `complete` | `log` (an append to the live log: it never bumps the
--   version, so no request is ever a `log` replay of one); p_lock:
--     NULL                 no row lock (the first, deciding read);
--     'lease'              the lease row FOR NO KEY UPDATE only: a lease
--                          heartbeat changes the lease alone, and every change of a
--                          started lease's attempt (completion, start failure,
--                          loss) also releases the lease under the lease's lock,
--                          so no such change can slip in under the heartbeat; the
--                          run is only read (its cancel flag is reported as found);
--     'attempt_run_lease'  attempt FOR UPDATE, then run FOR NO KEY UPDATE, then
--                          lease FOR UPDATE: an ACK or a completion changes all
--                          three.
--     'attempt_lease_share' attempt FOR KEY SHARE, then lease FOR KEY SHARE: a
--                          log append changes neither, but must not overlap
--                          any change of the attempt (a completion, a start
--                          failure, a loss: each takes the attempt FOR UPDATE
--                          and releases the lease FOR UPDATE), so a chunk is
--                          stored either before the attempt ends or not at
--                          all. KEY SHARE does not conflict with a heartbeat
--                          (the lease's FOR NO KEY UPDATE) nor with another
--                          append; the appends of one attempt serialize on its
--                          log header (ql.append_log).
--   p_seen: the lease row the caller's first (unlocked) read answered; its id,
--   attempt and run never change once written, so they name the rows to lock
--   without reading them again. NULL: they are read by the offer id first.
-- Lock order (why attempt -> run -> lease): it is the order of every other
--   writer that waits for these rows: ql.cancel_run and
--   ql_private.release_unstarted_leases (session replaced or closed) take the
--   attempt, then the run, then the lease. An ACK or completion taking the lease
--   first and then waiting for the attempt, while a cancel holding the attempt
--   waits for the lease, would deadlock; in one order they queue instead. A
--   claim (ql_private.claim_candidate) takes run and attempt with SKIP LOCKED,
--   never waiting for them, and only then an expired lease; the sweeper
--   (ql.sweep_leases) locks everything with SKIP LOCKED and never waits: neither
--   can close a cycle with this order. The re-read after locking is what
--   prevents the lost update: a sweeper marking the attempt lost, a cancel or a
--   concurrent ACK committed between the first read and the lock is seen, and
--   the caller decides again on it.
-- Version fence (after lease_verdict, on the same snapshot; only when the fences
--   answered NULL or lease_terminal): every applied change bumps lease_version
--   by one, releases by a completion or start failure included, so the version
--   a request carries says which change it follows.
--   * p_lease_version = lease_version: the category stays (NULL: the caller may
--     apply its change; lease_terminal: nothing is left to change).
--   * p_lease_version = lease_version - 1 and the change that produced the
--     current version is p_change: category `replay` (the request repeated
--     after its answer was lost; the caller answers the current lease, writes
--     nothing, and for start_failed/complete first checks the details it made
--     were the same ones). The last change is read off the rows, so it needs no
--     column of its own: released `completed`/`cancelled` -> complete; released
--     `start_failed` -> start_failed; heartbeat_version = lease_version ->
--     heartbeat; started and the attempt starting | running -> that ACK (while
--     live, a started lease only ever changes by these four, so the first one
--     that matches is the last one made). Version 1 is the claim's own.
--   * anything else: `stale_lease_version` on a live lease; a released lease
--     keeps `lease_terminal` (the more useful answer).
--   Why here: a repeated heartbeat must never extend a lease twice, and an ACK
--   or completion the worker decided on an older lease must not be applied to
--   a newer one; one rule for the three callers keeps them in step.
-- Why one statement (not one per row plus the fences' own four): measured per
--   ACK, the two reads were a third of the call (docs/BENCHMARKS.md).
-- Fences: ql_private.lease_verdict with the lifecycle rules (offer_foreign,
--   token_mismatch by constant-time compare, session_replaced, lease_expired,
--   lease_terminal, attempt_changed, revision_drift; a live lease past
--   expires_at or one released `lost` -> lease_expired). An unknown offer id
--   answers one row with NULL lease, attempt and run and category
--   `offer_foreign`: exactly what another worker's offer answers, so a caller
--   learns nothing about offers that are not its own.
-- Writes: none (row locks only, when p_lock is given).
-- Locks: as p_lock says; nothing with p_lock NULL.
-- Idempotency: read-only.
-- Errors: QL001 p_lock not NULL, 'lease', 'attempt_run_lease' or
--   'attempt_lease_share', p_change not one of the six, p_lease_version NULL, p_seen of another offer (caller bugs).
-- Caller: ql_private.lease_prelude (the start of every lease call: ack and
--   complete lock attempt_run_lease, heartbeat lease, append_log
--   attempt_lease_share, lease_secrets nothing).
CREATE OR REPLACE FUNCTION ql_private.lease_open(
    p_offer_id uuid,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea,
    p_lease_version bigint,
    p_change text,
    p_lock text DEFAULT NULL,
    p_seen ql_private.run_leases DEFAULT NULL,
    OUT lease ql_private.run_leases,
    OUT attempt ql_private.attempts,
    OUT run ql_private.runs,
    OUT ttl integer,
    OUT category text
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_ids record;
    v_row record;
    v_now timestamptz;
    v_last text;
BEGIN
    IF p_change IS NULL
       OR p_change NOT IN ('starting', 'running', 'start_failed', 'heartbeat', 'complete',
                           'log') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'change must be starting, running, start_failed, heartbeat, complete or log';
    END IF;
    IF p_lease_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion is required';
    END IF;
    IF p_lock IS NOT NULL THEN
        IF p_lock NOT IN ('lease', 'attempt_run_lease', 'attempt_lease_share') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = 'lock must be NULL, lease, attempt_run_lease or attempt_lease_share';
        END IF;
        IF p_seen.id IS NOT NULL THEN
            IF p_seen.offer_id IS DISTINCT FROM p_offer_id THEN
                RAISE EXCEPTION USING ERRCODE = 'QL001',
                    MESSAGE = 'the lease seen is not the lease of this offer id';
            END IF;
            v_ids := p_seen;
        ELSE
            SELECT rl.id, rl.attempt_id, rl.run_id INTO v_ids
              FROM ql_private.run_leases rl WHERE rl.offer_id = p_offer_id;
        END IF;
        IF v_ids.id IS NOT NULL THEN
            IF p_lock = 'attempt_run_lease' THEN
                -- One statement: its row locks are taken for each row in the
                -- order of its locking clauses (the executor's LockRows walks them
                -- in that order), so attempt -> run -> lease, as three statements
                -- would, each waited for in turn.
                PERFORM 1
                   FROM ql_private.attempts aa, ql_private.runs rr, ql_private.run_leases rl
                  WHERE aa.id = v_ids.attempt_id AND rr.id = v_ids.run_id AND rl.id = v_ids.id
                    FOR UPDATE OF aa FOR NO KEY UPDATE OF rr FOR UPDATE OF rl;
            ELSIF p_lock = 'attempt_lease_share' THEN
                PERFORM 1
                   FROM ql_private.attempts aa, ql_private.run_leases rl
                  WHERE aa.id = v_ids.attempt_id AND rl.id = v_ids.id
                    FOR KEY SHARE OF aa FOR KEY SHARE OF rl;
            ELSE
                PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = v_ids.id FOR NO KEY UPDATE;
            END IF;
        END IF;
    END IF;
    -- One statement, so one snapshot (taken after the locks above); `now` too.
    v_now := clock_timestamp();
    SELECT rl, aa, rr, rl.lease_ttl_seconds AS ttl,
           ql_private.lease_verdict(rl, ws, aa, rr, er.content_digest, p_worker_id,
                                    p_session_id, p_generation, p_token_digest, v_now, true)
               AS verdict
      INTO v_row
      FROM ql_private.run_leases rl
      JOIN ql_private.attempts aa ON aa.id = rl.attempt_id
      JOIN ql_private.runs rr ON rr.id = rl.run_id
      LEFT JOIN ql_private.worker_sessions ws ON ws.session_id = rl.session_id
      LEFT JOIN ql_private.execution_revisions er ON er.id = rr.execution_revision_id
     WHERE rl.offer_id = p_offer_id;
    IF NOT FOUND THEN
        category := 'offer_foreign';
        RETURN;
    END IF;
    lease := v_row.rl;
    attempt := v_row.aa;
    run := v_row.rr;
    ttl := v_row.ttl;
    category := v_row.verdict;
    IF (category IS NULL OR category = 'lease_terminal')
       AND p_lease_version <> lease.lease_version THEN
        v_last := CASE
            WHEN lease.release_reason IN ('completed', 'cancelled') THEN 'complete'
            WHEN lease.release_reason = 'start_failed' THEN 'start_failed'
            WHEN lease.released_at IS NOT NULL THEN NULL
            WHEN lease.heartbeat_version = lease.lease_version THEN 'heartbeat'
            WHEN lease.started_at IS NOT NULL
                 AND attempt.state IN ('starting', 'running') THEN attempt.state
        END;
        IF p_lease_version = lease.lease_version - 1 AND v_last = p_change THEN
            category := 'replay';
        ELSIF category IS NULL THEN
            category := 'stale_lease_version';
        END IF;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_open(
    uuid, uuid, uuid, bigint, bytea, bigint, text, text, ql_private.run_leases) FROM PUBLIC;
