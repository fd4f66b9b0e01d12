-- ql_private.semver_compare / semver_parse: SemVer 2.0.0 precedence (semver.org §11),
-- build metadata ignored, numbers beyond any integer type, ASCII (not collation)
-- order, and QL003 with a specific message for every kind of invalid input.
BEGIN;
SELECT plan(26);

-- semver.org §11 example chain, strictly increasing.
CREATE TEMP TABLE chain (i integer, v text);
INSERT INTO chain VALUES
  (1, '1.0.0-alpha'), (2, '1.0.0-alpha.1'), (3, '1.0.0-alpha.beta'), (4, '1.0.0-beta'),
  (5, '1.0.0-beta.2'), (6, '1.0.0-beta.11'), (7, '1.0.0-rc.1'), (8, '1.0.0'),
  (9, '1.0.1'), (10, '1.1.0'), (11, '2.0.0'), (12, '2.1.0'), (13, '2.1.1');

SELECT results_eq(
  $$SELECT ql_private.semver_compare(a.v, b.v) FROM chain a JOIN chain b ON b.i = a.i + 1 ORDER BY a.i$$,
  $$SELECT -1 FROM chain WHERE i < 13$$,
  '§11 chain: each version precedes the next');
SELECT is(
  (SELECT count(*) FROM chain a, chain b
    WHERE ql_private.semver_compare(a.v, b.v) <> sign(a.i - b.i)),
  0::bigint,
  '§11 chain: all 169 ordered pairs agree (antisymmetric, reflexive 0, transitive)');

-- Edge cases: (a, b, expected)
CREATE TEMP TABLE cases (n serial, a text, b text, expected integer);
INSERT INTO cases (a, b, expected) VALUES
  ('1.0.0+build.1', '1.0.0+build.2', 0),                  -- build metadata ignored
  ('1.0.0+zzz', '1.0.0', 0),
  ('1.0.0-rc.1+b', '1.0.0-rc.1', 0),
  ('1.0.0-alpha+001', '1.0.0-alpha', 0),
  ('1.0.0-alpha', '1.0.0-alpha.0', -1),                   -- fewer identifiers lower
  ('1.0.0-1', '1.0.0-a', -1),                             -- numeric below alphanumeric
  ('1.0.0-999999', '1.0.0--', -1),
  ('1.0.0-0a', '1.0.0-1', 1),                             -- 0a is alphanumeric
  ('1.0.0-B', '1.0.0-a', -1),                             -- ASCII: B (66) < a (97)
  ('1.0.0-alpha', '1.0.0-alpha-1', -1),                   -- prefix shorter first
  ('1.0.0-alpha.10', '1.0.0-alpha.9', 1),                 -- numeric, not lexical
  ('1.0.0-x.7.z.92', '1.0.0-x.7.z.92', 0),
  ('10.0.0', '9.0.0', 1),
  ('1.10.0', '1.9.0', 1),
  ('0.0.0', '0.0.0-0', 1),
  ('18446744073709551616.0.0', '18446744073709551615.0.0', 1),  -- above uint64
  ('1.0.0-123456789012345678901234567890', '1.0.0-123456789012345678901234567889', 1),
  ('99999999999999999999999999999999.0.0', '100000000000000000000000000000000.0.0', -1),
  ('1.2.3-999999999999999999999999999999999999999', '1.2.3-a', -1);
SELECT results_eq(
  $$SELECT n, ql_private.semver_compare(a, b) FROM cases ORDER BY n$$,
  $$SELECT n, expected FROM cases ORDER BY n$$,
  'edge cases: build metadata, identifier kinds, ASCII order, huge numbers');
SELECT results_eq(
  $$SELECT n, ql_private.semver_compare(b, a) FROM cases ORDER BY n$$,
  $$SELECT n, -expected FROM cases ORDER BY n$$,
  'edge cases reversed give the opposite sign');
