-- ql_private.semver_compare(a text, b text) -> integer (-1 | 0 | 1)
--
-- Purpose: SemVer 2.0.0 precedence of two versions (semver.org §11): numeric
--   MAJOR/MINOR/PATCH of any size, prerelease identifiers compared numerically or
--   by ASCII, fewer identifiers lower, a prerelease below its release; build
--   metadata ignored. Must agree with the `semver` package on every input
--   (tests/py/test_semver_sql_property.py).
-- How: both sides become precedence keys (ql_private.semver_parse), whose byte
--   order under COLLATE "C" is SemVer precedence, so the database collation can
--   never change the answer.
-- Caller: none (tests and tooling; placement uses ql_private.semver_satisfies).
-- Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
-- SQLSTATE: QL003 when either side is NULL or not SemVer 2.0.0 (field `a` / `b`).
CREATE OR REPLACE FUNCTION ql_private.semver_compare(p_a text, p_b text)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    ka text COLLATE "C" := ql_private.semver_parse(p_a, 'a');
    kb text COLLATE "C" := ql_private.semver_parse(p_b, 'b');
BEGIN
    IF ka < kb THEN
        RETURN -1;
    ELSIF ka = kb THEN
        RETURN 0;
    END IF;
    RETURN 1;
END
$$;
REVOKE ALL ON FUNCTION ql_private.semver_compare(text, text) FROM PUBLIC;
