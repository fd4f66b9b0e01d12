-- ql.list_data_keys (SPEC §14.1 rotate-kek): every project's WRAPPED data key,
-- hex, key id order; ql_runtime only.
BEGIN;
SELECT plan(3);

SELECT ql.project_data_key(p, k, 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL
  FROM (VALUES ('zz', repeat('0f', 16)), ('aa', repeat('f0', 16))) x(p, k);
SET LOCAL ROLE ql_runtime;
SELECT ql.list_data_keys() AS keys \gset
RESET ROLE;
SELECT is((SELECT array_agg(e ->> 'keyId' ORDER BY o)
             FROM jsonb_array_elements(:'keys'::jsonb -> 'keys') WITH ORDINALITY x(e, o)),
          ARRAY[repeat('0f', 16), repeat('f0', 16)], 'every key, key id order');
SELECT is((:'keys'::jsonb -> 'keys' -> 0) - 'projectId',
          jsonb_build_object('keyId', repeat('0f', 16), 'kekId', 'kek-a',
                             'nonce', repeat('aa', 12), 'wrappedKey', repeat('11', 48)),
          'wrapped key, nonce and KEK id, hex');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT ql.list_data_keys()$$, '42501', NULL, 'not for the ingress');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
