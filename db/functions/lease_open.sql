-- ql_private.lease_open(p_offer_id, p_worker_id, p_session_id, p_generation,
--                       p_token_digest, p_lock DEFAULT NULL)
--   -> (lease, attempt, run, category)
--
-- Purpose: the opening every lease lifecycle call shares once it has parsed and
--   authenticated its caller (ql.ack_lease, ql.heartbeat_lease,
--   ql.complete_lease; SPEC §7): find the lease by offer id, take the row locks
--   the call's change needs in the one order below, and read the lease, its
--   attempt, its run and the fence verdict in ONE snapshot taken after those
--   locks (ql_private.lease_state). The caller then decides on what it got:
--   answer a conflict or an exact replay, raise an illegal transition, or apply
--   its change. Callers read twice: first with p_lock NULL (replays, conflicts
--   and illegal transitions are answered without a lock or a write: a row lock
--   writes WAL), then, only when a change is due, with the lock the change needs,
--   and decide again on the locked rows.
-- Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest:
--   the caller's proof, already parsed (and the worker authenticated); p_lock:
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
-- Fences: ql_private.lease_fence via lease_state (offer_foreign, token_mismatch
--   by constant-time compare, session_replaced, lease_expired, lease_terminal,
--   attempt_changed, revision_drift). An unknown offer id answers one row with
--   NULL lease, attempt and run and category `offer_foreign`: exactly what
--   another worker's offer answers, so a caller learns nothing about offers that
--   are not its own.
-- Writes: none (row locks only, when p_lock is given).
-- Locks: as p_lock says; nothing with p_lock NULL.
-- Idempotency: read-only.
-- Errors: QL001 p_lock not NULL, 'lease' or 'attempt_run_lease' (a caller bug).
-- Caller: ql.ack_lease, ql.complete_lease ('attempt_run_lease'),
--   ql.heartbeat_lease ('lease').
CREATE OR REPLACE FUNCTION ql_private.lease_open(
    p_offer_id uuid,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_token_digest bytea,
    p_lock text DEFAULT NULL
)
RETURNS TABLE (
    lease ql_private.run_leases,
    attempt ql_private.attempts,
    run ql_private.runs,
    category text
)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids record;
BEGIN
    IF p_lock IS NOT NULL THEN
        IF p_lock NOT IN ('lease', 'attempt_run_lease') THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = 'lock must be NULL, lease or attempt_run_lease';
        END IF;
        -- A lease row's id, attempt and run never change once written, so they
        -- are safe to read before locking.
        SELECT rl.id, rl.attempt_id, rl.run_id INTO v_ids
          FROM ql_private.run_leases rl WHERE rl.offer_id = p_offer_id;
        IF FOUND THEN
            IF p_lock = 'attempt_run_lease' THEN
                PERFORM 1 FROM ql_private.attempts aa WHERE aa.id = v_ids.attempt_id FOR UPDATE;
                PERFORM 1 FROM ql_private.runs rr WHERE rr.id = v_ids.run_id FOR NO KEY UPDATE;
                PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = v_ids.id FOR UPDATE;
            ELSE
                PERFORM 1 FROM ql_private.run_leases rl WHERE rl.id = v_ids.id FOR NO KEY UPDATE;
            END IF;
        END IF;
    END IF;
    -- One statement, so one snapshot (taken after the locks above).
    RETURN QUERY
    SELECT * FROM ql_private.lease_state(p_offer_id, p_worker_id, p_session_id, p_generation,
                                         p_token_digest);
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::ql_private.run_leases, NULL::ql_private.attempts,
                            NULL::ql_private.runs, 'offer_foreign'::text;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, text) FROM PUBLIC;
COMMENT ON FUNCTION ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, text) IS
'Shared opening of the lease lifecycle calls (ack, heartbeat, complete), after authentication. Inputs: p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest (the caller''s proof), p_lock NULL | lease | attempt_run_lease. Locks in the one order attempt FOR UPDATE -> run FOR NO KEY UPDATE -> lease FOR UPDATE (attempt_run_lease; the order of ql.cancel_run and release_unstarted_leases, so none of them can deadlock), or the lease FOR NO KEY UPDATE only (lease), then reads lease, attempt, run and the lease_fence category in one snapshot; an unknown offer id answers one row with category offer_foreign. Fences: lease_fence. Writes: none (row locks only). Errors: QL001 unknown lock mode. Caller: ql.ack_lease, ql.heartbeat_lease, ql.complete_lease.';
