-- ql_private.lease_prelude(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                          p_generation, p_offer_id, p_token_digest, p_lease_version,
--                          p_action, p_change, p_lock DEFAULT NULL, p_seen DEFAULT NULL,
--                          p_outcome DEFAULT NULL, p_exit_code DEFAULT NULL,
--                          p_reason DEFAULT NULL, p_result DEFAULT NULL)
--   -> (answer, lease, attempt, run, ttl)
--
-- Purpose: THE common start of the lease endpoints (ql.ack_lease,
--   ql.heartbeat_lease, ql.complete_lease, ql.append_log, ql.lease_secrets),
--   once each has parsed and checked its own inputs: authenticate the
--   credential, open the lease (ql_private.lease_open: find it by offer id,
--   take the row locks p_lock names, read lease, attempt, run and TTL in one
--   snapshot, decide with ql_private.lease_verdict and the lease version
--   fence) and answer what ends the call without a change. `answer` NULL: the
--   caller may go on with the rows (its own illegal-transition checks, then its
--   change); otherwise the caller returns `answer` as it is:
--   * the denial envelope of ql_private.authenticate;
--   * {"status":"conflict","category":<lease_open's category>};
--   * a replay (the request repeated after its answer was lost):
--     {"status":"idempotent","lease":<ql_private.lease_projection>} when the
--     change that made the current version is the one asked for, with the same
--     details for `start_failed` (the attempt's reason = p_reason) and
--     `complete` (release reason completed | cancelled as p_outcome implies,
--     attempt state = p_outcome, exit code, reason, result = p_exit_code,
--     p_reason, p_result: IS NOT DISTINCT FROM); else
--     {"status":"conflict","category":"lease_terminal"}; for p_change `read`
--     {"status":"conflict","category":"stale_lease_version"}.
--   The callers that change something read twice, as lease_open says: first
--   with p_lock NULL and p_seen NULL (authenticates, answers replays and
--   conflicts without a lock or a write), then, only when a change is due,
--   with the lock and p_seen = the lease the first read answered, and decide
--   again on the locked rows. Model: ql_private.lease_verdict +
--   ql_private.lease_open (decide unlocked, lock in one stated order, decide
--   again).
-- Inputs: p_credential_id, p_secret_digest: the credential (checked by
--   ql_private.authenticate with p_action, e.g. `lease.ack`) — only when
--   p_seen is NULL: a call's first read; the locked re-read (p_seen given: the
--   lease that first read answered) does not authenticate again.
--   p_worker_id, p_session_id, p_generation, p_offer_id, p_token_digest,
--   p_lease_version: the caller's proof, already parsed and range-checked.
--   p_change: lease_open's change (`starting` | `running` | `start_failed` |
--   `heartbeat` | `complete` | `log`), or `read` (ql.lease_secrets: opened as
--   `heartbeat`, so the version must be exactly the current one, and a
--   heartbeat's retry is no delivery either: stale_lease_version).
--   p_lock, p_seen: as ql_private.lease_open. p_outcome, p_exit_code,
--   p_reason, p_result: the details a replay must match (see above); ignored
--   for the other changes.
-- Lock order: ql_private.lease_open's, unchanged: nothing with p_lock NULL;
--   `attempt_run_lease` attempt FOR UPDATE -> run FOR NO KEY UPDATE -> lease
--   FOR UPDATE (the order of ql.cancel_run and release_unstarted_leases, so
--   none of them can deadlock); `lease` the lease FOR NO KEY UPDATE only;
--   `attempt_lease_share` attempt FOR KEY SHARE -> lease FOR KEY SHARE
--   (docs/LIFECYCLE.md). Nothing else is locked here.
-- Writes: one security_audit row when the credential is denied
--   (ql_private.authenticate); nothing else (row locks only).
-- Idempotency: read-only but for the denial's audit row.
-- Errors: QL001 p_change not one of the seven, and lease_open's (unknown lock
--   mode, NULL lease version, p_seen of another offer: caller bugs);
--   ql_private.authenticate's.
-- Caller: ql.ack_lease, ql.heartbeat_lease, ql.complete_lease, ql.append_log,
--   ql.lease_secrets.
CREATE OR REPLACE FUNCTION ql_private.lease_prelude(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id uuid,
    p_session_id uuid,
    p_generation bigint,
    p_offer_id uuid,
    p_token_digest bytea,
    p_lease_version bigint,
    p_action text,
    p_change text,
    p_lock text DEFAULT NULL,
    p_seen ql_private.run_leases DEFAULT NULL,
    p_outcome text DEFAULT NULL,
    p_exit_code integer DEFAULT NULL,
    p_reason text DEFAULT NULL,
    p_result jsonb DEFAULT NULL,
    OUT answer jsonb,
    OUT lease ql_private.run_leases,
    OUT attempt ql_private.attempts,
    OUT run ql_private.runs,
    OUT ttl integer
)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_open record;
BEGIN
    IF p_change IS NULL OR p_change NOT IN ('starting', 'running', 'start_failed', 'heartbeat',
                                            'complete', 'log', 'read') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'change must be starting, running, start_failed, heartbeat, complete, log or read';
    END IF;
    IF p_seen.id IS NULL THEN
        answer := ql_private.authenticate(p_credential_id, p_secret_digest, p_worker_id,
                                          p_action);
        IF answer IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    v_open := ql_private.lease_open(
        p_offer_id, p_worker_id, p_session_id, p_generation, p_token_digest, p_lease_version,
        CASE p_change WHEN 'read' THEN 'heartbeat' ELSE p_change END, p_lock, p_seen);
    lease := v_open.lease;
    attempt := v_open.attempt;
    run := v_open.run;
    ttl := v_open.ttl;
    IF v_open.category IS NULL THEN
        RETURN;
    ELSIF v_open.category <> 'replay' THEN
        answer := jsonb_build_object('status', 'conflict', 'category', v_open.category);
    ELSIF p_change = 'read' THEN
        answer := jsonb_build_object('status', 'conflict', 'category', 'stale_lease_version');
    ELSIF (p_change = 'start_failed' AND attempt.reason IS DISTINCT FROM p_reason)
          OR (p_change = 'complete'
              AND (lease.release_reason = CASE p_outcome WHEN 'cancelled' THEN 'cancelled'
                                                         ELSE 'completed' END
                   AND attempt.state = p_outcome
                   AND attempt.exit_code IS NOT DISTINCT FROM p_exit_code
                   AND attempt.reason IS NOT DISTINCT FROM p_reason
                   AND attempt.result IS NOT DISTINCT FROM p_result) IS NOT TRUE) THEN
        -- The change that made the current version, but not with these details.
        answer := jsonb_build_object('status', 'conflict', 'category', 'lease_terminal');
    ELSE
        answer := jsonb_build_object('status', 'idempotent',
                                     'lease', ql_private.lease_projection(lease.id));
    END IF;
END
$$;
REVOKE ALL ON FUNCTION ql_private.lease_prelude(
    text, bytea, uuid, uuid, bigint, uuid, bytea, bigint, text, text, text,
    ql_private.run_leases, text, integer, text, jsonb) FROM PUBLIC;
