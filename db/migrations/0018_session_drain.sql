-- 0018 session drain: `admin session close --drain` and `admin worker disable
-- --drain` (SPEC §9.5) end a session without killing the work it runs.
--
-- 1. ql.end_session and ql.disable_worker gain a trailing p_drain boolean
--    (DEFAULT false: without it they behave exactly as before). A new
--    signature, so the old ones are dropped here by their exact signature and
--    the function files (re-applied right after the migrations, in this same
--    transaction) create the new ones with their grants and comments.
-- 2. A draining session ends with its last lease: trigger
--    run_leases_close_drained calls ql_private.close_drained_session for each
--    lease that was started and is released now (completion, start failure,
--    loss, cancellation). Its WHEN keeps claims, ACKs, heartbeats and the
--    release of unstarted leases free of any trigger call; the function itself
--    costs one primary-key probe of worker_sessions and locks or writes nothing
--    unless the session is draining. The function body lives in
--    db/functions/close_drained_session.sql; the stub below exists only so
--    CREATE TRIGGER has a function to reference the first time this runs.
-- The state `draining` itself has existed since 0001 (worker_sessions.state
-- CHECK, index worker_sessions_draining of 0011); nothing set it before.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

-- 1. New signatures (IF EXISTS: on a fresh database the functions are created
--    after the migrations).
DROP FUNCTION IF EXISTS ql.end_session(text);
DROP FUNCTION IF EXISTS ql.disable_worker(text);

-- 2. Close a draining session with its last lease.
CREATE OR REPLACE FUNCTION ql_private.close_drained_session() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN NULL; END $$;
REVOKE ALL ON FUNCTION ql_private.close_drained_session() FROM PUBLIC;

CREATE TRIGGER run_leases_close_drained
    AFTER UPDATE OF released_at ON ql_private.run_leases
    FOR EACH ROW
    WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL
          AND NEW.started_at IS NOT NULL)
    EXECUTE FUNCTION ql_private.close_drained_session();
