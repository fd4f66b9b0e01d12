-- ql_private.xid_in_progress: a tuple's 32-bit xmax read against a snapshot
-- (the hint candidate_page uses to pass over rows a concurrent claim holds).
BEGIN;
SELECT plan(11);

SELECT is(ql_private.xid_in_progress('0', '100:200:150', NULL), false, 'no xmax: not in progress');
SELECT is(ql_private.xid_in_progress('150', '100:200:150', NULL), true, 'listed in xip: in progress');
SELECT is(ql_private.xid_in_progress('160', '100:200:150', NULL), false,
          'between xmin and xmax, not in xip: finished');
SELECT is(ql_private.xid_in_progress('99', '100:200:150', NULL), false, 'below xmin: finished');
SELECT is(ql_private.xid_in_progress('200', '100:200:150', NULL), true,
          'at the snapshot xmax: started after it, in progress');
SELECT is(ql_private.xid_in_progress('4295', '100:200:150', NULL), true, 'within 4096 above xmax');
SELECT is(ql_private.xid_in_progress('5000', '100:200:150', NULL), false,
          'far above xmax (e.g. a MultiXactId): not taken as in progress');
-- Epoch 1: xmin 2^32 - 6, xmax 2^32 + 4; 32-bit xids wrap around.
SELECT is(ql_private.xid_in_progress('4294967295', '4294967290:4294967300:4294967295', NULL), true,
          'wraparound: the listed xid before the wrap is in progress');
SELECT is(ql_private.xid_in_progress('2', '4294967290:4294967300:4294967295', NULL), false,
          'wraparound: xid 2 of the next epoch, not listed, is finished');
SELECT is(ql_private.xid_in_progress('5', '4294967290:4294967300:4294967295', NULL), true,
          'wraparound: xid 5 of the next epoch is at or above xmax: in progress');

SELECT is(ql_private.xid_in_progress('150', '100:200:150', '150'), false,
          'the caller''s own transaction is never someone else''s claim');

SELECT * FROM finish();
ROLLBACK;
