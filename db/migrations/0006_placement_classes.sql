-- 0006 placement classes: matching runs are reachable behind a blocked head.
--
-- Why: a pull reads a bounded number of keyset pages (SPEC §3.1: 2 x 8 by
-- default). When more runs than that are queued ahead that no session of this
-- worker can take (their required placement asks for a label, runtime or
-- executor it lacks), every pull of that worker read only those and answered
-- idle placement_mismatch, however many matching runs waited behind them
-- (measured: 0 claims/s with 100k blocked runs ahead, docs/BENCHMARKS.md).
--
-- A placement class is one distinct `required` placement (executors, labels,
-- runtimes — the part that decides pass/fail; `preferred` only scores). Each run
-- records its revision's class when it is enqueued, and runs_class_keyset
-- orders queued runs per class in the same (-priority, queue_seq, id) key as
-- runs_candidate_keyset. When a pull's first page yields no passing candidate,
-- ql_private.scan_and_claim evaluates the classes against the session's
-- capabilities once and continues with ql_private.class_candidate_page: the
-- matching classes' runs only, merged in key order, so the blocked head is
-- jumped over in one index descent per matching class.
--
-- No foreign key from runs.placement_class: enqueue inserts up to 10k runs per
-- call, each FK check would lock the same class row; classes are never deleted
-- (rows only ever added, by ql_private.placement_class_of).
--
-- Backfill: every run that can still be dispatched gets its class.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE TABLE ql_private.placement_classes (
    id        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- the normalized `required` object; a revision without a placement is
    -- {"executors": ["remote-worker"]} (R-REV-2)
    required  jsonb NOT NULL UNIQUE CHECK (jsonb_typeof(required) = 'object')
);

ALTER TABLE ql_private.runs ADD COLUMN placement_class integer;

INSERT INTO ql_private.placement_classes (required)
SELECT DISTINCT coalesce(er.placement -> 'required', '{"executors": ["remote-worker"]}'::jsonb)
  FROM ql_private.execution_revisions er
ON CONFLICT (required) DO NOTHING;

UPDATE ql_private.runs r
   SET placement_class = pc.id
  FROM ql_private.execution_revisions er, ql_private.placement_classes pc
 WHERE er.id = r.execution_revision_id
   AND pc.required = coalesce(er.placement -> 'required',
                              '{"executors": ["remote-worker"]}'::jsonb)
   AND r.state IN ('queued', 'dispatching');

CREATE INDEX runs_class_keyset
    ON ql_private.runs (placement_class, (-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested;
