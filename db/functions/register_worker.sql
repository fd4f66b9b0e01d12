-- ql.register_worker(p_name text) -> jsonb {workerId}
--
-- Purpose: create a worker identity (SPEC §8 `admin worker create`); its id goes
--   into the worker certificate's SAN and its credentials.
-- Inputs: p_name, ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (a label, not a key).
-- Fences: none.
-- Writes: one workers row.
-- Locks: none.
-- Idempotency: none; names are labels, not keys, so each call is a new worker.
-- Errors: QL001 p_name NULL or not ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.register_worker(p_name text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid;
BEGIN
    -- Same pattern as the table CHECK, checked first so the caller gets QL001.
    IF p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    END IF;
    INSERT INTO ql_private.workers AS w (name) VALUES (p_name)
    RETURNING w.id INTO v_worker_id;
    RETURN jsonb_build_object('workerId', v_worker_id);
END
$$;
REVOKE ALL ON FUNCTION ql.register_worker(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.register_worker(text) TO ql_runtime;
