-- ql_private.semver_parse(version text, field text DEFAULT 'version') -> text
--
-- Purpose: validate a SemVer 2.0.0 string and turn it into its *precedence key*:
--   a text whose byte order (COLLATE "C") is exactly SemVer 2.0.0 precedence, so
--   comparing two versions is one memcmp instead of a re-parse per comparison
--   (placement runs for up to 64 candidates per pull, SPEC §3.1/§3.2).
--   Key layout (build metadata is dropped: it never affects precedence):
--     num(MAJOR) num(MINOR) num(PATCH) ( chr(3)                       -- release
--                                      | chr(2) { ident chr(1) }... ) -- prerelease
--     num(d)  = lpad(length(d), 10, '0') || d   -- digits have no leading zeros, so
--               (length, digits) orders them numerically at any size (no int/numeric
--               cast, nothing can overflow; 10 digits cover any text length)
--     ident   = chr(5) || num(id)   for a numeric identifier
--             | chr(6) || id        for an alphanumeric one (ASCII order under "C")
--   chr(2) < chr(3) puts a prerelease below its release; chr(5) < chr(6) puts numeric
--   identifiers below alphanumeric ones; the chr(1) terminator is below every
--   identifier character, so a shorter identifier (or identifier list) that is a
--   prefix of a longer one sorts first. num() is self-delimiting, so
--   `left(key, strpos(key, chr(2)))` is "same MAJOR.MINOR.PATCH, with a prerelease"
--   (used by semver_satisfies for node-semver's prerelease rule).
-- Caller: ql_private.semver_compare, ql_private.semver_satisfies,
--   ql_private.validate_placement, ql_private.validate_capabilities.
-- Locks: none. Pure, IMMUTABLE, PARALLEL SAFE.
-- SQLSTATE: QL003 when NULL or not SemVer 2.0.0; the message names the field, the
--   specific defect and at most 64 printable characters of the input (versions are
--   not secret; the cap keeps a hostile value out of logs).
CREATE OR REPLACE FUNCTION ql_private.semver_parse(p_version text, p_field text DEFAULT 'version')
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    k text;
    id text;
    rest text;
    core text;
    pre text;
    i integer;
    -- error path only
    build text;
    parts text[];
    reason text;
    shown text;
BEGIN
    -- Fast path: one capture-free match (PostgreSQL runs it as a DFA only, ~4x cheaper
    -- than regexp_match with groups) against the grammar of semver.Version._REGEX and
    -- schemas/qinglong.defs.v1.json#semver; then plain string splits.
    IF p_version ~ ('^(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)'
                    '(?:-(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?'
                    '(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$') THEN
        rest := split_part(p_version, '+', 1);      -- build metadata never matters
        i := strpos(rest, '-');                      -- first '-' starts the prerelease
        IF i > 0 THEN
            pre := substr(rest, i + 1);
            rest := left(rest, i - 1);
        END IF;
        core := split_part(rest, '.', 1);
        k := lpad(length(core)::text, 10, '0') || core;
        core := split_part(rest, '.', 2);
        k := k || lpad(length(core)::text, 10, '0') || core;
        core := split_part(rest, '.', 3);
        k := k || lpad(length(core)::text, 10, '0') || core;
        IF pre IS NULL THEN
            RETURN k || chr(3);
        END IF;
        k := k || chr(2);
        FOREACH id IN ARRAY string_to_array(pre, '.') LOOP
            IF id ~ '^[0-9]+$' THEN
                k := k || chr(5) || lpad(length(id)::text, 10, '0') || id || chr(1);
            ELSE
                k := k || chr(6) || id || chr(1);
            END IF;
        END LOOP;
        RETURN k;
    END IF;

    -- Error path: say precisely what is wrong (cost does not matter here).
    IF p_version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL003',
            MESSAGE = format('%s: version is missing', p_field);
    END IF;
    rest := p_version;
    IF strpos(rest, '+') > 0 THEN
        build := substr(rest, strpos(rest, '+') + 1);
        rest := left(rest, strpos(rest, '+') - 1);
    END IF;
    IF strpos(rest, '-') > 0 THEN
        pre := substr(rest, strpos(rest, '-') + 1);
        core := left(rest, strpos(rest, '-') - 1);
    ELSE
        core := rest;
    END IF;
    parts := string_to_array(core, '.');
    IF p_version = '' THEN
        reason := 'empty string';
    ELSIF coalesce(array_length(parts, 1), 0) <> 3 THEN
        reason := 'expected MAJOR.MINOR.PATCH';
    ELSE
        FOR i IN 1 .. 3 LOOP
            IF parts[i] !~ '^[0-9]+$' THEN
                reason := format('%s is not a non-empty decimal number',
                                 (ARRAY['major', 'minor', 'patch'])[i]);
            ELSIF parts[i] ~ '^0[0-9]' THEN
                reason := format('%s has a leading zero', (ARRAY['major', 'minor', 'patch'])[i]);
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    IF reason IS NULL AND pre = '' THEN
        reason := 'empty prerelease';
    ELSIF reason IS NULL AND pre IS NOT NULL THEN
        FOREACH id IN ARRAY string_to_array(pre, '.') LOOP
            IF id = '' THEN
                reason := 'empty prerelease identifier';
            ELSIF id ~ '[^0-9A-Za-z-]' THEN
                reason := 'prerelease identifier has a character outside [0-9A-Za-z-]';
            ELSIF id ~ '^0[0-9]+$' THEN
                reason := 'numeric prerelease identifier has a leading zero';
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    IF reason IS NULL AND build = '' THEN
        reason := 'empty build metadata';
    ELSIF reason IS NULL AND build IS NOT NULL THEN
        FOREACH id IN ARRAY string_to_array(build, '.') LOOP
            IF id = '' THEN
                reason := 'empty build identifier';
            ELSIF id ~ '[^0-9A-Za-z-]' THEN
                reason := 'build identifier has a character outside [0-9A-Za-z-]';
            END IF;
            EXIT WHEN reason IS NOT NULL;
        END LOOP;
    END IF;
    shown := regexp_replace(p_version, '[^ -~]', '?', 'g');
    IF length(shown) > 64 THEN
        shown := left(shown, 61) || '...';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'QL003',
        MESSAGE = format('%s: %s is not SemVer 2.0.0 (%s)', p_field, quote_literal(shown),
                         coalesce(reason, 'malformed')),
        HINT = 'expected MAJOR.MINOR.PATCH[-prerelease][+build] without leading zeros';
END
$$;
REVOKE ALL ON FUNCTION ql_private.semver_parse(text, text) FROM PUBLIC;
