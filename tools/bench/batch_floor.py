"""The floor of a batch-10 claim on QingLong's own schema, for `bench sql`.

`qlbench.floor_claim_batch` is "a raw batch-10 SKIP LOCKED claim with
QingLong's writes": what a hand-written, set-based implementation of
`ql.pull_offers` would do for BATCH new offer ids if it made only the row
writes the pull makes per claim (db/functions/claim_candidate.sql) and none of
its checks. One SELECT picks up to `p_n` ready runs in candidate order
(`runs_candidate_keyset`) `FOR NO KEY UPDATE … SKIP LOCKED`; then, each as one
set-based statement over all of them:

- the lease insert (`ql_private.run_leases`, column for column the claim's:
  8 indexes, its CHECK constraints);
- the run update `state -> dispatching, due_at -> NULL, updated_at` (the run's
  state is indexed, so the update is not HOT: a new entry in every index whose
  predicate the new row matches);
- the `run.dispatched` event, with the claim's payload keys.

The claim writes nothing else: no attempt row (it only locks it), no session
row (it only locks it), no NOTIFY (no trigger fires on these writes: the
idle view's requeue trigger only fires when a run returns to `queued`).

Flags drop or add one piece at a time, so the floor's cost can be split:
`p_lease` / `p_event` drop the lease insert / the event; `p_attempt_lock` also
locks each run's attempt `FOR NO KEY UPDATE` (the lock order the pull keeps,
attempt then run: a row lock writes WAL and dirties the attempt's page, as the
pull's does). Stand-in worker and session ids as in `qlbench.floor_claim`
(tools/bench/schema_floor.py): no foreign key checks them on the claim path.

Bench-only: installed into the `qlbench` schema of the benchmark's throwaway
database, never anywhere else. tests/py/test_bench_schema_floor.py keeps its
insert column lists equal to the claim's.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

SCHEMA_SQL = """
CREATE SCHEMA IF NOT EXISTS qlbench;
CREATE OR REPLACE FUNCTION qlbench.floor_claim_batch(
    p_worker text, p_n integer, p_lease boolean, p_event boolean, p_attempt_lock boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_worker uuid := md5('worker:' || p_worker)::uuid;
    v_session uuid := md5('session:' || p_worker)::uuid;
    v_picked record;
BEGIN
    IF p_attempt_lock THEN
        SELECT array_agg(s.id) AS runs,
               array_agg(s.attempt_id) AS attempts,
               array_agg(s.execution_revision_id) AS revisions,
               array_agg(s.content_digest) AS digests
          INTO v_picked
          FROM (SELECT cr.id, ca.id AS attempt_id, cr.execution_revision_id, er.content_digest
                  FROM ql_private.runs cr
                  JOIN ql_private.attempts ca ON ca.id = cr.current_attempt_id
                  JOIN ql_private.execution_revisions er ON er.id = cr.execution_revision_id
                 WHERE cr.state = 'queued' AND cr.runtime_owned AND NOT cr.cancel_requested
                   AND cr.due_at IS NULL
                 ORDER BY -(cr.priority::integer), cr.queue_seq, cr.id
                 LIMIT p_n
                   FOR NO KEY UPDATE OF ca, cr SKIP LOCKED) s;
    ELSE
        SELECT array_agg(s.id) AS runs,
               array_agg(s.current_attempt_id) AS attempts,
               array_agg(s.execution_revision_id) AS revisions,
               array_agg(s.content_digest) AS digests
          INTO v_picked
          FROM (SELECT cr.id, cr.current_attempt_id, cr.execution_revision_id,
                       er.content_digest
                  FROM ql_private.runs cr
                  JOIN ql_private.execution_revisions er ON er.id = cr.execution_revision_id
                 WHERE cr.state = 'queued' AND cr.runtime_owned AND NOT cr.cancel_requested
                   AND cr.due_at IS NULL
                 ORDER BY -(cr.priority::integer), cr.queue_seq, cr.id
                 LIMIT p_n
                   FOR NO KEY UPDATE OF cr SKIP LOCKED) s;
    END IF;
    IF v_picked.runs IS NULL THEN
        RETURN 0;
    END IF;
    IF p_lease THEN
        INSERT INTO ql_private.run_leases (
            attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
            lease_version, offer_id, token_digest, execution_revision_id, content_digest,
            placement_score, claimed_at, expires_at, lease_ttl_seconds, log_limit_bytes,
            updated_at)
        SELECT u.attempt_id, u.run_id, v_worker, v_session, 1, 1, 1, gen_random_uuid(),
               sha256(convert_to(gen_random_uuid()::text, 'UTF8')), u.revision_id,
               u.content_digest, 0, v_now, v_now + interval '30 seconds', 30, 4194304, v_now
          FROM unnest(v_picked.runs, v_picked.attempts, v_picked.revisions, v_picked.digests)
               AS u(run_id, attempt_id, revision_id, content_digest);
    END IF;
    UPDATE ql_private.runs SET state = 'dispatching', due_at = NULL, updated_at = v_now
     WHERE id = ANY (v_picked.runs);
    IF p_event THEN
        INSERT INTO ql_private.events (type, run_id, attempt_id, payload)
        SELECT 'run.dispatched', u.run_id, u.attempt_id, jsonb_build_object(
                   'offerId', gen_random_uuid(),
                   'workerId', v_worker,
                   'sessionId', v_session,
                   'sessionGeneration', 1,
                   'leaseGeneration', 1,
                   'placementScore', 0,
                   'contentDigest', u.content_digest)
          FROM unnest(v_picked.runs, v_picked.attempts, v_picked.digests)
               AS u(run_id, attempt_id, content_digest);
    END IF;
    RETURN cardinality(v_picked.runs);
END
$$;
"""


@dataclass(frozen=True)
class Variant:
    """One way of draining with qlbench.floor_claim_batch."""

    key: str
    label: str
    lease: bool = True
    event: bool = True
    attempt_lock: bool = False


FLOOR = Variant("floor", "floor: pick + lease + run update + event")
VARIANTS = (
    FLOOR,
    Variant("floorLocks", "floor + attempt lock", attempt_lock=True),
    Variant("noEvent", "floor - event", event=False),
    Variant("noLease", "floor - lease", lease=False),
    Variant("runOnly", "pick + run update only", lease=False, event=False),
)


def install(conn: psycopg.Connection) -> None:
    conn.execute(SCHEMA_SQL)
