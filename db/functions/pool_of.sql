-- ql_private.pool_of(p_pool text) -> ql_private.pools
--
-- Purpose: resolve a pool reference `P/N` (project name / pool name, SPEC §13.1)
--   of a ql.* argument to its row. The project part matches
--   ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, the pool part ^[a-z0-9][a-z0-9._-]{0,62}$.
-- Inputs: p_pool ('P/N').
-- Fences: the pool exists.
-- Writes: none. Locks: none (a plain read; the callers lock what they change).
-- Errors: QL001 (COLUMN pool) NULL or not P/N; QL004 (COLUMN pool) no such pool.
-- Caller: ql.grant_pool, ql.revoke_pool.
CREATE OR REPLACE FUNCTION ql_private.pool_of(p_pool text)
RETURNS ql_private.pools
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_pool ql_private.pools;
BEGIN
    IF p_pool IS NULL
       OR p_pool !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}/[a-z0-9][a-z0-9._-]{0,62}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
            MESSAGE = 'pool must be PROJECT/NAME (name ^[a-z0-9][a-z0-9._-]{0,62}$)';
    END IF;
    SELECT pl.* INTO v_pool
      FROM ql_private.projects p
      JOIN ql_private.pools pl ON pl.project_id = p.id
     WHERE p.name = split_part(p_pool, '/', 1) AND pl.name = split_part(p_pool, '/', 2);
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'pool', MESSAGE = 'pool not found';
    END IF;
    RETURN v_pool;
END
$$;
REVOKE ALL ON FUNCTION ql_private.pool_of(text) FROM PUBLIC;
