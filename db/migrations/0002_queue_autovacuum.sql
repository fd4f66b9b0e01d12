-- 0002 queue-fit autovacuum settings.
--
-- Why: the default scale factor (20 % of the table) lets dead tuples pile up in
-- proportion to queue depth. Measured on this design: at 1M queued runs default
-- autovacuum let claims decay to 0.39x within 30 s, and an empty poll right after
-- a 100k drain read 495 buffers instead of 1, because the keyset index scan walks
-- dead index entries until vacuum removes them. Queue tables therefore vacuum on
-- an absolute threshold (scale factor 0) without cost-based throttling, and leave
-- page room (fillfactor) so state updates can stay on the same page.
-- tests/sql/autovacuum_settings.sql pins these values.

ALTER TABLE ql_private.runs SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000
);

ALTER TABLE ql_private.attempts SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000
);

ALTER TABLE ql_private.run_leases SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000
);

-- Heartbeats rewrite session rows constantly; keep them on their page.
ALTER TABLE ql_private.worker_sessions SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_cost_delay = 0
);

-- Append-only: vacuum for the visibility map (index-only scans), not for dead rows.
ALTER TABLE ql_private.events SET (
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);
