-- ql_private.claim_candidate(session, run_ids, scores, offer_id, token_digest)
--   -> (offer jsonb, consumed integer, locked boolean)
--
-- Purpose: the atomic claim of SPEC §3.3 step 3. `run_ids` are passing
--   candidates in claim order (priority DESC, placementScore DESC, queue order),
--   `scores` their placement scores. ONE statement locks the first of them whose
--   run and current attempt can both be locked — FOR NO KEY UPDATE SKIP LOCKED on
--   both rows, attempt then run (the one lifecycle order), so a row a competing
--   replica holds is skipped, never waited for —
--   and that still passes every candidate fence on the locked rows, by
--   clock_timestamp(): run queued|dispatching, runtime-owned, not
--   cancel-requested, due (runs.due_at NULL or passed, SPEC §9.2); attempt
--   current, `claimed`, executor remote_worker, not_before passed; the session's
--   worker holds a grant for the run's pool (workers.all_pools or a
--   worker_pool_grants row, SPEC §13.1) — read in the same statement, while the
--   caller holds the session row, which ql.revoke_pool waits for after removing
--   a grant. A `dispatching` run is only claimable when its live lease
--   expired unstarted: that lease is released here (`expired`); when it did not
--   expire the race was lost. A `queued` run has no live lease (every release
--   path re-queues; run_leases_one_live would refuse a second one).
-- Writes: one run_leases row (lease_generation = previous + 1; the task's lease
--   TTL pinned on it, lease_ttl_seconds: what the starting ACK and heartbeats of
--   this lease extend it by, whatever the task is configured to later, SPEC
--   §9.1; and its logLimitBytes, log_limit_bytes: the cap of this attempt's
--   live log, SPEC §15.2), the run -> dispatching (due_at cleared), exactly one `run.dispatched`
--   event.
-- Returns `offer` = the offer@v1 projection built from the rows in hand
--   (ql_private.offer_json, the same function a replay uses), NULL when nothing
--   was claimed; `consumed` = how many of run_ids are done with (the position of
--   the locked one, or all of them): those before it were passed over — locked
--   by a competing claim or no longer candidates — and count as races; the
--   locked one is the claim attempt (`locked`; a race too when its fences
--   failed).
-- The session row must already be locked and re-verified by the caller, and the
--   offer id serialized by ql.pull_offer's advisory lock (so offer_id UNIQUE can
--   only fire on a bug, and then aborts the pull rather than issue a second lease).
-- Planning: bitmap scans are off for this function. Planned on small-table
--   statistics (a fresh install: and the generic plan then stays with the
--   pooled connection), the join of the ids to runs became one BitmapOr over
--   runs_state_seq (state queued OR dispatching) — a read of every queued run,
--   scheduled ones included — instead of a primary-key probe per id;
--   tests/sql/pull_offer.sql counts the runs rows a pull fetches. Without
--   bitmaps the OR has no index path, so the probes are the plan. (Set here,
--   not on ql.pull_offer: the due-run source of candidate_page needs no such
--   help and measured worse with it.)
-- Caller: ql_private.claim_page.
-- SQLSTATEs: none raised.
CREATE OR REPLACE FUNCTION ql_private.claim_candidate(
    s ql_private.worker_sessions,
    p_run_ids uuid[],
    p_scores integer[],
    p_offer_id uuid,
    p_token_digest bytea,
    OUT offer jsonb,
    OUT consumed integer,
    OUT locked boolean
)
LANGUAGE plpgsql VOLATILE
SET enable_bitmapscan = off
AS $$
DECLARE
    now_ts timestamptz := clock_timestamp();
    pick record;
    l ql_private.run_leases;
    r ql_private.runs;
    a ql_private.attempts;
    score integer;
