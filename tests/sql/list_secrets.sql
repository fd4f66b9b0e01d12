-- ql.list_secrets (SPEC §14.1): names, versions, timestamps in name order; never
-- a value, ciphertext or key; an unknown project lists nothing; ql_runtime only.
BEGIN;
SELECT plan(5);

SELECT ql.project_data_key('acme', repeat('a1', 16), 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL;
SELECT ql.set_secret('acme', n, 1, repeat('a1', 16), decode(repeat('bb', 12), 'hex'),
                     decode(repeat('cc', 30), 'hex')) IS NOT NULL
  FROM unnest(ARRAY['zeta', 'a.b', 'a-b']) n;
SELECT ql.set_secret('acme', 'zeta', 2, repeat('a1', 16), decode(repeat('bb', 12), 'hex'),
                     decode(repeat('cc', 30), 'hex')) IS NOT NULL;

SET LOCAL ROLE ql_runtime;
SELECT ql.list_secrets('acme') AS listed \gset
SELECT is(ql.list_secrets('nope'), '{"project": "nope", "secrets": []}'::jsonb,
          'an unknown project lists nothing');
SELECT throws_ok($$SELECT ql.list_secrets('bad name')$$, 'QL001', NULL, 'malformed project');
RESET ROLE;
SELECT is((SELECT array_agg((e ->> 'name') || '@' || (e ->> 'version') ORDER BY o)
             FROM jsonb_array_elements(:'listed'::jsonb -> 'secrets') WITH ORDINALITY x(e, o)),
          ARRAY['a-b@1', 'a.b@1', 'zeta@2'], 'name order (C), current versions');
SELECT is((SELECT array_agg(DISTINCT k ORDER BY k)
             FROM jsonb_array_elements(:'listed'::jsonb -> 'secrets') e, jsonb_object_keys(e) k),
          ARRAY['createdAtMs', 'name', 'updatedAtMs', 'version'], 'never a value or key');
SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok($$SELECT ql.list_secrets('acme')$$, '42501', NULL, 'not for the ingress');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
