-- ql.set_secret (SPEC §14.1): stores ciphertext at the next version only, under
-- the project's data key; sizes 24..16400 bytes of ciphertext (8 B - 16 KiB
-- values); audited by name; refusals write nothing; ql_runtime only.
BEGIN;
SELECT plan(16);
\ir fixtures.psql

SELECT ql.project_data_key('acme', repeat('a1', 16), 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL;
CREATE FUNCTION pg_temp.put(name text, version integer, size integer DEFAULT 40,
                            key_id text DEFAULT repeat('a1', 16), project text DEFAULT 'acme')
RETURNS jsonb LANGUAGE sql AS $$
    SELECT ql.set_secret(project, name, version, key_id, decode(repeat('bb', 12), 'hex'),
                         decode(repeat('cc', size), 'hex'))
$$;
GRANT EXECUTE ON FUNCTION pg_temp.put(text, integer, integer, text, text) TO ql_runtime;

SET LOCAL ROLE ql_runtime;
SELECT pg_temp.put('db.password', 1) AS v1 \gset
SELECT pg_temp.put('db.password', 2) AS v2 \gset
RESET ROLE;
SELECT is(:'v1'::jsonb ->> 'version', '1', 'a new secret is version 1');
SELECT is(:'v2'::jsonb ->> 'version', '2', 'the next set is version 2');
SELECT is(:'v2'::jsonb ->> 'createdAtMs', :'v1'::jsonb ->> 'createdAtMs', 'created stays');
SELECT is((SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(:'v2'::jsonb) k),
          ARRAY['createdAtMs', 'name', 'project', 'updatedAtMs', 'version'],
          'the answer has no value, ciphertext or key');
SELECT is((SELECT row(version, octet_length(ciphertext))::text FROM ql_private.secrets),
          '(2,40)', 'one row, the new version''s ciphertext');
SELECT is((SELECT array_agg(row(action, actor IS NOT NULL, detail)::text ORDER BY id)
             FROM ql_private.security_audit),
          ARRAY[row('secret.set', true, '{"name": "db.password", "project": "acme", "version": 1}'::jsonb)::text,
                row('secret.set', true, '{"name": "db.password", "project": "acme", "version": 2}'::jsonb)::text],
          'each set is audited by name and version, with its actor');

CREATE TEMP TABLE before AS
    SELECT (SELECT array_agg(s::text ORDER BY s.name) FROM ql_private.secrets s) AS secrets,
           (SELECT count(*) FROM ql_private.security_audit) AS audits,
           (SELECT count(*) FROM ql_private.projects) AS projects;
GRANT SELECT ON before TO ql_runtime;
SET LOCAL ROLE ql_runtime;
SELECT throws_ok($$SELECT pg_temp.put('db.password', 2)$$, 'QL040', NULL,
                 'a version already written -> QL040 secret_conflict');
SELECT throws_ok($$SELECT pg_temp.put('db.password', 4)$$, 'QL040', NULL,
                 'a version that skips one -> QL040');
SELECT throws_ok($$SELECT pg_temp.put('other', 2)$$, 'QL040', NULL,
                 'a new secret at version 2 -> QL040');
SELECT throws_ok($$SELECT pg_temp.put('short', 1, 23)$$, 'QL002', NULL,
                 'a value under 8 bytes (ciphertext < 24) -> QL002');
SELECT throws_ok($$SELECT pg_temp.put('long', 1, 16401)$$, 'QL002', NULL,
                 'a value over 16 KiB -> QL002');
SELECT throws_ok($$SELECT pg_temp.put('Bad Name', 1)$$, 'QL001', NULL, 'malformed name -> QL001');
SELECT throws_ok($$SELECT pg_temp.put('x', 1, 40, repeat('b2', 16))$$, 'QL001', NULL,
                 'another data key id -> QL001');
SELECT throws_ok($$SELECT pg_temp.put('x', 1, 40, repeat('a1', 16), 'nokey')$$, 'QL004', NULL,
                 'a project without a data key -> QL004');
RESET ROLE;
SELECT is((SELECT row((SELECT array_agg(s::text ORDER BY s.name) FROM ql_private.secrets s),
                       (SELECT count(*) FROM ql_private.security_audit),
                       (SELECT count(*) FROM ql_private.projects))::text),
          (SELECT row(secrets, audits, projects)::text FROM before),
          'every refusal left secrets, audit and projects as they were');
SELECT is(ql_test.error_of($$SELECT pg_temp.put('short', 1, 8)$$), 'QL002 value',
          'the size refusal names the value');

SELECT * FROM finish();
ROLLBACK;
