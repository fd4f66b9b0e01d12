-- ql_private.pull_bounds (SPEC §3.1): the optional per-pull bounds — defaults
-- for NULL / JSON null / a missing key, each key read independently, QL001 for
-- a non-object, an unknown key or a bad value, QL002 above a hard cap (never
-- clamped), and the caps exactly at the limit.
BEGIN;
SELECT plan(17);

CREATE FUNCTION pg_temp.b(bounds jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT pages || '/' || page_size || '/' || claim_attempts FROM ql_private.pull_bounds(bounds)
$$;

SELECT is(pg_temp.b(NULL), '2/8/8', 'NULL -> the defaults 2 pages x 8, 8 claim attempts');
SELECT is(pg_temp.b('null'), '2/8/8', 'JSON null -> the defaults');
SELECT is(pg_temp.b('{}'), '2/8/8', 'an empty object -> the defaults');
SELECT is(pg_temp.b('{"pages": 5}'), '5/8/8', 'pages alone; the others keep their defaults');
SELECT is(pg_temp.b('{"pageSize": 3}'), '2/3/8', 'pageSize alone');
SELECT is(pg_temp.b('{"claimAttempts": 1}'), '2/8/1', 'claimAttempts alone');
SELECT is(pg_temp.b('{"pages": 16, "pageSize": 64, "claimAttempts": 64}'), '16/64/64',
          'every hard cap exactly is accepted');
SELECT is(pg_temp.b('{"pages": 1.0}'), '1/8/8', 'an integral number (1.0) is an integer');
SELECT is((SELECT row(s.default_pages, s.default_page_size, s.default_claim_attempts,
                      s.max_pages, s.max_page_size, s.max_claim_attempts)::text
             FROM ql_private.settings() s), '(2,8,8,16,64,64)',
          'the numbers are ql_private.settings()''s');

SELECT throws_ok($$SELECT pg_temp.b('[1]')$$, 'QL001', 'bounds must be a JSON object', 'an array -> QL001');
SELECT throws_ok($$SELECT pg_temp.b('7')$$, 'QL001', 'bounds must be a JSON object', 'a number -> QL001');
SELECT throws_ok($$SELECT pg_temp.b('{"pages": 2, "limit": 3}')$$, 'QL001', 'bounds has unknown field limit',
                 'an unknown key -> QL001 naming it');
SELECT throws_ok($$SELECT pg_temp.b('{"pageSize": "8"}')$$, 'QL001', 'bounds.pageSize must be an integer',
                 'a string -> QL001');
SELECT throws_ok($$SELECT pg_temp.b('{"claimAttempts": 0}')$$, 'QL001',
                 'bounds.claimAttempts must be an integer >= 1', 'zero -> QL001');
SELECT throws_ok($$SELECT pg_temp.b('{"pages": 16.5}')$$, 'QL001', 'bounds.pages must be an integer >= 1',
                 'a fraction -> QL001');
SELECT throws_ok($$SELECT pg_temp.b('{"pages": 17}')$$, 'QL002', 'bounds.pages exceeds its hard cap of 16',
                 'pages above its cap -> QL002, never clamped');
SELECT throws_ok($$SELECT pg_temp.b('{"pageSize": 65, "claimAttempts": 65}')$$, 'QL002',
                 'bounds.pageSize exceeds its hard cap of 64', 'pageSize above its cap -> QL002');

SELECT * FROM finish();
ROLLBACK;
