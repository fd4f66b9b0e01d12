-- ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint) -> bytea
--
-- Purpose: the stored bytes [p_from, p_to) of an attempt's live log (SPEC §15),
--   reassembled from its chunks (ql_private.attempt_log_chunks): what
--   ql.run_log shows and what ql.append_log compares a replayed chunk with.
--   The chunks of one attempt are contiguous (each starts where the previous
--   one ended: ql.append_log only appends at the stored length), so the first
--   chunk needed is the last one starting at or before p_from.
-- Cost: two range reads of the chunks' primary key (attempt_id, start_byte):
--   one probe for the first chunk, then the chunks up to p_to, nothing else.
-- Inputs: p_attempt_id; 0 <= p_from <= p_to (the caller bounds them by the
--   stored length; bytes past it are simply not there).
-- Returns the bytes ('' when the range is empty or nothing is stored there).
-- Fences: none. Writes: none. Locks: none. Idempotency: read-only.
-- Errors: none (a range outside the log answers the part of it that exists).
-- Caller: ql.run_log, ql.append_log.
CREATE OR REPLACE FUNCTION ql_private.log_bytes(p_attempt_id uuid, p_from bigint, p_to bigint)
RETURNS bytea
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(string_agg(
               substring(c.content
                         FROM (greatest(p_from - c.start_byte, 0) + 1)::integer
                         FOR (least(c.start_byte + octet_length(c.content), p_to)
                              - greatest(c.start_byte, p_from))::integer),
               ''::bytea ORDER BY c.start_byte), ''::bytea)
      FROM ql_private.attempt_log_chunks c
     WHERE c.attempt_id = p_attempt_id
       AND c.start_byte < p_to
       AND c.start_byte >= coalesce(
               (SELECT max(f.start_byte) FROM ql_private.attempt_log_chunks f
                 WHERE f.attempt_id = p_attempt_id AND f.start_byte <= p_from), 0)
       AND c.start_byte + octet_length(c.content) > p_from
$$;
REVOKE ALL ON FUNCTION ql_private.log_bytes(uuid, bigint, bigint) FROM PUBLIC;
