-- 0030 every index on the claim path names the query it serves (SPEC §18.4).
--
-- A comment on each index of runs, run_leases, attempts and events: the
-- functions whose statements read through it (`Serves:`), or the rule it
-- enforces (`Rule:`), and for the indexes a pull or a lease call reads, the
-- section of docs/EXPLAIN.md whose captured plan shows it (`Plan:`).
-- tests/py/test_index_comments.py reads the catalog: an index without a
-- comment, a comment naming a function that does not exist, or a `Plan:`
-- section whose plan does not use the index fails it.
--
-- Nothing is dropped: the index scans of the whole pgTAP suite and the pull,
-- sweeper, producer, retention, admin and pool tests, attributed to the
-- function statement that made each (auto_explain), found every index read by
-- the functions named below; run_leases_one_live only by a claim of a run whose
-- offer expired unstarted. docs/EXPLAIN.md "Indexes on the claim path" lists them
-- with their columns and which updates of runs and run_leases are HOT.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- runs ---------------------------------------------------------------------

COMMENT ON INDEX ql_private.runs_pkey IS
    'Rule: a run''s identity (attempts.run_id references it). Serves: every by-id read and '
    'update of a run: the claim''s probe per candidate (ql_private.claim_candidate), the lease '
    'read (ql_private.lease_open), the expired-offer source of ql_private.candidate_page, '
    'ql.ack_lease, ql.complete_lease, ql_private.apply_retry, ql.sweep_leases, ql.cancel_run, '
    'ql.show_run. Plan: "Lease lifecycle read (ACK, heartbeat, completion)"; '
    'Plan: "The claim (ql_private.claim_candidate)".';
COMMENT ON INDEX ql_private.runs_candidate_keyset IS
    'Serves: the ready runs of a pull in keyset order (ql_private.ready_candidate_page, '
    'ql_private.candidate_page), ql.idle_probe, ql_private.ready_priorities, ql.waiting_runs, '
    'ql.queue_depth, ql.status_snapshot. Plan: "Steady-state page: ready runs only (limit 8 + 1)"; '
    'Plan: "First keyset page (limit 8 + 1)".';
COMMENT ON INDEX ql_private.runs_due IS
    'Serves: the scheduled runs that came due: the probe of ql_private.scan_and_claim, the due '
    'source of ql_private.candidate_page, the promotion in ql.sweep_leases, ql.idle_probe, '
    'ql.waiting_runs, ql.queue_depth. Plan: "A pull while a scheduled run is due".';
COMMENT ON INDEX ql_private.runs_class_keyset IS
    'Serves: the ready runs of one placement class (ql_private.class_candidate_page), whether a '
    'class has a waiting run (ql_private.matching_classes, ql_private.waiting_classes), the '
    'class-in-use check of ql.prune_fleet. Plan: "Placement-class page (the pages after a '
    'blocked head)".';
COMMENT ON INDEX ql_private.runs_class_due IS
    'Serves: the due scheduled runs of one placement class (ql_private.class_candidate_page), '
    'ql_private.matching_classes, ql_private.waiting_classes, the class-in-use check of '
    'ql.prune_fleet. Plan: "Placement-class page with scheduled runs due".';
COMMENT ON INDEX ql_private.runs_pool_keyset IS
    'Serves: the ready runs of a granted pool (ql_private.pool_candidate_page, '
    'ql_private.pool_ready_candidate_page). Plan: "Pool page: a worker granted one pool of many '
    '(limit 8 + 1)".';
COMMENT ON INDEX ql_private.runs_pool_due IS
    'Serves: the due scheduled runs of a granted pool (ql_private.pool_candidate_page). '
    'Plan: "Pool page: a worker granted one pool of many (limit 8 + 1)".';
COMMENT ON INDEX ql_private.runs_pool_class_keyset IS
    'Serves: the ready runs of one class within a granted pool '
    '(ql_private.pool_class_candidate_page). '
    'Plan: "Pool placement-class page with scheduled runs due".';
COMMENT ON INDEX ql_private.runs_pool_class_due IS
    'Serves: the due scheduled runs of one class within a granted pool '
    '(ql_private.pool_class_candidate_page). '
    'Plan: "Pool placement-class page with scheduled runs due".';
COMMENT ON INDEX ql_private.runs_idempotency_key IS
    'Rule: one run per task and idempotency key while the run is retained (the ON CONFLICT '
    'arbiter of ql.enqueue_runs and ql.producer_enqueue).';
COMMENT ON INDEX ql_private.runs_state_seq IS
    'Serves: the runs of one state newest first (ql.list_runs without a task), '
    'ql.run_state_counts, the class-in-use check of ql.prune_fleet, ql.status_snapshot.';
