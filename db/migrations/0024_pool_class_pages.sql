-- 0024 class pages for a worker restricted to granted pools (SPEC §3.1, §13.3).
--
-- A worker without the all-pools grant reads its pools' keysets
-- (runs_pool_keyset, runs_pool_due); the class pages that let a pull jump over
-- a head of runs its session cannot take (runs_class_keyset, runs_class_due)
-- span every pool, so such a worker used to page on through its pools within
-- the bounded pages and answer idle `placement_mismatch` although runs it
-- could take sat deeper in its own pool. These two indexes are the pool x
-- class keysets ql_private.pool_class_candidate_page reads: one range scan per
-- (granted pool, matching class) pair, whatever sits ahead of it.
-- * runs_pool_class_keyset (pool_id, placement_class, -priority, queue_seq, id)
--   over the ready queued runs — runs_class_keyset's key and predicate, led by
--   the pool;
-- * runs_pool_class_due (pool_id, placement_class, due_at) over the scheduled
--   queued runs — runs_class_due led by the pool.
-- Both are partial on `queued` runs: an enqueue adds one entry (to the keyset
-- for a ready run, to the due index for a scheduled one), a claim (queued ->
-- dispatching) adds none, as for the other keysets.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE INDEX runs_pool_class_keyset ON ql_private.runs
    (pool_id, placement_class, (-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NULL;
CREATE INDEX runs_pool_class_due ON ql_private.runs (pool_id, placement_class, due_at)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NOT NULL;
