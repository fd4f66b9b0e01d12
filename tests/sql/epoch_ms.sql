-- ql_private.epoch_ms: a time -> integer milliseconds since the epoch (SPEC
-- §4), truncated toward the past (never a later instant than recorded, before
-- 1970 too); NULL in, NULL out; an inlinable SQL function.
BEGIN;
SELECT plan(7);

SELECT is(ql_private.epoch_ms('1970-01-01 00:00:00+00'), 0::bigint, 'the epoch is 0');
SELECT is(ql_private.epoch_ms('2026-12-03 12:00:00.123456+00'), 1796299200123::bigint,
          'microseconds are dropped (.123456 -> 123)');
SELECT is(ql_private.epoch_ms('2026-12-03 12:00:00.999999+00'), 1796299200999::bigint,
          'truncated, never rounded up (.999999 -> 999)');
SELECT is(ql_private.epoch_ms('1969-12-31 23:59:59.9995+00'), -1::bigint,
          'before the epoch: toward the past (-0.5 ms -> -1)');
SELECT is(ql_private.epoch_ms('2026-12-03 13:00:00.5+01'), 1796299200500::bigint, 'time zones do not matter');
SELECT is(ql_private.epoch_ms(NULL), NULL, 'NULL in, NULL out');
SELECT ok((SELECT l.lanname = 'sql' AND p.proconfig IS NULL AND NOT p.prosecdef AND p.provolatile = 's'
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.epoch_ms(timestamptz)'::regprocedure),
          'a STABLE SQL function without SET clause (inlinable)');

SELECT * FROM finish();
ROLLBACK;
