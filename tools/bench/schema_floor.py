"""The floor of a claim on QingLong's own schema, for `bench sql`.

`qlbench.floor_claim` writes what a claim must write in our data model and
nothing else: it picks the first ready run in candidate order with
`FOR NO KEY UPDATE SKIP LOCKED`, inserts its lease (every index and CHECK of
`ql_private.run_leases`), moves the run to `dispatching` (the run's indexes)
and appends the `run.dispatched` event — the three writes SPEC §3.3 step 3
requires. It skips every guarantee `ql.pull_offer` adds on top: credential,
session fences and slot count, the offer-id replay check, placement, the
attempt's lock and fences, the lease generation, the offer projection. Its
rate next to the raw claim's says how much of the gap is the schema itself
(the cost no implementation of the pull can avoid without changing what is
stored) and how much is the pull's own logic.

Bench-only: it lives in the `qlbench` schema of the benchmark's throwaway
database, next to the raw claim, and is never installed anywhere else.
"""

from __future__ import annotations

import psycopg

from tools.bench.common import Timings
from tools.bench.raw import drain

SCHEMA_SQL = """
CREATE SCHEMA IF NOT EXISTS qlbench;
CREATE OR REPLACE FUNCTION qlbench.floor_claim(p_worker text) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    -- Stand-ins for the worker and session a real claim takes from its session
    -- row (no foreign key checks them on the claim path either).
    v_worker uuid := md5('worker:' || p_worker)::uuid;
    v_session uuid := md5('session:' || p_worker)::uuid;
    r record;
BEGIN
    SELECT cr.id, cr.current_attempt_id, cr.execution_revision_id, er.content_digest
      INTO r
      FROM ql_private.runs cr
      JOIN ql_private.execution_revisions er ON er.id = cr.execution_revision_id
     WHERE cr.state = 'queued' AND cr.runtime_owned AND NOT cr.cancel_requested
       AND cr.due_at IS NULL
     ORDER BY -(cr.priority::integer), cr.queue_seq, cr.id
     LIMIT 1
       FOR NO KEY UPDATE OF cr SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The claim's own lease insert (db/functions/claim_candidate.sql), column for
    -- column — deliberately the same write; tests/py/test_bench_schema_floor.py
    -- keeps the two lists equal.
    INSERT INTO ql_private.run_leases (
        attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
        lease_version, offer_id, token_digest, execution_revision_id, content_digest,
        placement_score, claimed_at, expires_at, lease_ttl_seconds, log_limit_bytes,
        updated_at)
    VALUES (
        r.current_attempt_id, r.id, v_worker, v_session, 1, 1, 1, gen_random_uuid(),
        sha256(convert_to(gen_random_uuid()::text, 'UTF8')), r.execution_revision_id,
        r.content_digest, 0, v_now, v_now + interval '30 seconds', 30, 4194304, v_now);
    UPDATE ql_private.runs SET state = 'dispatching', updated_at = v_now WHERE id = r.id;
    INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
    VALUES ('run.dispatched', r.id, r.current_attempt_id,
            jsonb_build_object('workerId', v_worker, 'sessionId', v_session));
    RETURN r.id;
END
$$;
"""


def install(conn: psycopg.Connection) -> None:
    conn.execute(SCHEMA_SQL)


def floor_drain(dsn: str, clients: int, warmup: int = 2) -> Timings:
    """`clients` threads call qlbench.floor_claim until no ready run is left (as
    raw.drain does with the raw claim); enqueue `clients * warmup` extra runs."""
    return drain(dsn, clients, warmup, claim="qlbench.floor_claim")