SELECT is(ql_private.semver_compare('1' || repeat('0', 140000) || '.0.0', repeat('9', 140000) || '.0.0'), 1,
          'components longer than numeric''s 131072 digits still compare (no cast)');

-- Invalid inputs: QL003, by SQLSTATE, with specific messages on representative ones.
SELECT throws_ok($$SELECT ql_private.semver_compare('01.0.0', '1.0.0')$$, 'QL003',
  'a: ''01.0.0'' is not SemVer 2.0.0 (major has a leading zero)', 'leading zero in major');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0', '1.00.0')$$, 'QL003',
  'b: ''1.00.0'' is not SemVer 2.0.0 (minor has a leading zero)', 'leading zero in minor (field b)');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0-01', '1.0.0')$$, 'QL003',
  'a: ''1.0.0-01'' is not SemVer 2.0.0 (numeric prerelease identifier has a leading zero)',
  'leading zero in a numeric prerelease identifier');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0-a..b', '1.0.0')$$, 'QL003',
  'a: ''1.0.0-a..b'' is not SemVer 2.0.0 (empty prerelease identifier)', 'empty prerelease identifier');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0-', '1.0.0')$$, 'QL003',
  'a: ''1.0.0-'' is not SemVer 2.0.0 (empty prerelease)', 'empty prerelease');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0+', '1.0.0')$$, 'QL003',
  'a: ''1.0.0+'' is not SemVer 2.0.0 (empty build metadata)', 'empty build metadata');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0+a..b', '1.0.0')$$, 'QL003',
  'a: ''1.0.0+a..b'' is not SemVer 2.0.0 (empty build identifier)', 'empty build identifier');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0-a_b', '1.0.0')$$, 'QL003',
  'a: ''1.0.0-a_b'' is not SemVer 2.0.0 (prerelease identifier has a character outside [0-9A-Za-z-])',
  'bad character in prerelease');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0', '1.0.0')$$, 'QL003',
  'a: ''1.0'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'missing patch');
SELECT throws_ok($$SELECT ql_private.semver_compare('', '1.0.0')$$, 'QL003',
  'a: '''' is not SemVer 2.0.0 (empty string)', 'empty string');
SELECT throws_ok($$SELECT ql_private.semver_compare(NULL, '1.0.0')$$, 'QL003',
  'a: version is missing', 'NULL');
SELECT throws_ok($$SELECT ql_private.semver_compare('v1.0.0', '1.0.0')$$, 'QL003', NULL, 'v prefix');
SELECT throws_ok($$SELECT ql_private.semver_compare(' 1.0.0', '1.0.0')$$, 'QL003', NULL, 'leading space');
SELECT throws_ok($$SELECT ql_private.semver_compare(E'1.0.0\n', '1.0.0')$$, 'QL003', NULL, 'trailing newline');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0.0', '1.0.0')$$, 'QL003', NULL, 'four components');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.x', '1.0.0')$$, 'QL003', NULL, 'X-range is not a version');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0-é', '1.0.0')$$, 'QL003', NULL, 'non-ASCII prerelease');
SELECT throws_ok($$SELECT ql_private.semver_compare('١.0.0', '1.0.0')$$, 'QL003', NULL, 'non-ASCII digit');
SELECT throws_ok($$SELECT ql_private.semver_compare('-1.0.0', '1.0.0')$$, 'QL003', NULL, 'negative major');
SELECT throws_ok($$SELECT ql_private.semver_compare('1.0.0+b+c', '1.0.0')$$, 'QL003', NULL, 'two build separators');
-- The echoed input is capped at 64 printable characters.
CREATE FUNCTION pg_temp.err(v text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM ql_private.semver_parse(v, 'v'); RETURN NULL;
EXCEPTION WHEN SQLSTATE 'QL003' THEN RETURN SQLERRM; END $$;
SELECT is(pg_temp.err(repeat('9', 200) || '.0'),
  'v: ''' || repeat('9', 61) || '...'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)',
  'echoed input is capped at 64 characters');

SELECT * FROM finish();
ROLLBACK;
