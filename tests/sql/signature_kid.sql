-- Signed revisions (SPEC §16.1): ql_private.signature_kid's shape check, and
-- ql.publish_revision storing the signature (kid from the protected header)
-- with the revision: immutable like the content, deduplicated only with the
-- same signature, carried by the offer as executionRevision.signature.
BEGIN;
SELECT plan(24);
\ir fixtures.psql

CREATE FUNCTION ql_test.b64url(doc text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT rtrim(translate(replace(encode(convert_to(doc, 'UTF8'), 'base64'), E'\n', ''),
                           '+/', '-_'), '=')
$$;
CREATE FUNCTION ql_test.jws(header text, sig_char text DEFAULT 'A') RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT ql_test.b64url(header) || '..' || repeat(sig_char, 86) $$;

SELECT ql_test.jws('{"alg":"EdDSA","kid":"key-1"}') AS sig1,
       ql_test.jws('{"alg":"EdDSA","kid":"key-2"}', 'B') AS sig2,
       ql_test.command('["echo","signed"]') AS content \gset

-- The shape check (pure helper).
SELECT is(ql_private.signature_kid(NULL), NULL, 'NULL: unsigned, no kid');
SELECT is(ql_private.signature_kid(:'sig1'), 'key-1', 'the kid of the protected header');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)', 'not-a-jws'), 'QL001', NULL,
                 'not a compact JWS: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)',
                        ql_test.b64url('{"alg":"EdDSA","kid":"k"}') || '.cGF5bG9hZA.' || repeat('A', 86)),
                 'QL001', NULL, 'an attached payload (not detached): QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)',
                        ql_test.b64url('{"alg":"EdDSA","kid":"k"}') || '..' || repeat('A', 85)),
                 'QL001', NULL, 'a signature that is not 64 bytes: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)', ql_test.jws('{"alg":"RS256","kid":"k"}')),
                 'QL001', NULL, 'alg other than EdDSA: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)', ql_test.jws('{"alg":"EdDSA"}')),
                 'QL001', NULL, 'no kid: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)',
                        ql_test.jws('{"alg":"EdDSA","kid":"k","jku":"x"}')),
                 'QL001', NULL, 'another header member: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)',
                        ql_test.jws('{"alg":"EdDSA","kid":"k","kid":"j"}')),
                 'QL001', NULL, 'a duplicate header member: QL001');
SELECT throws_ok(format('SELECT ql_private.signature_kid(%L)', ql_test.jws('{"alg":"EdDSA","kid":"a b"}')),
                 'QL001', NULL, 'a kid outside ^[A-Za-z0-9_-]{1,128}$: QL001');

-- Publish stores the signature; a malformed one changes nothing.
SET LOCAL ROLE ql_runtime;
SELECT throws_ok(format($$SELECT ql.publish_revision('sig', 'job', %L::bytea, NULL, 'x..y')$$, :'content'),
                 'QL001', NULL, 'publish with a malformed signature: QL001');
RESET ROLE;
SELECT is((SELECT count(*) FROM ql_private.projects WHERE name = 'sig'), 0::bigint,
          'a refused publish writes nothing');
SET LOCAL ROLE ql_runtime;
SELECT ql.publish_revision('sig', 'job', :'content') AS unsigned \gset
SELECT ql.publish_revision('sig', 'job', :'content', NULL, :'sig1') AS signed \gset
SELECT ql.publish_revision('sig', 'job', :'content', NULL, :'sig1') AS signed_again \gset
SELECT ql.publish_revision('sig', 'job', :'content') AS unsigned_again \gset
SELECT ql.publish_revision('sig', 'job', :'content', NULL, :'sig2') AS resigned \gset
RESET ROLE;
SELECT is(:'unsigned'::jsonb -> 'signatureKid', 'null'::jsonb, 'unsigned publish: signatureKid null');
SELECT ok((:'signed'::jsonb ->> 'created')::boolean
          AND (:'signed'::jsonb ->> 'revision')::int = 2
          AND :'signed'::jsonb ->> 'signatureKid' = 'key-1',
          'signing identical unsigned content makes a new revision (2), signed key-1');
SELECT is(:'signed_again'::jsonb - 'created', :'signed'::jsonb - 'created',
          'the same signature again: the same revision');
SELECT is((:'signed_again'::jsonb ->> 'created')::boolean, false, 'created = false');
SELECT is(:'unsigned_again'::jsonb ->> 'revisionId', :'signed'::jsonb ->> 'revisionId',
          'an unsigned re-publish of identical content keeps the signed revision');
SELECT ok((:'resigned'::jsonb ->> 'revision')::int = 3
          AND :'resigned'::jsonb ->> 'signatureKid' = 'key-2',
          're-signing with another key: a new revision (3)');
SELECT results_eq(
    format($$SELECT signature_kid, signature_jws FROM ql_private.execution_revisions
              WHERE task_id = %L::uuid ORDER BY revision$$, :'signed'::jsonb ->> 'taskId'),
    format($$VALUES (NULL::text, NULL::text), ('key-1', %L), ('key-2', %L)$$, :'sig1', :'sig2'),
    'stored with each revision: kid and JWS, NULL when unsigned');

-- Immutable: the signature cannot be changed, added or dropped.
SELECT throws_ok(format($$UPDATE ql_private.execution_revisions SET signature_jws = %L,
                            signature_kid = 'key-2' WHERE id = %L::uuid$$,
                        :'sig2', :'signed'::jsonb ->> 'revisionId'),
                 'QL021', NULL, 'changing a stored signature: QL021');
SELECT throws_ok(format($$UPDATE ql_private.execution_revisions SET signature_jws = NULL,
                            signature_kid = NULL WHERE id = %L::uuid$$,
                        :'signed'::jsonb ->> 'revisionId'),
                 'QL021', NULL, 'dropping a stored signature: QL021');
SELECT throws_ok(format($$UPDATE ql_private.execution_revisions SET signature_jws = %L,
                            signature_kid = 'key-1' WHERE id = %L::uuid$$,
                        :'sig1', :'unsigned'::jsonb ->> 'revisionId'),
                 'QL021', NULL, 'signing a stored unsigned revision: QL021');

-- The offer carries it: {kid, jws}, null when unsigned.
SELECT is((SELECT ql_private.offer_json(NULL::ql_private.run_leases, NULL::ql_private.runs, er)
                  -> 'executionRevision' -> 'signature'
             FROM ql_private.execution_revisions er WHERE er.id = (:'signed'::jsonb ->> 'revisionId')::uuid),
          jsonb_build_object('kid', 'key-1', 'jws', :'sig1'),
          'offer executionRevision.signature = {kid, jws}');
SELECT is((SELECT ql_private.offer_json(NULL::ql_private.run_leases, NULL::ql_private.runs, er)
                  -> 'executionRevision' -> 'signature'
             FROM ql_private.execution_revisions er WHERE er.id = (:'unsigned'::jsonb ->> 'revisionId')::uuid),
          'null'::jsonb, 'unsigned revision: signature null');

SELECT * FROM finish();
ROLLBACK;
