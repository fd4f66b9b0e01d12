-- ql.register_worker(name text) -> jsonb {workerId}
--
-- Purpose: create a worker identity (SPEC §8 `admin worker create`); its id goes
--   into the worker certificate's SAN and its credentials.
-- Caller: ql_runtime (control plane). Locks: none. Writes: one workers row.
-- Idempotency: none; names are labels, not keys, so each call is a new worker.
-- SQLSTATEs: QL001 name NULL or not ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
CREATE OR REPLACE FUNCTION ql.register_worker(name text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wid uuid;
BEGIN
    -- Same pattern as the table CHECK, checked first so the caller gets QL001.
    IF register_worker.name IS NULL
       OR register_worker.name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    INSERT INTO ql_private.workers AS w (name) VALUES (register_worker.name)
    RETURNING w.id INTO wid;
    RETURN jsonb_build_object('workerId', wid);
END
$$;
REVOKE ALL ON FUNCTION ql.register_worker(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.register_worker(text) TO ql_runtime;
COMMENT ON FUNCTION ql.register_worker(text) IS
'Create a worker; returns {workerId}. Caller: ql_runtime. Locks: none. Not idempotent. QL001 bad name.';
