-- 0004 claim path: what the leaner claim of ql.pull_offer needs from the schema.
--
-- 1. run_leases.execution_revision_id loses its foreign key. Every claim of a run
--    of one task inserted a lease referencing the same execution_revisions row,
--    and the FK check takes FOR KEY SHARE on that row: concurrent claims of one
--    task all share-locked one hot row, so PostgreSQL built a new MultiXact for
--    every claim (a write to pg_multixact per claim, growing with the number of
--    concurrent claimers). The reference stays sound without it: revisions are
--    immutable and can never be deleted (execution_revisions_immutable /
--    _no_truncate refuse UPDATE, DELETE and TRUNCATE), and the claim copies the
--    id from the run it has locked, whose own FK (runs.execution_revision_id)
--    still guarantees the revision exists.
-- 2. ql_private.candidate_page gained `now`, `snapshot` and `own` arguments (an
--    inlinable SQL function that passes over rows a concurrent claim holds):
--    the old four-argument overload is dropped; the new one is created with the
--    functions every migrate re-applies.
-- 3. ql_private.claim_candidate takes a page's passing candidates at once (one
--    locking statement instead of one call per candidate): the old
--    per-candidate overload is dropped.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.run_leases
    DROP CONSTRAINT run_leases_execution_revision_id_fkey;

DROP FUNCTION IF EXISTS ql_private.candidate_page(smallint, bigint, uuid, integer);

DROP FUNCTION IF EXISTS ql_private.claim_candidate(
    ql_private.worker_sessions, uuid, uuid, integer, uuid, bytea);