BEGIN
    SELECT p.ord, cr AS run, ca AS attempt, cer AS revision, ct.lease_ttl_seconds AS ttl,
           ct.log_limit_bytes AS log_limit,
           (SELECT max(g.lease_generation) FROM ql_private.run_leases g
             WHERE g.attempt_id = ca.id) AS last_generation
      INTO pick
      FROM unnest(p_run_ids) WITH ORDINALITY AS p(run_id, ord)
      JOIN ql_private.runs cr ON cr.id = p.run_id
      JOIN ql_private.attempts ca ON ca.id = cr.current_attempt_id
      JOIN ql_private.execution_revisions cer ON cer.id = cr.execution_revision_id
      JOIN ql_private.tasks ct ON ct.id = cr.task_id
     WHERE cr.runtime_owned AND NOT cr.cancel_requested AND ca.state = 'claimed'
       AND ca.executor = 'remote_worker' AND ca.not_before <= now_ts
       AND (cr.due_at IS NULL OR cr.due_at <= now_ts)
       -- The pool grant (SPEC §13.1), on the locked run's pool: the worker holds
       -- the all-pools grant or one for this pool. ql.revoke_pool removes the
       -- grant before it waits for the session row this pull holds, so a claim
       -- either sees the grant gone or is seen (and released) by the revoke.
       AND (EXISTS (SELECT 1 FROM ql_private.workers gw
                     WHERE gw.id = s.worker_id AND gw.all_pools)
            OR EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                        WHERE g.worker_id = s.worker_id AND g.pool_id = cr.pool_id))
       -- A run claimed by someone else since the scan is `dispatching` with a live
       -- offer: passed over here, without taking its lock (which would write WAL).
       AND (cr.state = 'queued'
            OR (cr.state = 'dispatching' AND EXISTS (
                    SELECT 1 FROM ql_private.run_leases el
                     WHERE el.attempt_id = ca.id AND el.released_at IS NULL
                       AND el.started_at IS NULL AND el.expires_at <= now_ts)))
     ORDER BY p.ord
     LIMIT 1
       FOR NO KEY UPDATE OF ca, cr SKIP LOCKED;  -- attempt, then run (LIFECYCLE.md "Locks")
    locked := FOUND;
    IF NOT locked THEN
        consumed := cardinality(p_run_ids);
        RETURN;
    END IF;
    consumed := pick.ord;
    r := pick.run;
    a := pick.attempt;
    score := p_scores[pick.ord];
    IF r.state = 'dispatching' THEN
        UPDATE ql_private.run_leases
           SET released_at = now_ts, release_reason = 'expired', updated_at = now_ts
         WHERE attempt_id = a.id AND released_at IS NULL
           AND started_at IS NULL AND expires_at <= now_ts;
        IF NOT FOUND THEN
            RETURN;  -- its offer is live (claimed since our scan): race lost
        END IF;
    END IF;
    INSERT INTO ql_private.run_leases (
        attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
        lease_version, offer_id, token_digest, execution_revision_id, content_digest,
        placement_score, claimed_at, expires_at, lease_ttl_seconds, log_limit_bytes,
        updated_at)
    VALUES (
        a.id, r.id, s.worker_id, s.session_id, s.generation,
        coalesce(pick.last_generation, 0) + 1, 1, p_offer_id, p_token_digest,
        r.execution_revision_id, (pick.revision).content_digest, score,
        now_ts, now_ts + make_interval(secs => pick.ttl), pick.ttl, pick.log_limit, now_ts)
    RETURNING * INTO l;
    IF r.state = 'queued' THEN
        -- A scheduled run that came due leaves runs_due here (due_at := NULL):
        -- a claimed run is never "scheduled".
        UPDATE ql_private.runs SET state = 'dispatching', due_at = NULL, updated_at = now_ts
         WHERE id = r.id;
    END IF;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.dispatched', r.id, a.id, jsonb_build_object(
        'offerId', p_offer_id,
        'workerId', s.worker_id,
        'sessionId', s.session_id,
        'sessionGeneration', s.generation,
        'leaseGeneration', l.lease_generation,
        'placementScore', score,
        'contentDigest', l.content_digest));
    offer := ql_private.offer_json(l, r, pick.revision);
END
$$;
REVOKE ALL ON FUNCTION ql_private.claim_candidate(
    ql_private.worker_sessions, uuid[], integer[], uuid, bytea) FROM PUBLIC;
