-- ql_private.semver_satisfies(version text, comparators jsonb) -> boolean
--
-- Purpose: does `version` satisfy a normalized runtime range (docs/DESIGN.md
--   "Normalized placement"): a JSON array of plain comparators `OPversion`,
--   OP in >=, >, <=, <, =, full MAJOR.MINOR.PATCH[-pre] without build metadata.
--   Semantics are node-semver's (SPEC §4.5):
--     * every comparator holds by SemVer 2.0.0 precedence (AND), and
--     * if `version` has a prerelease, at least one comparator names the same
--       MAJOR.MINOR.PATCH *with* a prerelease. So 1.2.3-beta.2 satisfies
--       [">=1.2.3-beta.1","<2.0.0-0"] but 1.3.0-beta does not, and an empty array
--       (any version) admits every release but no prerelease — exactly as
--       node-semver's `*` without includePrerelease.
--   All comparators are parsed even after one fails, so a malformed comparator
--   is reported no matter where it sits (errors do not depend on the version).
-- Caller: ql_private.placement_evaluate (hot: up to 64 candidates per pull).
-- Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
-- SQLSTATEs: QL001 comparators not a JSON array / an element not a string;
--   QL003 version invalid, a comparator without a valid operator, with build
--   metadata, or with an invalid version (field `comparators[i]`).
CREATE OR REPLACE FUNCTION ql_private.semver_satisfies(p_version text, p_comparators jsonb)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    vk text COLLATE "C";
    ck text COLLATE "C";
    pre_prefix text COLLATE "C";   -- key of version up to and including its chr(2)
    pre_at integer;
    pre_ok boolean;
    holds boolean := true;
    c text;
    op text;
    n integer;
    i integer;
BEGIN
    IF p_comparators IS NULL OR jsonb_typeof(p_comparators) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'comparators must be a JSON array of strings';
    END IF;
    vk := ql_private.semver_parse(p_version, 'version');
    pre_at := strpos(vk, chr(2));     -- chr(2) occurs only as the prerelease tag
    pre_ok := pre_at = 0;             -- a release needs no prerelease comparator
    IF NOT pre_ok THEN
        pre_prefix := left(vk, pre_at);
    END IF;
    n := jsonb_array_length(p_comparators);
    -- Index access keeps every step a plpgsql "simple expression" (no SPI query).
    FOR i IN 0 .. n - 1 LOOP
        IF jsonb_typeof(p_comparators -> i) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001',
                MESSAGE = format('comparators[%s] must be a string', i);
        END IF;
        c := p_comparators ->> i;
        op := left(c, 2);
        IF op NOT IN ('>=', '<=') THEN
            op := left(c, 1);
            IF op NOT IN ('>', '<', '=') THEN
                RAISE EXCEPTION USING ERRCODE = 'QL003',
                    MESSAGE = format('comparators[%s] must start with one of >=, >, <=, <, =', i);
            END IF;
        END IF;
        IF strpos(c, '+') > 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL003',
                MESSAGE = format('comparators[%s] must not carry build metadata', i);
        END IF;
        ck := ql_private.semver_parse(substr(c, length(op) + 1), 'comparators[' || i || ']');
        holds := holds AND CASE op
            WHEN '>=' THEN vk >= ck
            WHEN '>'  THEN vk > ck
            WHEN '<=' THEN vk <= ck
            WHEN '<'  THEN vk < ck
            ELSE vk = ck
        END;
        -- Same MAJOR.MINOR.PATCH and a prerelease: keys share the prefix up to chr(2).
        IF NOT pre_ok AND left(ck, pre_at) = pre_prefix THEN
            pre_ok := true;
        END IF;
    END LOOP;
    RETURN holds AND pre_ok;
END
$$;
REVOKE ALL ON FUNCTION ql_private.semver_satisfies(text, jsonb) FROM PUBLIC;
