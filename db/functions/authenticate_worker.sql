-- ql.authenticate_worker(credential_id, secret_digest, worker_id, action) -> jsonb
--
-- Purpose: stand-alone credential check for ingress actions that have no
--   database work of their own (or that a replica caches for <= 5 s, SPEC §5).
--   Returns {"status":"ok"} or the denial envelope of ql_private.authenticate.
-- Caller: ql_worker_ingress. Locks: none. Writes: nothing when allowed, one
--   security_audit row when denied.
-- Idempotency: read-only when allowed.
-- SQLSTATEs: QL001 worker_id not a lowercase canonical UUID, or malformed action.
CREATE OR REPLACE FUNCTION ql.authenticate_worker(
    credential_id text,
    secret_digest bytea,
    worker_id text,
    action text
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    denied jsonb;
BEGIN
    denied := ql_private.authenticate(
        authenticate_worker.credential_id,
        authenticate_worker.secret_digest,
        ql_private.parse_uuid(authenticate_worker.worker_id, 'workerId'),
        authenticate_worker.action);
    RETURN coalesce(denied, jsonb_build_object('status', 'ok'));
END
$$;
REVOKE ALL ON FUNCTION ql.authenticate_worker(text, bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.authenticate_worker(text, bytea, text, text) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.authenticate_worker(text, bytea, text, text) IS
'Worker credential check. {"status":"ok"} (writes nothing) or {"status":"denied","httpStatus","reason"} (one security_audit row). Caller: ql_worker_ingress. Locks: none. QL001 malformed workerId/action.';
