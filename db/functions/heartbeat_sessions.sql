-- ql.heartbeat_sessions(items jsonb) -> jsonb
--
-- Purpose: many session heartbeats (SPEC §5 /v1/sessions/heartbeat) in one
--   database call: an ingress replica batches the heartbeats that arrive within
--   a few milliseconds (10,000 workers heartbeating every 20 s would
--   otherwise be 500 calls/s). `items` is a JSON array of 1..64
--   {"credentialId", "secretDigest": <64 hex>, "workerId", "sessionId",
--   "generation"}. Each item runs ql.heartbeat_session itself (authenticate,
--   fence, extend: the same logic, not a copy) in its own subtransaction, so one
--   item's error rolls back that item only. Returns a JSON array in item order:
--   each element is exactly what ql.heartbeat_session returned for that item
--   ({"status":"ok","session":{...}} or the denial envelope), or
--   {"status":"error","sqlstate":...} for what it raised (QL001/QL010-QL013 or
--   anything else), which the ingress maps exactly as for the single call.
--   Items are processed in session id order (a deterministic lock order between
--   concurrent batches); the answer keeps the input order. At most 64 items: one
--   subtransaction id each stays within PostgreSQL's per-backend subxid cache, so
--   other backends' snapshots never overflow to pg_subtrans.
-- Caller: ql_worker_ingress. Locks: each item's session row (UPDATE), as
--   ql.heartbeat_session. Idempotency: as ql.heartbeat_session (expires_at only
--   moves forward). SQLSTATEs: QL001 items not an array of objects; QL002 more
--   than 64 items.
CREATE OR REPLACE FUNCTION ql.heartbeat_sessions(items jsonb)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_items constant integer := 64;
    n integer;
    results jsonb[];
    it record;
    one jsonb;
BEGIN
    IF heartbeat_sessions.items IS NULL OR jsonb_typeof(heartbeat_sessions.items) <> 'array'
       OR jsonb_array_length(heartbeat_sessions.items) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be a non-empty array';
    END IF;
    n := jsonb_array_length(heartbeat_sessions.items);
    IF n > max_items THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', MESSAGE = 'at most 64 items';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(heartbeat_sessions.items) e
                WHERE jsonb_typeof(e) <> 'object') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'items must be objects';
    END IF;
    results := array_fill(NULL::jsonb, ARRAY[n]);
    FOR it IN
        SELECT e.ord::integer AS ord, e.value AS item
          FROM jsonb_array_elements(heartbeat_sessions.items) WITH ORDINALITY AS e(value, ord)
         ORDER BY e.value ->> 'sessionId', e.ord
    LOOP
        BEGIN
            one := ql.heartbeat_session(
                it.item ->> 'credentialId',
                decode(it.item ->> 'secretDigest', 'hex'),
                it.item ->> 'workerId',
                it.item ->> 'sessionId',
                (it.item ->> 'generation')::bigint);
        EXCEPTION WHEN OTHERS THEN
            one := jsonb_build_object('status', 'error', 'sqlstate', SQLSTATE);
        END;
        results[it.ord] := one;
    END LOOP;
    RETURN to_jsonb(results);
END
$$;
REVOKE ALL ON FUNCTION ql.heartbeat_sessions(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.heartbeat_sessions(jsonb) TO ql_worker_ingress;
COMMENT ON FUNCTION ql.heartbeat_sessions(jsonb) IS
'Batch of 1..64 session heartbeats [{credentialId, secretDigest hex, workerId, sessionId, generation}] -> array (input order) of exactly what ql.heartbeat_session returns per item, or {status: error, sqlstate} for what it raised; each item in its own subtransaction (one failure affects no other item), processed in sessionId order. Caller: ql_worker_ingress. Locks: each session row (UPDATE). QL001 not an array of objects, QL002 > 64 items.';
