-- ql_private.semver_satisfies: AND of plain comparators with node-semver's
-- prerelease rule (a prerelease version needs a comparator with a prerelease on
-- the same MAJOR.MINOR.PATCH); [] admits every release and no prerelease.
BEGIN;
SELECT plan(14);

CREATE TEMP TABLE cases (n serial, version text, comparators jsonb, expected boolean);
INSERT INTO cases (version, comparators, expected) VALUES
  -- plain operators
  ('1.2.3', '[">=1.2.3"]', true),
  ('1.2.3', '[">1.2.3"]', false),
  ('1.2.3', '["<=1.2.3"]', true),
  ('1.2.3', '["<1.2.3"]', false),
  ('1.2.3', '["=1.2.3"]', true),
  ('1.2.4', '["=1.2.3"]', false),
  ('1.2.3+build.7', '["=1.2.3"]', true),                       -- build ignored
  ('1.5.0', '[">=1.2.0","<2.0.0-0"]', true),                   -- caret ^1.2 desugared
  ('2.0.0', '[">=1.2.0","<2.0.0-0"]', false),
  ('1.1.9', '[">=1.2.0","<2.0.0-0"]', false),
  ('18446744073709551616.0.0', '[">=18446744073709551615.0.0"]', true),
  -- prerelease rule
  ('1.2.3-beta.2', '[">=1.2.3-beta.1","<2.0.0-0"]', true),     -- same triple opts in
  ('1.2.3-beta.11', '[">=1.2.3-beta.2"]', true),               -- numeric identifiers
  ('1.2.3-alpha', '[">=1.2.3-beta.1","<2.0.0-0"]', false),     -- opted in, but lower
  ('1.3.0-beta', '[">=1.2.3-beta.1","<2.0.0-0"]', false),      -- other triple: excluded
  ('2.0.0-alpha', '["<2.0.0-0"]', false),                      -- 2.0.0-0 < 2.0.0-alpha
  ('2.0.0-0', '["<2.0.0-0"]', false),
  ('1.9.9', '["<2.0.0-0"]', true),
  ('2.0.0-alpha', '[">=2.0.0-0"]', true),
  ('2.0.0-alpha', '[">=1.0.0"]', false),                       -- holds, but no opt-in
  ('1.2.3-rc.1', '["=1.2.3-rc.1"]', true),
  ('1.2.3-rc.1+b', '["<1.2.3"]', false),                       -- < holds, no opt-in
  -- empty set: any release, no prerelease (node-semver `*`)
  ('0.0.0', '[]', true),
  ('99.0.0+meta', '[]', true),
  ('1.0.0-rc.1', '[]', false);
SELECT results_eq(
  $$SELECT n, ql_private.semver_satisfies(version, comparators) FROM cases ORDER BY n$$,
  $$SELECT n, expected FROM cases ORDER BY n$$,
  'operators, AND semantics, prerelease rule, empty set');
SELECT is(ql_private.semver_satisfies('1.2.3-beta.2', '[">=1.2.3-beta.1","<2.0.0-0"]'), true,
          '1.2.3-beta.2 satisfies >=1.2.3-beta.1 <2.0.0-0');
SELECT is(ql_private.semver_satisfies('1.3.0-beta', '[">=1.2.3-beta.1","<2.0.0-0"]'), false,
          '1.3.0-beta does not (prerelease on another MAJOR.MINOR.PATCH)');

-- Malformed input.
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '[">=1.2"]')$$, 'QL003',
  'comparators[0]: ''1.2'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'partial version in a comparator');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '["^1.2.3"]')$$, 'QL003',
  'comparators[0] must start with one of >=, >, <=, <, =', 'caret is not a normalized comparator');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '["1.2.3"]')$$, 'QL003', NULL,
  'operator is required');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '["<1.0.0", ">= 1.0.0"]')$$, 'QL003',
  'comparators[1]: '' 1.0.0'' is not SemVer 2.0.0 (major is not a non-empty decimal number)',
  'a malformed comparator is reported even after a failing one');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '["=1.2.3+b"]')$$, 'QL003',
  'comparators[0] must not carry build metadata', 'build metadata in a comparator');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '["=>1.2.3"]')$$, 'QL003', NULL,
  'unknown operator =>');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2', '[">=1.0.0"]')$$, 'QL003',
  'version: ''1.2'' is not SemVer 2.0.0 (expected MAJOR.MINOR.PATCH)', 'invalid version');
SELECT throws_ok($$SELECT ql_private.semver_satisfies(NULL, '[]')$$, 'QL003', NULL, 'NULL version');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '">=1.0.0"')$$, 'QL001',
  'comparators must be a JSON array of strings', 'comparators not an array');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', '[1]')$$, 'QL001',
  'comparators[0] must be a string', 'a comparator that is not a string');
SELECT throws_ok($$SELECT ql_private.semver_satisfies('1.2.3', NULL)$$, 'QL001', NULL, 'NULL comparators');

SELECT * FROM finish();
ROLLBACK;
