"""`bench ops`' fixture: a database that has been operated for a week.

Not a measurement. Filling 1,000,000 runs through the claim path would take
hours on the benchmark box, so the history is written set-based, as the
superuser, straight into ql_private (one INSERT statement per chunk of runs,
its data-modifying CTEs writing runs, attempts, leases and events together).
Everything else goes through the SQL API: the tasks (`ql.publish_revision`),
the workers and their credentials (`ql.register_worker`, `ql.issue_credential`)
and their sessions (`ql.open_session`).

The mix, by run position g (0 = oldest; queue_seq follows g):
- the oldest 88 % are terminal, created over the last 7 days (up to 10 minutes
  ago) and finished seconds to minutes later: 88 % succeeded (1 in 20 after a
  failed first attempt), 7 % failed (3 failed attempts, the default
  max_attempts), 5 % cancelled (half while queued: no lease);
- the newest 12 %, created in the last 10 minutes, are live: 90 % queued
  (attempt 1 `claimed`, no lease), 10 % running on a live lease of one of the
  fleet's sessions (started, expires in an hour);
- tasks by g % 10: 50 % / 30 % / 10 % / 10 % over four tasks;
- per attempt with a lease: run.dispatched, run.starting, run.running events
  (plus run.queued for the run, and run.<outcome> or run.retry_scheduled),
  a released lease (`completed` / `cancelled`) and a §9.3 result with a
  120-byte output tail — as the claim path and the executor leave them.

`fill_busy_window` writes the console's worst window instead: every run
terminal, created over 13 minutes ending 90 s ago and finished 5-24 s per
attempt later, so that the last 15 minutes hold ≥ 100,000 dispatches (leases
claimed) and finishes (SPEC §10's page target, where `ql.throughput` reads the
most rows).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import psycopg

from tools.bench.common import Api, Session, capabilities

TERMINAL_SHARE = 0.88
TERMINAL_SPAN_S = 7 * 86400 - 600  # from 7 days ago to 10 minutes ago
LIVE_SPAN_S = 600  # the live runs were queued in the last 10 minutes
EXTRA_TASKS = ("ops-b", "ops-c", "ops-d")
TAIL = "x" * 119 + "\n"

_PLAN = """
plan AS (
    SELECT q.*,
           CASE WHEN q.state = 'failed' THEN 3
                WHEN q.state = 'succeeded' AND q.h %% 20 = 0 THEN 2 ELSE 1 END AS n_att,
           q.state NOT IN ('queued') AND NOT (q.state = 'cancelled' AND q.h %% 2 = 0)
               AS has_lease,
           make_interval(secs => 5 + q.h %% %(took_mod)s) AS took,
           CASE WHEN q.g < %(live_from)s
                THEN %(t0)s::timestamptz + make_interval(secs => q.g * %(step_s)s)
                ELSE %(t_live)s::timestamptz
                     + make_interval(secs => (q.g - %(live_from)s) * %(live_step_s)s)
           END AS created_at
      FROM (SELECT s.g, s.h,
                   md5(%(salt)s || ':r:' || s.g)::uuid AS run_id,
                   CASE WHEN s.g %% 10 < 5 THEN 1 WHEN s.g %% 10 < 8 THEN 2
                        WHEN s.g %% 10 = 8 THEN 3 ELSE 4 END AS ti,
                   1 + (s.g %% cardinality(%(sessions)s::uuid[]))::int AS si,
                   CASE WHEN s.g < %(live_from)s THEN
                            CASE WHEN s.h < 880 THEN 'succeeded' WHEN s.h < 950 THEN 'failed'
                                 ELSE 'cancelled' END
                        WHEN s.h < 900 THEN 'queued' ELSE 'running' END AS state
              FROM (SELECT g, (abs(hashint8(g)) %% 1000)::int AS h
                      FROM generate_series(%(lo)s::bigint, %(hi)s::bigint - 1) g) s) q
), att AS MATERIALIZED (
    SELECT p.*, k, k = p.n_att AS last,
           md5(%(salt)s || ':a:' || p.g || ':' || k)::uuid AS attempt_id,
           p.created_at + p.took * (k - 1) AS a_start,
           p.created_at + p.took * k AS a_end,
           CASE WHEN k < p.n_att THEN 'failed' WHEN p.state = 'queued' THEN 'claimed'
                ELSE p.state END AS a_state
      FROM plan p CROSS JOIN LATERAL generate_series(1, p.n_att) k
)"""

FILL_SQL = (
    "WITH "
    + _PLAN.strip()
    + """, new_runs AS (
    INSERT INTO ql_private.runs (
        id, project_id, task_id, execution_revision_id, priority, queue_seq, state,
        current_attempt_id, placement_class, created_at, updated_at, finished_at, pool_id)
    SELECT p.run_id, %(project)s::uuid, (%(tasks)s::uuid[])[p.ti], (%(revisions)s::uuid[])[p.ti],
           (p.h %% 10 = 0)::int, %(seq_base)s::bigint + p.g,
           p.state, md5(%(salt)s || ':a:' || p.g || ':' || p.n_att)::uuid, %(placement_class)s,
           p.created_at,
           CASE WHEN p.state IN ('succeeded', 'failed', 'cancelled')
                THEN p.created_at + p.took * p.n_att ELSE p.created_at END,
           CASE WHEN p.state IN ('succeeded', 'failed', 'cancelled')
                THEN p.created_at + p.took * p.n_att END,
           (SELECT t.pool_id FROM ql_private.tasks t
             WHERE t.id = (%(tasks)s::uuid[])[p.ti])  -- the task's pool, as enqueue copies it
      FROM plan p ORDER BY p.g
), new_attempts AS (
    INSERT INTO ql_private.attempts (
        id, run_id, attempt_no, executor, state, not_before, exit_code, reason,
        created_at, updated_at, finished_at, result,
        max_attempts, retry_base_ms, retry_cap_ms)
    SELECT a.attempt_id, a.run_id, a.k, 'remote_worker', a.a_state, a.a_start,
           CASE a.a_state WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END,
           CASE a.a_state WHEN 'failed' THEN 'exit_nonzero' WHEN 'cancelled' THEN 'cancelled' END,
           a.a_start,
           CASE WHEN a.a_state IN ('claimed', 'running') THEN a.a_start ELSE a.a_end END,
           CASE WHEN a.a_state NOT IN ('claimed', 'running') THEN a.a_end END,
           CASE WHEN a.has_lease AND a.a_state <> 'running' THEN jsonb_build_object(
               'exitCode', CASE a.a_state WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END,
               'durationMs', (extract(epoch FROM a.took) * 1000)::bigint,
               'outputTail', %(tail)s::text, 'outputBytes', 4096 + a.h) END,
           3, 1000, 300000  -- the pinned retry policy: the tasks' defaults
      FROM att a ORDER BY a.g, a.k
), new_leases AS (
    INSERT INTO ql_private.run_leases (
        attempt_id, run_id, worker_id, session_id, session_generation, lease_generation,
        lease_version, offer_id, token_digest, execution_revision_id, content_digest,
        placement_score, claimed_at, expires_at, started_at, released_at, release_reason,
        updated_at, lease_ttl_seconds)
    SELECT a.attempt_id, a.run_id, (%(workers)s::uuid[])[a.si], (%(sessions)s::uuid[])[a.si],
           (%(generations)s::bigint[])[a.si], 1, 3,
           md5(%(salt)s || ':o:' || a.g || ':' || a.k)::uuid,
           decode(md5(%(salt)s || ':t:' || a.g || ':' || a.k)
                  || md5(%(salt)s || ':u:' || a.g || ':' || a.k), 'hex'),
           (%(revisions)s::uuid[])[a.ti], (%(digests)s::text[])[a.ti], 0,
           a.a_start,
           CASE WHEN a.a_state = 'running' THEN %(now)s::timestamptz + interval '1 hour'
                ELSE a.a_start + interval '60 s' END,
           a.a_start + interval '0.2 s',
           CASE WHEN a.a_state <> 'running' THEN a.a_end END,
           CASE WHEN a.a_state = 'running' THEN NULL WHEN a.a_state = 'cancelled' THEN 'cancelled'
                ELSE 'completed' END,
           CASE WHEN a.a_state = 'running' THEN a.a_start + interval '0.2 s' ELSE a.a_end END,
           60  -- the pinned lease TTL: the tasks' default
      FROM att a WHERE a.has_lease ORDER BY a.g, a.k
)
INSERT INTO ql_private.events (type, run_id, attempt_id, payload, created_at)
SELECT e.type, a.run_id, a.attempt_id, e.payload, e.at
  FROM att a CROSS JOIN LATERAL (VALUES
       (1, 'run.queued', a.k = 1, a.created_at,
        jsonb_build_object('taskId', (%(tasks)s::uuid[])[a.ti], 'attemptId', a.attempt_id)),
       (2, 'run.dispatched', a.has_lease, a.a_start,
        jsonb_build_object('workerId', (%(workers)s::uuid[])[a.si],
                           'sessionId', (%(sessions)s::uuid[])[a.si], 'leaseGeneration', 1)),
       (3, 'run.starting', a.has_lease, a.a_start + interval '0.1 s', '{}'::jsonb),
       (4, 'run.running', a.has_lease, a.a_start + interval '0.2 s', '{}'::jsonb),
       (5, CASE WHEN a.last THEN 'run.' || a.a_state ELSE 'run.retry_scheduled' END,
        a.a_state IN ('succeeded', 'failed', 'cancelled'), a.a_end,
        jsonb_build_object('attemptNo', a.k))
  ) AS e(step, type, present, at, payload)
 WHERE e.present
 ORDER BY a.g, a.k, e.step"""
)


@dataclass
class Fixture:
    """What the benchmark needs to know about the filled database."""

    tasks: list[str]  # task ids, biggest first
    fleet: list[Session]  # the sessions holding the running runs' leases
    runs: int
    by_state: dict[str, int]
    fill_s: float = 0.0


def fleet(api: Api, count: int, *, distinct: bool = False) -> list[Session]:
    """`count` workers of their own (not the template's: a claimer opening a session of
    a template worker must not replace one of these), each with an open session;
    `distinct`: each declares its own `host` label (no two sessions share capabilities,
    the console's waiting panel's worst case)."""
    sessions = [
        api.session(
            api.worker(f"ops-fleet-{i}"), capabilities({"host": f"h{i}"}) if distinct else None
        )
        for i in range(count)
    ]
    ids = [s.session_id for s in sessions]
    # Live for the whole benchmark (no heartbeats are sent): the fixture's clock.
    api.conn.execute(
        "UPDATE ql_private.worker_sessions SET expires_at = clock_timestamp() "
        "+ interval '2 hours' WHERE session_id = ANY(%s::uuid[])",
        (ids,),
    )
    return sessions


def tasks(api: Api, first: str) -> list[str]:
    return [first, *(api.task(name) for name in EXTRA_TASKS)]


def _revisions(conn: psycopg.Connection, task_ids: list[str]) -> dict[str, Any]:
    rows = conn.execute(
        """SELECT t.id, t.project_id, er.id, er.content_digest,
                  ql_private.placement_class_of(er.id)
             FROM unnest(%s::uuid[]) WITH ORDINALITY AS x(id, ord)
             JOIN ql_private.tasks t ON t.id = x.id
             JOIN ql_private.execution_revisions er ON er.id = t.current_revision_id
            ORDER BY x.ord""",
        (task_ids,),
    ).fetchall()  # fmt: skip
    return {"tasks": [r[0] for r in rows], "project": rows[0][1],
            "revisions": [r[2] for r in rows], "digests": [r[3] for r in rows],
            "placement_class": rows[0][4]}  # fmt: skip


def _params(
    conn: psycopg.Connection, task_ids: list[str], sessions: list[Session], **timeline: Any
) -> dict[str, Any]:
    now = conn.execute("SELECT clock_timestamp()").fetchone()[0]
    return {
        **_revisions(conn, task_ids), "salt": secrets.token_hex(8), "now": now, "tail": TAIL,
        "sessions": [s.session_id for s in sessions],
        "workers": [s.worker.worker_id for s in sessions],
        "generations": [s.generation for s in sessions],
        **{key: (conn.execute("SELECT %s::timestamptz - make_interval(secs => %s)",
                              (now, value)).fetchone()[0] if key in ("t0", "t_live") else value)
           for key, value in timeline.items()},
    }  # fmt: skip


def _write(conn: psycopg.Connection, runs: int, chunk: int, params: dict[str, Any]) -> None:
    seq_base = int(conn.execute("SELECT nextval('ql_private.run_queue_seq')").fetchone()[0])
    for lo in range(0, runs, chunk):
        with conn.transaction():
            conn.execute(
                FILL_SQL, {**params, "seq_base": seq_base, "lo": lo, "hi": min(runs, lo + chunk)}
            )
    conn.execute("SELECT setval('ql_private.run_queue_seq', %s)", (seq_base + runs,))


def _by_state(conn: psycopg.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT state, count(*) FROM ql_private.runs GROUP BY state").fetchall()
    return {state: int(n) for state, n in rows}


def fill(
    conn: psycopg.Connection, runs: int, chunk: int, task_ids: list[str], sessions: list[Session]
) -> dict[str, int]:
    """Write `runs` runs of history (chunks of `chunk`, one transaction each)."""
    live_from = int(runs * TERMINAL_SHARE)
    # t0 / t_live: seconds before now.
    _write(
        conn,
        runs,
        chunk,
        _params(
            conn,
            task_ids,
            sessions,
            live_from=live_from,
            t0=7 * 86400,
            t_live=LIVE_SPAN_S,
            step_s=TERMINAL_SPAN_S / max(1, live_from),
            live_step_s=LIVE_SPAN_S / max(1, runs - live_from),
            took_mod=300,
        ),
    )
    return _by_state(conn)


BUSY_SPAN_S = 780  # created from 14.5 to 1.5 minutes ago
BUSY_T0_S = 870
BUSY_TOOK_MOD = 20  # 5..24 s per attempt: even 3 attempts finish before now


def fill_busy_window(
    conn: psycopg.Connection, runs: int, chunk: int, task_ids: list[str], sessions: list[Session]
) -> dict[str, int]:
    """`runs` terminal runs, every dispatch and finish of them in the last 15 minutes."""
    _write(
        conn,
        runs,
        chunk,
        _params(
            conn,
            task_ids,
            sessions,
            live_from=runs,
            t0=BUSY_T0_S,
            t_live=0,
            step_s=BUSY_SPAN_S / max(1, runs),
            live_step_s=0,
            took_mod=BUSY_TOOK_MOD,
        ),
    )
    return _by_state(conn)
