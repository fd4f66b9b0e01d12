-- ql.rotate_credential as ql_worker_ingress (SPEC 16.2): a new credential with
-- the same lifetime; the old one stays valid until the new one's first use
-- (then expired_credential) or 24 h; rotating again from the old one revokes
-- the unused successor; an expired credential is refused (also by
-- confirm_credentials); denials are envelopes with one audit row; malformed
-- input QL001 by SQLSTATE, nothing written.
BEGIN;
SELECT plan(21);
\ir fixtures.psql

SELECT ql.register_worker('rot') ->> 'workerId' AS w \gset
SELECT ql.issue_credential(:'w', 'oldoldoldoldold1', ql_test.secret_digest('old'), 3600) AS issued \gset
SELECT ok((:'issued'::jsonb ->> 'expiresAtMs')::bigint
          BETWEEN ql_private.epoch_ms(clock_timestamp() + interval '3590 seconds')
              AND ql_private.epoch_ms(clock_timestamp() + interval '3610 seconds'),
          'issue_credential with a ttl answers its expiry');

SET LOCAL ROLE ql_worker_ingress;
SELECT ql.rotate_credential('oldoldoldoldold1', ql_test.secret_digest('old'), :'w',
                            'newnewnewnewnew1', ql_test.secret_digest('new1')) AS r1 \gset
RESET ROLE;
SELECT is(:'r1'::jsonb ->> 'status', 'ok', 'rotation answers ok');
SELECT is(:'r1'::jsonb #>> '{credential,credentialId}', 'newnewnewnewnew1', 'the new credential id');
SELECT is(:'r1'::jsonb #>> '{credential,previousCredentialId}', 'oldoldoldoldold1', 'and the previous one');
SELECT ok(((:'r1'::jsonb #>> '{credential,expiresAtMs}')::bigint
           - (:'r1'::jsonb #>> '{credential,issuedAtMs}')::bigint) = 3600000,
          'the new credential has the same lifetime');
SELECT ok((:'r1'::jsonb #>> '{credential,previousExpiresAtMs}')::bigint
          <= ql_private.epoch_ms(clock_timestamp() + interval '24 hours'),
          'the old one expires within 24 h at the latest');
SELECT is((SELECT count(*) FROM ql_private.events WHERE type = 'worker.credential_rotated'
             AND worker_id = :'w'::uuid), 1::bigint, 'one worker.credential_rotated event');
SELECT is(ql.authenticate_worker('oldoldoldoldold1', ql_test.secret_digest('old'), :'w', 'offer.pull'),
          '{"status":"ok"}'::jsonb, 'the old credential still works before the new one is used');

-- Lost answer: rotate again from the old credential; the unused successor is revoked.
SET LOCAL ROLE ql_worker_ingress;
SELECT ql.rotate_credential('oldoldoldoldold1', ql_test.secret_digest('old'), :'w',
                            'newnewnewnewnew2', ql_test.secret_digest('new2')) AS r2 \gset
RESET ROLE;
SELECT is(ql.authenticate_worker('newnewnewnewnew1', ql_test.secret_digest('new1'), :'w', 'offer.pull') ->> 'reason',
          'revoked_credential', 'a second rotation revokes the never-used successor');

SELECT ql_test.mark();
SELECT is(ql.authenticate_worker('newnewnewnewnew2', ql_test.secret_digest('new2'), :'w', 'offer.pull'),
          '{"status":"ok"}'::jsonb, 'the new credential works');
SELECT is(ql_test.writes_since_mark(), 2::bigint, 'its first use writes its first_used_at and the old one''s expiry');
SELECT is(ql.authenticate_worker('oldoldoldoldold1', ql_test.secret_digest('old'), :'w', 'offer.pull') ->> 'reason',
          'expired_credential', 'after the new one''s first use the old one is refused');
SELECT ql_test.mark();
SELECT is(ql.authenticate_worker('newnewnewnewnew2', ql_test.secret_digest('new2'), :'w', 'offer.pull'),
          '{"status":"ok"}'::jsonb, 'the new credential again');
SELECT is(ql_test.writes_since_mark(), 0::bigint, 'writes nothing after its first use');

-- Expiry by lifetime, also for the idle view's re-confirmation.
UPDATE ql_private.worker_credentials SET expires_at = clock_timestamp() - interval '1 second',
       created_at = clock_timestamp() - interval '2 seconds'
 WHERE credential_id = 'newnewnewnewnew2';
SELECT is(ql.authenticate_worker('newnewnewnewnew2', ql_test.secret_digest('new2'), :'w', 'offer.pull') ->> 'reason',
          'expired_credential', 'an expired credential is refused (401 expired_credential)');
SELECT is(ql.confirm_credentials(ARRAY['newnewnewnewnew2'], ARRAY[ql_test.secret_digest('new2')], ARRAY[:'w']),
          ARRAY[]::text[], 'and not re-confirmed for an idle view cache');
SELECT is((SELECT c ->> 'state' FROM jsonb_array_elements(ql.list_workers() -> 'workers') w,
                   jsonb_array_elements(w -> 'credentials') c
             WHERE c ->> 'credentialId' = 'newnewnewnewnew2'),
          'expired', 'admin worker list shows it expired');

SELECT ql_test.mark();
SET LOCAL ROLE ql_worker_ingress;
SELECT is(ql.rotate_credential('newnewnewnewnew2', ql_test.secret_digest('new2'), :'w',
                               'newnewnewnewnew3', ql_test.secret_digest('new3')) ->> 'reason',
          'expired_credential', 'an expired credential cannot rotate');
RESET ROLE;
SELECT is(ql_test.writes_since_mark(), 1::bigint, 'a refused rotation writes its one audit row');

SET LOCAL ROLE ql_worker_ingress;
SELECT throws_ok(format($$SELECT ql.rotate_credential('oldoldoldoldold1', %L::bytea, %L, 'BAD', %L::bytea)$$,
                        ql_test.secret_digest('old'), :'w', ql_test.secret_digest('x')),
                 'QL001', NULL, 'malformed new credential id -> QL001');
SELECT throws_ok(format($$SELECT ql.rotate_credential('oldoldoldoldold1', %L::bytea, %L, 'newnewnewnewnew9', '\x00'::bytea)$$,
                        ql_test.secret_digest('old'), :'w'),
                 'QL001', NULL, 'malformed new digest -> QL001');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
