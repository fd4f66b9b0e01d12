-- 0011 the operator console's reads (SPEC §10).
--
-- run_leases_claimed (claimed_at): the console's throughput chart counts the
-- runs dispatched per minute over the last 15 minutes (ql.throughput). A lease
-- row is written once per dispatch, so its claim time is the dispatch time;
-- without this index the count would scan every lease ever retained. Claim
-- times grow with the clock, so the index is appended to at its right edge
-- (one more btree insert per claim, no page splits in the middle).
-- Succeeded/failed per minute read runs_terminal_finished (0010); the other
-- console reads use existing indexes (runs_candidate_keyset, runs_due,
-- runs_task_state_seq, worker_sessions_one_active, security_audit_time).
CREATE INDEX run_leases_claimed ON ql_private.run_leases (claimed_at);

-- worker_sessions_draining: the console lists draining sessions beside the
-- active ones (ql.live_sessions: they still hold leases). Closed sessions
-- accumulate; this partial index keeps that list a probe, not a table scan.
CREATE INDEX worker_sessions_draining ON ql_private.worker_sessions (worker_id)
    WHERE state = 'draining';
