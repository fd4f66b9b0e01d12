-- ql_private.credential_first_use (SPEC §16.2): the first use of a rotated
-- credential records first_used_at and moves its predecessor's expiry to now
-- (never later than it was); a second call changes nothing. (Its NOTIFY is
-- sent at commit, which a rolled-back pgTAP file cannot see.)
BEGIN;
SELECT plan(9);
\ir fixtures.psql

SELECT worker_id AS w1 FROM ql_test.new_worker('w1') \gset
SELECT ql_test.credential_id('w1') AS old \gset
SELECT ql.rotate_credential(:'old', ql_test.secret_digest('w1'), :'w1', 'newnewnewnewnew1',
                            ql_test.secret_digest('new1')) IS NOT NULL AS c \gset
SELECT ql.issue_credential(:'w1', 'otherotherother1', ql_test.secret_digest('o1')) \gset
CREATE FUNCTION pg_temp.cred(id text) RETURNS ql_private.worker_credentials LANGUAGE sql AS $$
    SELECT * FROM ql_private.worker_credentials WHERE credential_id = id $$;

SELECT ok((pg_temp.cred(:'old')).expires_at > clock_timestamp() + interval '23 hours',
          'after the rotation the old credential stays valid (24 h grace)');
SELECT ok((pg_temp.cred('newnewnewnewnew1')).first_used_at IS NULL, '... and the new one is unused');

SELECT clock_timestamp() AS t0 \gset
SELECT ql_private.credential_first_use('newnewnewnewnew1', :'old');
SELECT ok((pg_temp.cred('newnewnewnewnew1')).first_used_at >= :'t0'::timestamptz, 'first use: first_used_at set');
SELECT ok((pg_temp.cred(:'old')).expires_at BETWEEN :'t0'::timestamptz AND clock_timestamp(),
          '... the predecessor expires now');
SELECT is((pg_temp.cred('otherotherother1')).expires_at, NULL, '... no other credential touched');

-- A second call (a concurrent first use): nothing changes.
UPDATE ql_private.worker_credentials SET expires_at = clock_timestamp() + interval '1 hour'
 WHERE credential_id = :'old';
SELECT (pg_temp.cred('newnewnewnewnew1')).first_used_at AS first \gset
SELECT ql_private.credential_first_use('newnewnewnewnew1', :'old');
SELECT is((pg_temp.cred('newnewnewnewnew1')).first_used_at, :'first'::timestamptz, 'second call: first_used_at kept');
SELECT ok((pg_temp.cred(:'old')).expires_at > clock_timestamp() + interval '59 minutes',
          '... and the predecessor not touched again');

-- never later: a predecessor already expired keeps its earlier expiry.
UPDATE ql_private.worker_credentials SET first_used_at = NULL WHERE credential_id = 'newnewnewnewnew1';
UPDATE ql_private.worker_credentials SET created_at = '1999-01-01 00:00:00+00',
       expires_at = '2000-01-01 00:00:00+00' WHERE credential_id = :'old';
SELECT ql_private.credential_first_use('newnewnewnewnew1', :'old');
SELECT is((pg_temp.cred(:'old')).expires_at, '2000-01-01 00:00:00+00'::timestamptz,
          'an earlier expiry is kept (least of the two)');
-- a predecessor that never expired: now.
UPDATE ql_private.worker_credentials SET first_used_at = NULL WHERE credential_id = 'newnewnewnewnew1';
UPDATE ql_private.worker_credentials SET expires_at = NULL WHERE credential_id = :'old';
SELECT ql_private.credential_first_use('newnewnewnewnew1', :'old');
SELECT ok((pg_temp.cred(:'old')).expires_at <= clock_timestamp(), 'a never-expiring predecessor expires now');

SELECT * FROM finish();
ROLLBACK;
