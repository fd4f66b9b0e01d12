-- ql_private.semver_parse: a SemVer 2.0.0 string -> its precedence key, whose
-- byte order (COLLATE "C") is precedence: the key layout (release chr(3),
-- prerelease chr(2) + identifiers, build dropped, numbers of any length), and
-- QL003 with the field name and the specific defect for every kind of invalid
-- input (at most 64 printable characters of the input shown). Comparisons over
-- whole version chains are in semver_compare.sql.
BEGIN;
SELECT plan(27);

CREATE FUNCTION pg_temp.k(v text) RETURNS text LANGUAGE sql AS $$
    SELECT ql_private.semver_parse(v) COLLATE "C" $$;

-- Key layout.
SELECT is(pg_temp.k('1.2.3'),
          '00000000011' || '00000000012' || '00000000013' || chr(3), 'a release: num(major) num(minor) num(patch) chr(3)');
SELECT is(pg_temp.k('1.2.3-rc.10'),
          '00000000011' || '00000000012' || '00000000013' || chr(2)
          || chr(6) || 'rc' || chr(1) || chr(5) || '000000000210' || chr(1),
          'a prerelease: chr(2), then alphanumeric chr(6)+id and numeric chr(5)+num(id), each ended by chr(1)');
SELECT is(pg_temp.k('1.2.3-rc.10+build.7'), pg_temp.k('1.2.3-rc.10'), 'build metadata is dropped');
SELECT is(ql_private.semver_parse('0.0.0'), repeat('0000000001' || '0', 3) || chr(3), 'zeros: num(0) = length 1, digit 0');
SELECT is(left(pg_temp.k('1.2.3-alpha'), strpos(pg_temp.k('1.2.3-alpha'), chr(2))),
          left(pg_temp.k('1.2.3-beta.1'), strpos(pg_temp.k('1.2.3-beta.1'), chr(2))),
          'left(key, strpos(key, chr(2))): equal for prereleases of one MAJOR.MINOR.PATCH');

-- Byte order is precedence.
SELECT ok(pg_temp.k('1.0.0-alpha') < pg_temp.k('1.0.0'), 'a prerelease precedes its release');
SELECT ok(pg_temp.k('1.0.0-alpha') < pg_temp.k('1.0.0-alpha.1'), 'a shorter identifier list precedes a longer one');
SELECT ok(pg_temp.k('1.0.0-2') < pg_temp.k('1.0.0-10'), 'numeric identifiers compare numerically');
SELECT ok(pg_temp.k('1.0.0-999') < pg_temp.k('1.0.0-a'), 'numeric identifiers precede alphanumeric ones');
SELECT ok(pg_temp.k('1.0.0-B') < pg_temp.k('1.0.0-a'), 'alphanumeric identifiers compare in ASCII order');
SELECT ok(pg_temp.k('1.0.0-a') < pg_temp.k('1.0.0-aa'), 'a prefix identifier precedes the longer one');
SELECT ok(pg_temp.k('9.0.0') < pg_temp.k('10.0.0'), '9 < 10 (not text order)');
SELECT ok(pg_temp.k('99999999999999999999999.0.0') < pg_temp.k('100000000000000000000000.0.0'),
          'numbers beyond any integer type compare by length, then digits');
SELECT ok(pg_temp.k('1.9.9') < pg_temp.k('1.10.0'), 'minor compares numerically');

-- Errors: QL003, the field and the defect.
SELECT throws_ok($$SELECT ql_private.semver_parse(NULL, 'runtimes.python')$$, 'QL003',
                 'runtimes.python: version is missing', 'NULL -> QL003 naming the field');
SELECT throws_ok($$SELECT ql_private.semver_parse('')$$, 'QL003',
                 'version: '''' is not SemVer 2.0.0 (empty string)', 'empty');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2')$$, 'QL003',
                 'version: ''1.2'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'two parts');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.x.3')$$, 'QL003',
                 'version: ''1.x.3'' is not SemVer 2.0.0 (minor is not a non-empty decimal number)', 'a letter');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.03')$$, 'QL003',
                 'version: ''1.2.03'' is not SemVer 2.0.0 (patch has a leading zero)', 'a leading zero');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3-')$$, 'QL003',
                 'version: ''1.2.3-'' is not SemVer 2.0.0 (empty prerelease)', 'an empty prerelease');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3-a..b')$$, 'QL003',
                 'version: ''1.2.3-a..b'' is not SemVer 2.0.0 (empty prerelease identifier)', 'an empty identifier');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3-a_b')$$, 'QL003',
                 'version: ''1.2.3-a_b'' is not SemVer 2.0.0 (prerelease identifier has a character outside [0-9A-Za-z-])',
                 'a character outside the alphabet');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3-01')$$, 'QL003',
                 'version: ''1.2.3-01'' is not SemVer 2.0.0 (numeric prerelease identifier has a leading zero)',
                 'a numeric identifier with a leading zero');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3+')$$, 'QL003',
                 'version: ''1.2.3+'' is not SemVer 2.0.0 (empty build metadata)', 'empty build metadata');
SELECT throws_ok($$SELECT ql_private.semver_parse('1.2.3+a.!')$$, 'QL003',
                 'version: ''1.2.3+a.!'' is not SemVer 2.0.0 (build identifier has a character outside [0-9A-Za-z-])',
                 'a bad build identifier');
SELECT throws_ok(format('SELECT ql_private.semver_parse(%L)', repeat('9', 100)), 'QL003',
                 format('version: %L is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', repeat('9', 61) || '...'),
                 'a long input is shown cut to 64 characters');
SELECT throws_ok(format('SELECT ql_private.semver_parse(%L)', '1.2.3' || chr(10)), 'QL003',
                 'version: ''1.2.3?'' is not SemVer 2.0.0 (patch is not a non-empty decimal number)',
                 'a control character is shown as ?');

SELECT * FROM finish();
ROLLBACK;
