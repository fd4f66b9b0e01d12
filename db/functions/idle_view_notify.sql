-- ql_private.idle_view_notify() -> trigger
--
-- Purpose: the NOTIFY half of the ingress idle view (migration 0005).
--   Sends on channel `ql_dispatch`, once per distinct payload per transaction
--   (PostgreSQL folds duplicate notifications of one transaction):
--     TG_ARGV[0] = 'queue'      -> 'q'
--     TG_ARGV[0] = 'credential' -> 'c:<credential_id>' (old and new row)
--     TG_ARGV[0] = 'session'    -> 's:<worker_id>'     (old and new row)
--   Payloads are ids only: never a secret, a digest or a token.
-- Caller: trigger on ql_private.runs, trigger on ql_private.attempts, trigger on
--   ql_private.worker_credentials, trigger on ql_private.worker_sessions (the triggers
--   of migration 0005; their WHEN clauses keep the claim path and session heartbeats
--   from ever calling it).
-- Locks: none here; the notification queue lock is taken at COMMIT of the
--   calling transaction (which is why the claim path must never notify).
-- Idempotency: notifications are hints; receiving one twice only invalidates a
--   replica's view twice. SQLSTATEs: QL001 on an unknown TG_ARGV[0] (a bug).
CREATE OR REPLACE FUNCTION ql_private.idle_view_notify()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind text := TG_ARGV[0];
BEGIN
    IF kind = 'queue' THEN
        PERFORM pg_notify('ql_dispatch', 'q');
    ELSIF kind = 'credential' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM pg_notify('ql_dispatch', 'c:' || OLD.credential_id);
        END IF;
        IF TG_OP = 'UPDATE' THEN
            PERFORM pg_notify('ql_dispatch', 'c:' || NEW.credential_id);
        END IF;
    ELSIF kind = 'session' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM pg_notify('ql_dispatch', 's:' || OLD.worker_id::text);
        END IF;
        IF TG_OP = 'UPDATE' THEN
            PERFORM pg_notify('ql_dispatch', 's:' || NEW.worker_id::text);
        END IF;
    ELSE
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'unknown idle view notification kind';
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ql_private.idle_view_notify() FROM PUBLIC;
