-- ql_private.placement_class_of(revision_id) -> integer
--
-- Purpose: the placement class (ql_private.placement_classes, migration 0006)
--   of an execution revision: the id of its normalized `required` placement
--   ({"executors": ["remote-worker"]} when it has none, R-REV-2), created on
--   first use. Runs record it at enqueue so a pull can reach the runs its
--   session can take behind a head of runs it cannot (runs_class_keyset).
-- Writes: at most one placement_classes row (ON CONFLICT DO NOTHING, so
--   concurrent enqueues of a new class agree on one id).
-- Locks: an existing class row FOR KEY SHARE until the caller commits: the
--   runs it is about to write reference the class (no foreign key, migration
--   0006), and ql.prune_fleet, which deletes classes nothing references, skips
--   a class locked so (FOR UPDATE SKIP LOCKED) — and a lookup that waited for a
--   prune finds the class gone and creates it again.
-- Caller: ql.enqueue_runs, ql.retry_run.
-- SQLSTATEs: QL004 revision not found.
CREATE OR REPLACE FUNCTION ql_private.placement_class_of(p_revision_id uuid)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    req jsonb;
    class_id integer;
BEGIN
    SELECT coalesce(er.placement -> 'required', '{"executors": ["remote-worker"]}'::jsonb)
      INTO req
      FROM ql_private.execution_revisions er WHERE er.id = p_revision_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', MESSAGE = 'execution revision not found';
    END IF;
    SELECT pc.id INTO class_id FROM ql_private.placement_classes pc WHERE pc.required = req
       FOR KEY SHARE;
    IF FOUND THEN
        RETURN class_id;
    END IF;
    INSERT INTO ql_private.placement_classes (required) VALUES (req)
        ON CONFLICT (required) DO NOTHING
        RETURNING id INTO class_id;
    IF class_id IS NULL THEN  -- a concurrent enqueue created it first
        SELECT pc.id INTO class_id FROM ql_private.placement_classes pc WHERE pc.required = req
           FOR KEY SHARE;
    END IF;
    RETURN class_id;
END
$$;
REVOKE ALL ON FUNCTION ql_private.placement_class_of(uuid) FROM PUBLIC;
