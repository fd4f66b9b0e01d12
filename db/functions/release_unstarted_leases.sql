-- ql_private.release_unstarted_leases(session_ids uuid[], reason text) -> integer
--
-- Purpose: release every live, unstarted lease of the given sessions (a session
--   replaced or closed) and put each run whose current attempt it held back in
--   `queued`, so it is a candidate again at once. This keeps the invariant the
--   candidate index relies on: a `dispatching` run always has a live unstarted
--   lease (db/functions/candidate_page.sql).
-- Locks: attempt, then run, then lease — the one lifecycle order
--   (docs/LIFECYCLE.md "Locks") of every function that waits for these rows
--   (cancel, retry, ACK, completion, prune); claims and the sweeper never wait
--   for them — so it can wait on them but never deadlock with them.
-- Caller: ql.open_session, ql.close_session, ql.disable_worker, ql.end_session,
--   ql_private.drain_session.
-- Returns the number released.
-- SQLSTATEs: none.
CREATE OR REPLACE FUNCTION ql_private.release_unstarted_leases(p_session_ids uuid[], p_reason text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
    now_ts timestamptz;
    released integer := 0;
BEGIN
    FOR l IN SELECT rl.id, rl.attempt_id, rl.run_id
               FROM ql_private.run_leases rl
              WHERE rl.session_id = ANY (p_session_ids)
                AND rl.released_at IS NULL AND rl.started_at IS NULL
              ORDER BY rl.id
    LOOP
        PERFORM 1 FROM ql_private.attempts a WHERE a.id = l.attempt_id FOR UPDATE;
        PERFORM 1 FROM ql_private.runs r WHERE r.id = l.run_id FOR NO KEY UPDATE;
        now_ts := clock_timestamp();
        UPDATE ql_private.run_leases rl
           SET released_at = now_ts, release_reason = p_reason, updated_at = now_ts
         WHERE rl.id = l.id AND rl.released_at IS NULL AND rl.started_at IS NULL;
        IF FOUND THEN
            released := released + 1;
            UPDATE ql_private.runs r
               SET state = 'queued', updated_at = now_ts
             WHERE r.id = l.run_id AND r.state = 'dispatching'
               AND r.current_attempt_id = l.attempt_id;
        END IF;
    END LOOP;
    RETURN released;
END
$$;
REVOKE ALL ON FUNCTION ql_private.release_unstarted_leases(uuid[], text) FROM PUBLIC;
