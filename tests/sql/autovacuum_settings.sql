-- Queue tables carry queue-fit autovacuum settings (migration 0002): vacuum on an
-- absolute threshold without cost throttling, page room for state updates.
BEGIN;
SELECT plan(9);

CREATE FUNCTION pg_temp.opts(t text) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = ('ql_private.' || t)::regclass
$$;

SELECT ok(pg_temp.opts('runs') @> ARRAY['fillfactor=80', 'autovacuum_vacuum_scale_factor=0',
          'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_cost_delay=0',
          'autovacuum_analyze_scale_factor=0', 'autovacuum_analyze_threshold=5000'],
          'runs: absolute vacuum/analyze thresholds, no cost delay, fillfactor 80');
SELECT ok(pg_temp.opts('attempts') @> ARRAY['fillfactor=80', 'autovacuum_vacuum_scale_factor=0',
          'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_cost_delay=0'],
          'attempts: queue settings');
SELECT ok(pg_temp.opts('run_leases') @> ARRAY['fillfactor=80', 'autovacuum_vacuum_scale_factor=0',
          'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_cost_delay=0'],
          'run_leases: queue settings');
SELECT ok(pg_temp.opts('worker_sessions') @> ARRAY['fillfactor=50', 'autovacuum_vacuum_scale_factor=0',
          'autovacuum_vacuum_threshold=500'],
          'worker_sessions: heartbeat-heavy settings');
SELECT ok(pg_temp.opts('events') @> ARRAY['autovacuum_vacuum_insert_scale_factor=0',
          'autovacuum_vacuum_insert_threshold=10000'],
          'events: append-only visibility-map vacuum');
SELECT is((SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'ql_private' AND c.relname IN ('runs', 'attempts', 'run_leases')
              AND NOT ('autovacuum_vacuum_scale_factor=0' = ANY (coalesce(c.reloptions, '{}')))),
          0::bigint, 'no queue table falls back to the default 20 % scale factor');
SELECT is((SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'ql_private' AND c.relname IN ('runs', 'attempts', 'run_leases')
              AND 'vacuum_index_cleanup=on' = ANY (coalesce(c.reloptions, '{}'))),
          3::bigint, 'queue tables never bypass the index pass of a vacuum (0007)');

SELECT ok(pg_temp.opts('run_leases') @> ARRAY['autovacuum_vacuum_insert_threshold=1000',
          'autovacuum_vacuum_insert_scale_factor=0'],
          'run_leases: insert-triggered vacuums keep the visibility map set (0008)');
SELECT is((SELECT pg_get_indexdef('ql_private.run_leases_session_live_counted'::regclass)),
          'CREATE INDEX run_leases_session_live_counted ON ql_private.run_leases USING btree '
          '(session_id) INCLUDE (started_at, expires_at) WHERE (released_at IS NULL)',
          'slot counts read only the index: session_id plus the columns "live" needs (0008)');

SELECT * FROM finish();
ROLLBACK;
