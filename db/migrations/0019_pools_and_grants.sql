-- 0019 pools and worker grants (SPEC §13.1, §13.3): a worker takes only the
-- runs of the pools an operator granted it.
--
-- * ql_private.pools: a pool belongs to one project; names
--   ^[a-z0-9][a-z0-9._-]{0,62}$, unique per project. Every project has
--   `default`: created here for the existing ones and, for new ones, by the
--   projects_default_pool trigger in the same statement that creates the project.
-- * tasks.pool_id (NOT NULL): the pool a task publishes into. An INSERT without
--   one gets its project's default pool (tasks_default_pool trigger; the publish
--   path always names it).
-- * runs.pool_id (NOT NULL): copied from the task at enqueue (ql.enqueue_runs
--   writes it; the runs_default_pool trigger fills a row inserted without one,
--   and costs an enqueue nothing when the column is given: WHEN on the trigger).
--   No foreign key: it is the task's pool at enqueue, and a per-row RI check on
--   the enqueue path buys nothing the task's key does not.
-- * ql_private.worker_pool_grants (worker_id, pool_id): explicit grants;
--   workers.all_pools: the `--pool '*'` grant, every pool of every project,
--   present and future.
-- * runs_pool_keyset / runs_pool_due: the candidate keyset and the due index of
--   one pool (leading with the pool), so a worker granted some pools reads their
--   runs alone whatever other pools hold (§13.3).
-- * run_leases.release_reason gains `grant_revoked` (ql.revoke_pool).
-- Existing data: every task and run lands in its project's default pool; every
-- existing worker is granted every existing project's default pool
-- (explicit rows, revocable), so it keeps taking what it took before.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE TABLE ql_private.pools (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id  uuid NOT NULL REFERENCES ql_private.projects (id),
    name        text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (project_id, name)
);

CREATE TABLE ql_private.worker_pool_grants (
    worker_id   uuid NOT NULL REFERENCES ql_private.workers (id) ON DELETE CASCADE,
    pool_id     uuid NOT NULL REFERENCES ql_private.pools (id),
    granted_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (worker_id, pool_id)
);
CREATE INDEX worker_pool_grants_pool ON ql_private.worker_pool_grants (pool_id);

ALTER TABLE ql_private.workers ADD COLUMN all_pools boolean NOT NULL DEFAULT false;

-- The default pool of a new project, in the statement that inserts it.
CREATE FUNCTION ql_private.project_default_pool() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO ql_private.pools (project_id, name) VALUES (NEW.id, 'default');
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ql_private.project_default_pool() FROM PUBLIC;
COMMENT ON FUNCTION ql_private.project_default_pool() IS
'Trigger: every new project gets its pool `default` in the same statement (SPEC 13.1).';
CREATE TRIGGER projects_default_pool
    AFTER INSERT ON ql_private.projects
    FOR EACH ROW EXECUTE FUNCTION ql_private.project_default_pool();

INSERT INTO ql_private.pools (project_id, name)
SELECT p.id, 'default' FROM ql_private.projects p;

-- Tasks: the pool they publish into.
ALTER TABLE ql_private.tasks ADD COLUMN pool_id uuid REFERENCES ql_private.pools (id);
UPDATE ql_private.tasks t SET pool_id = p.id
  FROM ql_private.pools p WHERE p.project_id = t.project_id AND p.name = 'default';
ALTER TABLE ql_private.tasks ALTER COLUMN pool_id SET NOT NULL;
CREATE INDEX tasks_pool ON ql_private.tasks (pool_id);

CREATE FUNCTION ql_private.task_default_pool() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT p.id INTO NEW.pool_id FROM ql_private.pools p
     WHERE p.project_id = NEW.project_id AND p.name = 'default';
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION ql_private.task_default_pool() FROM PUBLIC;
COMMENT ON FUNCTION ql_private.task_default_pool() IS
'Trigger: a task inserted without a pool gets its project''s default pool.';
CREATE TRIGGER tasks_default_pool
    BEFORE INSERT ON ql_private.tasks
    FOR EACH ROW WHEN (NEW.pool_id IS NULL)
    EXECUTE FUNCTION ql_private.task_default_pool();

-- Runs: the task's pool, copied at enqueue.
ALTER TABLE ql_private.runs ADD COLUMN pool_id uuid;
UPDATE ql_private.runs r SET pool_id = t.pool_id
  FROM ql_private.tasks t WHERE t.id = r.task_id;
ALTER TABLE ql_private.runs ALTER COLUMN pool_id SET NOT NULL;

CREATE FUNCTION ql_private.run_default_pool() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT t.pool_id INTO NEW.pool_id FROM ql_private.tasks t WHERE t.id = NEW.task_id;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION ql_private.run_default_pool() FROM PUBLIC;
COMMENT ON FUNCTION ql_private.run_default_pool() IS
'Trigger: a run inserted without a pool gets its task''s pool (ql.enqueue_runs always gives it).';
CREATE TRIGGER runs_default_pool
    BEFORE INSERT ON ql_private.runs
    FOR EACH ROW WHEN (NEW.pool_id IS NULL)
    EXECUTE FUNCTION ql_private.run_default_pool();

-- The per-pool candidate keyset and due index (SPEC §13.3): same predicates as
-- runs_candidate_keyset / runs_due, led by the pool.
CREATE INDEX runs_pool_keyset ON ql_private.runs
    (pool_id, (-(priority::integer)), queue_seq, id)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NULL;
CREATE INDEX runs_pool_due ON ql_private.runs (pool_id, due_at)
    WHERE state = 'queued' AND runtime_owned AND NOT cancel_requested AND due_at IS NOT NULL;

-- Every existing worker keeps taking what it took: an explicit grant of every
-- existing project's default pool.
INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id)
SELECT w.id, p.id FROM ql_private.workers w CROSS JOIN ql_private.pools p;

ALTER TABLE ql_private.run_leases DROP CONSTRAINT run_leases_release_reason_check;
ALTER TABLE ql_private.run_leases ADD CONSTRAINT run_leases_release_reason_check
    CHECK (release_reason IN ('expired', 'session_replaced', 'session_closed', 'completed',
                              'lost', 'cancelled', 'start_failed', 'grant_revoked'));

-- ql.publish_revision gains p_pool (db/functions/publish_revision.sql re-creates
-- it with its REVOKE/GRANT and COMMENT after the migrations, in this transaction).
DROP FUNCTION IF EXISTS ql.publish_revision(text, text, bytea);
