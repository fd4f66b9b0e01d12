-- ql_private.idle_view_notify and the triggers of migration 0005 that call it:
-- they exist, fire AFTER, and the session trigger fires on fence facts only (never
-- a heartbeat); the trigger function is not callable by the ingress.
-- Notification delivery itself needs commits (this file rolls back), so
-- tests/py/test_ingress_idle_view_notify.py proves which paths notify.
BEGIN;
SELECT plan(8);

SELECT has_function('ql_private', 'idle_view_notify', ARRAY[]::text[],
                    'ql_private.idle_view_notify() exists');
SELECT ok(NOT has_function_privilege('ql_worker_ingress', 'ql_private.idle_view_notify()', 'EXECUTE'),
          'the trigger function is not callable by the ingress');

-- Triggers: AFTER, row-level with WHEN where a bulk statement must stay cheap.
SELECT triggers_are('ql_private', 'runs',
    ARRAY['runs_idle_view_insert', 'runs_idle_view_requeue', 'runs_referenced_by_events',
          'runs_default_pool'],
    'runs: the idle view triggers (and the delete guard, and the pool of a run inserted without one)');
SELECT triggers_are('ql_private', 'attempts',
    ARRAY['attempts_idle_view_insert', 'attempts_idle_view_update',
          'attempts_no_truncate_under_leases', 'attempts_referenced_by_leases'],
    'attempts: the idle view triggers (and the delete guards)');
SELECT triggers_are('ql_private', 'worker_credentials',
    ARRAY['worker_credentials_idle_view_update', 'worker_credentials_idle_view_delete'],
    'worker_credentials: the idle view triggers');
SELECT triggers_are('ql_private', 'worker_sessions',
    ARRAY['worker_sessions_idle_view_update', 'worker_sessions_idle_view_delete',
          'worker_sessions_no_truncate_under_leases',
          'worker_sessions_referenced_by_live_leases'],
    'worker_sessions: the idle view triggers (and the delete guards)');
SELECT is((SELECT array_agg(tgname::text ORDER BY tgname) FROM pg_trigger
            WHERE tgname LIKE '%idle_view%' AND tgfoid = 'ql_private.idle_view_notify()'::regprocedure
              AND (tgtype & 2) = 0),  -- bit 1 = BEFORE
          ARRAY['attempts_idle_view_insert', 'attempts_idle_view_update', 'runs_idle_view_insert',
                'runs_idle_view_requeue', 'worker_credentials_idle_view_delete',
                'worker_credentials_idle_view_update', 'worker_sessions_idle_view_delete',
                'worker_sessions_idle_view_update'],
          'every idle view trigger is AFTER and calls ql_private.idle_view_notify()');
SELECT ok((SELECT pg_get_triggerdef(oid) LIKE '%expires_at < old.expires_at%'
             AND pg_get_triggerdef(oid) NOT LIKE '%heartbeat_at%'
             FROM pg_trigger WHERE tgname = 'worker_sessions_idle_view_update'),
          'session trigger: only fence facts and expiry moving back, never a heartbeat');

SELECT * FROM finish();
ROLLBACK;