COMMENT ON INDEX ql_private.runs_task_state_seq IS
    'Serves: the runs of one task and state newest first (ql.list_runs with a task), '
    'ql.queue_depth, ql.status_snapshot, ql.cancel_runs.';
COMMENT ON INDEX ql_private.runs_project_state_seq IS
    'Serves: one project''s runs newest first (ql_private.project_runs_page, '
    'ql.producer_list_runs).';
COMMENT ON INDEX ql_private.runs_task_queued_due IS
    'Serves: the ready and scheduled counts per task (ql.queue_depth), ql.cancel_runs.';
COMMENT ON INDEX ql_private.runs_terminal_finished IS
    'Serves: the terminal runs by finish time (ql.prune_runs, ql.throughput).';

-- run_leases ---------------------------------------------------------------

COMMENT ON INDEX ql_private.run_leases_pkey IS
    'Rule: a lease''s identity. Serves: the by-id update after the lease read in ql.ack_lease, '
    'ql.heartbeat_lease, ql.complete_lease, ql.sweep_leases, ql.cancel_run, ql.cancel_runs, '
    'ql_private.drain_session.';
COMMENT ON INDEX ql_private.run_leases_offer_id_key IS
    'Rule: one lease per offer id (a replayed pull finds its lease, never a second one). '
    'Serves: the lease read of every ACK, heartbeat and completion (ql_private.lease_open), '
    'the replay check of ql.pull_offer, ql_private.recover_offer. '
    'Plan: "Lease lifecycle read (ACK, heartbeat, completion)".';
COMMENT ON INDEX ql_private.run_leases_attempt_id_lease_generation_key IS
    'Rule: lease generations are unique per attempt. Serves: the last generation of the '
    'claimed attempt (ql_private.claim_candidate), the delete guard of attempts '
    '(ql_private.refuse_referenced_delete), ql.show_run. '
    'Plan: "The claim (ql_private.claim_candidate)".';
COMMENT ON INDEX ql_private.run_leases_one_live IS
    'Rule: at most one live (unreleased) lease per attempt; a second live lease for an attempt '
    'aborts the claim that would write it. Serves: the live lease of a dispatching candidate '
    'whose offer expired unstarted (ql_private.claim_candidate). '
    'Plan: "The claim (ql_private.claim_candidate)".';
COMMENT ON INDEX ql_private.run_leases_session_live_counted IS
    'Serves: a session''s live leases, counted index-only: the slot check of ql.pull_offer and '
    'ql.pull_offers, ql_private.session_live_leases, ql.live_sessions, ql.list_workers, '
    'ql.waiting_runs, ql.status_snapshot, ql_private.release_unstarted_leases. '
    'Plan: "A pull while a scheduled run is due".';
COMMENT ON INDEX ql_private.run_leases_unstarted_expiry IS
    'Serves: the offers that expired unstarted: the probe of ql_private.scan_and_claim, the '
    'expired-offer source of ql_private.candidate_page, ql_private.release_unstarted_leases, '
    'ql.idle_probe. Plan: "First keyset page (limit 8 + 1)".';
COMMENT ON INDEX ql_private.run_leases_live_expiry IS
    'Serves: the live leases by expiry, oldest first (ql.sweep_leases).';
COMMENT ON INDEX ql_private.run_leases_claimed IS
    'Serves: the offers per minute (ql.throughput).';

-- attempts -----------------------------------------------------------------

COMMENT ON INDEX ql_private.attempts_pkey IS
    'Rule: an attempt''s identity (runs.current_attempt_id and attempt_logs reference it). '
    'Serves: the dispatchable check of every candidate page (ql_private.dispatchable_attempt, '
    'ql_private.ready_candidate_page, ql_private.candidate_page), the claim '
    '(ql_private.claim_candidate), the lease read (ql_private.lease_open), ql_private.apply_retry. '
    'Plan: "Steady-state page: ready runs only (limit 8 + 1)"; '
    'Plan: "The claim (ql_private.claim_candidate)".';
COMMENT ON INDEX ql_private.attempts_run_id_attempt_no_key IS
    'Rule: attempt numbers are unique per run (a concurrent second retry of one attempt fails). '
    'Serves: the next attempt number of ql.retry_run, the attempts of a run in ql.show_run and '
    'ql.prune_runs.';

-- events -------------------------------------------------------------------

COMMENT ON INDEX ql_private.events_pkey IS
    'Rule: an event''s identity and order. Serves: the batched delete of ql.prune_fleet.';
COMMENT ON INDEX ql_private.events_run IS
    'Serves: a run''s events in order (ql.show_run), ql.prune_runs, the '
    'delete guard of runs (ql_private.refuse_referenced_delete).';
COMMENT ON INDEX ql_private.events_fleet IS
    'Serves: the fleet events (no run) oldest first (ql.prune_fleet).';
