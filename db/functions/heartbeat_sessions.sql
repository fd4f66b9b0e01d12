-- ql.heartbeat_sessions(p_items jsonb) -> jsonb
--
-- Purpose: many session heartbeats (SPEC §5 /v1/sessions/heartbeat) in one
--   database call: an ingress replica batches the heartbeats that arrive within
--   a few milliseconds (10,000 workers heartbeating every 20 s would
--   otherwise be 500 calls/s). Each item runs ql.heartbeat_session itself
--   (authenticate, fence, extend: the same logic, not a copy) in its own
--   subtransaction, so one item's error rolls back that item only. Returns a
--   JSON array in item order: each element is exactly what ql.heartbeat_session
--   returned for that item ({"status":"ok","session":{...}} or the denial
--   envelope), or {"status":"error","sqlstate":...} for what it raised
--   (QL001/QL010-QL013 or anything else), which the ingress maps exactly as for
--   the single call.
-- Inputs: p_items, a JSON array of 1..64 {"credentialId", "secretDigest": <64
--   hex>, "workerId", "sessionId", "generation"}. At most 64 items: one
--   subtransaction id each stays within PostgreSQL's per-backend subxid cache, so
--   other backends' snapshots never overflow to pg_subtrans.
-- Fences: per item, those of ql.heartbeat_session.
-- Writes: per item, those of ql.heartbeat_session.
-- Locks: each item's session row (UPDATE), as ql.heartbeat_session. Items are
--   processed in session id order (a deterministic lock order between concurrent
--   batches, so two batches cannot deadlock); the answer keeps the input order.
-- Idempotency: as ql.heartbeat_session (expires_at only moves forward).
-- Errors: QL001 p_items not a non-empty array of objects; QL002 more than 64
--   items. Per-item errors are answered, not raised.
-- Planning: as ql.pull_offer — generic plans, sequential scans off, no JIT —
--   so a plan a pooled connection made while the lease tables were small (a
--   sequential scan of run_leases) does not stay with it as they grow.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.heartbeat_sessions(p_items jsonb)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_max_items constant integer := 64;
    v_count integer;
    v_results jsonb[];
    v_item record;
    v_one jsonb;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be a non-empty array';
    END IF;
    v_count := jsonb_array_length(p_items);
    IF v_count > v_max_items THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'at most 64 items';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_items) e WHERE jsonb_typeof(e) <> 'object') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be objects';
    END IF;
    v_results := array_fill(NULL::jsonb, ARRAY[v_count]);
    FOR v_item IN
        SELECT e.ord::integer AS ord, e.value AS item
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(value, ord)
         ORDER BY e.value ->> 'sessionId', e.ord
    LOOP
        BEGIN
            v_one := ql.heartbeat_session(
                v_item.item ->> 'credentialId',
                decode(v_item.item ->> 'secretDigest', 'hex'),
                v_item.item ->> 'workerId',
                v_item.item ->> 'sessionId',
                (v_item.item ->> 'generation')::bigint);
        EXCEPTION WHEN OTHERS THEN
            v_one := jsonb_build_object('status', 'error', 'sqlstate', SQLSTATE);
        END;
        v_results[v_item.ord] := v_one;
    END LOOP;
    RETURN to_jsonb(v_results);
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_sessions(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_sessions(jsonb) TO ql_worker_ingress;
