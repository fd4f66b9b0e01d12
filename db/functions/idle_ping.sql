-- ql.idle_ping(p_token text) -> boolean
--
-- Purpose: the barrier of an ingress replica's idle view. The replica
--   sends NOTIFY ql_dispatch 'p:<token>' through its pool and waits for it on its
--   own LISTEN connection. Notifications are delivered in commit order, so once
--   the ping comes back every notification committed before the ping was sent
--   (a revocation, an enqueue, a session replacement) has been processed: a pull
--   that arrived before the ping was sent may then be answered from the view.
--   One ping serves every pull waiting on that replica (~20 a second at most).
-- Inputs: p_token, ^[A-Za-z0-9_.-]{1,64}$ (the replica's own correlation token).
-- Fences: none (no worker identity is involved; the ingress calls it itself).
-- Writes: no table; the NOTIFY assigns a transaction id, so each ping commits a
--   small WAL commit record.
-- Locks: the notification queue lock at commit (this call is its own autocommit
--   transaction, never part of a claim).
-- Idempotency: a repeated token is just another ping.
-- Errors: QL001 token not ^[A-Za-z0-9_.-]{1,64}$.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.idle_ping(p_token text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_token IS NULL OR p_token !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'token must match ^[A-Za-z0-9_.-]{1,64}$';
    END IF;
    PERFORM pg_notify('ql_dispatch', 'p:' || p_token);
    RETURN true;
END
$$;
REVOKE ALL ON FUNCTION ql.idle_ping(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.idle_ping(text) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.idle_ping(text) IS
'Idle view barrier ping: NOTIFY ql_dispatch ''p:<token>''; delivered after every notification committed before it. Inputs: p_token ^[A-Za-z0-9_.-]{1,64}$. Fences: none. Writes: no table (a commit record). Locks: notification queue at commit. Errors: QL001 malformed token. Caller: ql_worker_ingress.';
