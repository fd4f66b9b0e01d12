-- ql_private.validate_secret_refs via ql.publish_revision (SPEC §14.2): spec.secrets
-- must name secrets the project has, no env name in both env and secrets, at
-- most 16, well-formed; a refused publish writes nothing.
BEGIN;
SELECT plan(9);
\ir fixtures.psql

CREATE FUNCTION pg_temp.doc(secrets text, env text DEFAULT '{}') RETURNS bytea
LANGUAGE sql AS $$
    SELECT convert_to(format('{"executor":"remote_worker","kind":"qinglong/command@v1","spec":'
        '{"argv":["true"],"env":%s,"schema":"qinglong/command@v1","secrets":%s,"timeoutS":30}}',
        env, secrets), 'UTF8')
$$;
SELECT ql.project_data_key('acme', repeat('a1', 16), 'kek-a', decode(repeat('aa', 12), 'hex'),
                           decode(repeat('11', 48), 'hex')) IS NOT NULL;
SELECT ql.set_secret('acme', 'db.password', 1, repeat('a1', 16), decode(repeat('bb', 12), 'hex'),
                     decode(repeat('cc', 30), 'hex')) IS NOT NULL;

SELECT ql_test.mark();
SELECT is(ql_test.error_of($$SELECT ql.publish_revision('acme', 't', pg_temp.doc('{"X":"missing"}'))$$),
          'QL001 secrets', 'a secret the project does not have -> QL001 COLUMN secrets');
SELECT throws_ok($$SELECT ql.publish_revision('acme', 't', pg_temp.doc('{"X":"missing"}'))$$,
                 'QL001', 'secret missing does not exist in project acme (admin secret set)',
                 'the message names the secret');
SELECT throws_ok($$SELECT ql.publish_revision('other', 't', pg_temp.doc('{"X":"db.password"}'))$$,
                 'QL001', 'secret db.password does not exist in project other (admin secret set)',
                 'another project''s secret does not count');
SELECT throws_ok($$SELECT ql.publish_revision('acme', 't',
                     pg_temp.doc('{"X":"db.password"}', '{"X":"plain"}'))$$,
                 'QL001', 'X is in both spec.env and spec.secrets', 'env name in both -> QL001');
SELECT throws_ok($$SELECT ql.publish_revision('acme', 't', pg_temp.doc('{"X":"Bad Name"}'))$$,
                 'QL001', NULL, 'malformed secret name -> QL001');
SELECT throws_ok($$SELECT ql.publish_revision('acme', 't', pg_temp.doc('["db.password"]'))$$,
                 'QL001', NULL, 'not an object -> QL001');
SELECT throws_ok(format($$SELECT ql.publish_revision('acme', 't', pg_temp.doc(%L))$$,
                        (SELECT jsonb_object_agg('E' || n, 'db.password') FROM generate_series(1, 17) n)),
                 'QL001', 'spec.secrets names at most 16 secrets', 'more than 16 -> QL001');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'refused publishes write nothing');
SELECT is(ql.publish_revision('acme', 't', pg_temp.doc('{"DB":"db.password","DB2":"db.password"}'))
              ->> 'revision', '1', 'existing secrets: published (names pinned)');

SELECT * FROM finish();
ROLLBACK;
