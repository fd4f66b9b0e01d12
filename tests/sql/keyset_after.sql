-- ql_private.keyset_after: the one keyset position of the candidate scans, in
-- claim order priority DESC, queue_seq, id; a NULL position is before every run.
-- It must stay inlinable (LANGUAGE sql, IMMUTABLE, no SET, not SECURITY DEFINER,
-- not STRICT), so a scan that uses it still reads its keyset index by an Index
-- Cond row comparison (the last checks plan a scan that uses it).
BEGIN;
SELECT plan(14);
\ir fixtures.psql

SELECT has_function('ql_private', 'keyset_after',
                    ARRAY['smallint', 'bigint', 'uuid', 'smallint', 'bigint', 'uuid'],
                    'ql_private.keyset_after(smallint, bigint, uuid, smallint, bigint, uuid) exists');
SELECT is((SELECT l.lanname::text || ' ' || p.provolatile::text || ' secdef=' || p.prosecdef::text || ' strict=' || p.proisstrict::text
                  || ' config=' || coalesce(array_to_string(p.proconfig, ','), '')
             FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'ql_private.keyset_after(smallint, bigint, uuid, smallint, bigint, uuid)'::regprocedure),
          'sql i secdef=false strict=false config=',
          'inlinable: LANGUAGE sql, IMMUTABLE, not SECURITY DEFINER, not STRICT, no SET clause');

CREATE FUNCTION pg_temp.after(pri integer, seq bigint, id text, apri integer, aseq bigint, aid text)
RETURNS boolean LANGUAGE sql AS $$
    SELECT ql_private.keyset_after(pri::smallint, seq, id::uuid, apri::smallint, aseq, aid::uuid)
$$;
SELECT is(pg_temp.after(0, 1, '00000000-0000-4000-8000-000000000001', NULL, NULL, NULL), true,
          'no position (first page): every run is after it');
SELECT is(pg_temp.after(-32768, 9223372036854775807, 'ffffffff-ffff-4fff-bfff-ffffffffffff', NULL, NULL, NULL),
          true, '... the lowest priority and the last sequence too');
SELECT is(pg_temp.after(1, 1, '00000000-0000-4000-8000-000000000001', 2, 100, '00000000-0000-4000-8000-000000000009'),
          true, 'a lower priority comes after a higher one, whatever its sequence');
SELECT is(pg_temp.after(2, 100, '00000000-0000-4000-8000-000000000009', 1, 1, '00000000-0000-4000-8000-000000000001'),
          false, 'a higher priority comes before a lower one');
SELECT is(pg_temp.after(1, 6, '00000000-0000-4000-8000-000000000001', 1, 5, '00000000-0000-4000-8000-000000000009'),
          true, 'same priority: a later sequence comes after');
SELECT is(pg_temp.after(1, 4, '00000000-0000-4000-8000-000000000009', 1, 5, '00000000-0000-4000-8000-000000000001'),
          false, 'same priority: an earlier sequence comes before');
SELECT is(pg_temp.after(1, 5, '00000000-0000-4000-8000-000000000002', 1, 5, '00000000-0000-4000-8000-000000000001'),
          true, 'same priority and sequence: the larger id comes after');
SELECT is(pg_temp.after(1, 5, '00000000-0000-4000-8000-000000000001', 1, 5, '00000000-0000-4000-8000-000000000001'),
          false, 'the position itself is not after itself (a page never repeats its last row)');

-- Inlined into a scan: the row comparison is the Index Cond of runs_candidate_keyset
-- (a call left in the plan would be a per-row Filter reading the queue from its head).
SELECT ql_test.publish() ->> 'taskId' AS task \gset
SELECT ql_test.enqueue(:'task', 20, 1) IS NOT NULL AS enqueued;
ANALYZE ql_private.runs;
SET LOCAL enable_seqscan = off;
PREPARE page(smallint, bigint, uuid) AS
    SELECT r.id FROM ql_private.runs r
     WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id, $1, $2, $3)
       AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested AND r.due_at IS NULL
     ORDER BY -(r.priority::integer), r.queue_seq, r.id
     LIMIT 9;
SET LOCAL plan_cache_mode = force_generic_plan;
CREATE FUNCTION pg_temp.plan() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_line text;
    v_plan text := '';
BEGIN
    FOR v_line IN EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE page(NULL, NULL, NULL)' LOOP
        v_plan := v_plan || v_line || E'\n';
    END LOOP;
    RETURN v_plan;
END
$$;
SELECT matches(pg_temp.plan(), 'Index Scan using runs_candidate_keyset on runs',
               'a scan using it reads runs_candidate_keyset (generic plan)');
SELECT matches(pg_temp.plan(), 'Index Cond: \(ROW\(\(- \(priority\)::integer\), queue_seq, id\) > ROW\(',
               '... with the row comparison as its Index Cond');
SELECT doesnt_match(pg_temp.plan(), 'keyset_after', '... inlined: no call of the function left in the plan');
SELECT is((SELECT array_agg(x.id ORDER BY x.n) FROM (SELECT id, row_number() OVER () AS n
             FROM ql_private.runs r
            WHERE ql_private.keyset_after(r.priority, r.queue_seq, r.id, NULL, NULL, NULL)
              AND r.state = 'queued' AND r.runtime_owned AND NOT r.cancel_requested AND r.due_at IS NULL
            ORDER BY -(r.priority::integer), r.queue_seq, r.id) x),
          (SELECT array_agg(r.id ORDER BY r.queue_seq) FROM ql_private.runs r),
          'a first page holds every queued run, in queue order (one priority)');

SELECT * FROM finish();
ROLLBACK;
