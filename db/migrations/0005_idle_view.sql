-- 0005 idle view: NOTIFY triggers that let each ingress replica answer idle
-- pulls from a bounded-staleness view (service/idle_view.py) instead of a
-- database call per pull (target: 10,000 idle workers <= 333 database calls/s).
--
-- One channel, `ql_dispatch`. Payloads carry ids only, never secrets:
--   'q'               a run may have become dispatchable: a runs INSERT statement,
--                     a run updated into `queued` (enqueue, retry, every requeue /
--                     release path, present and future), an attempts INSERT
--                     statement or an attempt updated while `claimed`;
--   'c:<credentialId>' a credential changed or was deleted (revocation);
--   's:<workerId>'    a session's fence facts changed: state, generation, owner,
--                     capabilities, slots, or its expiry moved backwards (a
--                     heartbeat only moves expires_at forward and never notifies).
-- Never on the claim path: a claim inserts a lease and moves a run queued ->
-- dispatching, neither of which notifies (NOTIFY takes a global lock at commit
-- and would serialize claims). Replicas also send their own barrier pings
-- ('p:<token>', ql.idle_ping) on the same channel.
--
-- The trigger function body lives in db/functions/idle_view_notify.sql
-- (re-applied after the migrations in the same migrate transaction); the stub
-- below exists only so CREATE TRIGGER has a function to reference the first
-- time this migration runs.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

CREATE OR REPLACE FUNCTION ql_private.idle_view_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN NULL; END $$;
REVOKE ALL ON FUNCTION ql_private.idle_view_notify() FROM PUBLIC;

-- Runs: any INSERT statement (enqueue), and any row updated into a
-- dispatchable-looking state. WHEN keeps bulk updates that do not requeue
-- (claims, drains, ACKs) free of trigger calls.
CREATE TRIGGER runs_idle_view_insert
    AFTER INSERT ON ql_private.runs
    FOR EACH STATEMENT EXECUTE FUNCTION ql_private.idle_view_notify('queue');
CREATE TRIGGER runs_idle_view_requeue
    AFTER UPDATE ON ql_private.runs
    FOR EACH ROW
    WHEN (NEW.state = 'queued' AND NEW.runtime_owned AND NOT NEW.cancel_requested
          AND (OLD.state IS DISTINCT FROM NEW.state
               OR OLD.current_attempt_id IS DISTINCT FROM NEW.current_attempt_id
               OR OLD.runtime_owned IS DISTINCT FROM NEW.runtime_owned
               OR OLD.cancel_requested IS DISTINCT FROM NEW.cancel_requested))
    EXECUTE FUNCTION ql_private.idle_view_notify('queue');

-- Attempts: a new attempt (retry) or a claimed attempt whose dispatchability
-- inputs changed (not_before, executor, state into claimed).
CREATE TRIGGER attempts_idle_view_insert
    AFTER INSERT ON ql_private.attempts
    FOR EACH STATEMENT EXECUTE FUNCTION ql_private.idle_view_notify('queue');
CREATE TRIGGER attempts_idle_view_update
    AFTER UPDATE ON ql_private.attempts
    FOR EACH ROW
    WHEN (NEW.state = 'claimed'
          AND (OLD.state IS DISTINCT FROM NEW.state
               OR OLD.not_before IS DISTINCT FROM NEW.not_before
               OR OLD.executor IS DISTINCT FROM NEW.executor))
    EXECUTE FUNCTION ql_private.idle_view_notify('queue');

-- Credentials: revocation, rotation, re-assignment, deletion.
CREATE TRIGGER worker_credentials_idle_view_update
    AFTER UPDATE ON ql_private.worker_credentials
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION ql_private.idle_view_notify('credential');
CREATE TRIGGER worker_credentials_idle_view_delete
    AFTER DELETE ON ql_private.worker_credentials
    FOR EACH ROW EXECUTE FUNCTION ql_private.idle_view_notify('credential');

-- Sessions: replace / close / drain and anything else a pull's fence reads —
-- but not a heartbeat (expires_at forward, heartbeat_at).
CREATE TRIGGER worker_sessions_idle_view_update
    AFTER UPDATE ON ql_private.worker_sessions
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state
          OR OLD.generation IS DISTINCT FROM NEW.generation
          OR OLD.worker_id IS DISTINCT FROM NEW.worker_id
          OR OLD.session_id IS DISTINCT FROM NEW.session_id
          OR OLD.slots IS DISTINCT FROM NEW.slots
          OR OLD.capabilities_digest IS DISTINCT FROM NEW.capabilities_digest
          OR OLD.capabilities_canonical IS DISTINCT FROM NEW.capabilities_canonical
          OR NEW.expires_at < OLD.expires_at)
    EXECUTE FUNCTION ql_private.idle_view_notify('session');
CREATE TRIGGER worker_sessions_idle_view_delete
    AFTER DELETE ON ql_private.worker_sessions
    FOR EACH ROW EXECUTE FUNCTION ql_private.idle_view_notify('session');
