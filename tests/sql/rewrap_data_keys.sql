-- ql.rewrap_data_keys (SPEC §14.1 rotate-kek): replaces the wrap of every data
-- key in one statement, only when every stored key is wrapped by the old KEK
-- and the caller names exactly the stored keys; otherwise nothing changes.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT ql.project_data_key(p, k, 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL
  FROM (VALUES ('p1', repeat('0f', 16)), ('p2', repeat('f0', 16))) x(p, k);
CREATE FUNCTION pg_temp.entry(key_id text, fill text DEFAULT '22') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('keyId', key_id, 'nonce', repeat('bb', 12),
                              'wrappedKey', repeat(fill, 48))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.entry(text, text) TO ql_runtime;

CREATE TEMP TABLE before AS
    SELECT array_agg(k::text ORDER BY k.key_id) AS keys FROM ql_private.project_data_keys k;
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT ql.rewrap_data_keys('kek-a', 'kek-b',
                     jsonb_build_array(pg_temp.entry(repeat('0f', 16))))$$,
                 'QL040', NULL, 'a stored key left out -> QL040 secret_conflict');
SELECT throws_ok($$SELECT ql.rewrap_data_keys('kek-x', 'kek-b',
                     jsonb_build_array(pg_temp.entry(repeat('0f', 16)), pg_temp.entry(repeat('f0', 16))))$$,
                 'QL041', NULL, 'keys not wrapped by the named old KEK -> QL041');
SELECT throws_ok($$SELECT ql.rewrap_data_keys('kek-a', 'kek-a', '[]'::jsonb)$$, 'QL001', NULL,
                 'the same KEK id -> QL001');
SELECT throws_ok($$SELECT ql.rewrap_data_keys('kek-a', 'kek-b',
                     jsonb_build_array(pg_temp.entry(repeat('0f', 16)), pg_temp.entry(repeat('0f', 16))))$$,
                 'QL001', NULL, 'a key named twice -> QL001');
SELECT throws_ok($$SELECT ql.rewrap_data_keys('kek-a', 'kek-b', '[{"keyId": "x"}]'::jsonb)$$,
                 'QL001', NULL, 'a malformed entry -> QL001');
RESET ROLE;
SELECT is((SELECT array_agg(k::text ORDER BY k.key_id) FROM ql_private.project_data_keys k),
          (SELECT keys FROM before), 'refusals leave every key as it was');

SET LOCAL ROLE ql_runtime;
SELECT is(ql.rewrap_data_keys('kek-a', 'kek-b',
              jsonb_build_array(pg_temp.entry(repeat('0f', 16), '33'), pg_temp.entry(repeat('f0', 16), '44'))),
          '{"oldKekId": "kek-a", "kekId": "kek-b", "rewrapped": 2}'::jsonb, 'both keys re-wrapped');
RESET ROLE;
SELECT is((SELECT array_agg(row(key_id, kek_id, encode(wrapped_key, 'hex') = repeat(CASE key_id WHEN repeat('0f', 16) THEN '33' ELSE '44' END, 48))::text ORDER BY key_id)
             FROM ql_private.project_data_keys),
          ARRAY[row(repeat('0f', 16), 'kek-b', true)::text, row(repeat('f0', 16), 'kek-b', true)::text],
          'each row carries the new KEK id and its new wrap; key ids unchanged');
SELECT is((SELECT detail FROM ql_private.security_audit WHERE action = 'secret.rotate_kek'),
          '{"keys": 2, "kekId": "kek-b", "oldKekId": "kek-a"}'::jsonb, 'audited');

SELECT * FROM finish();
ROLLBACK;
