"""Explain plans of the hot queries, captured from inside the plpgsql functions.

`auto_explain` with `log_nested_statements` logs the real plan of every statement
a function runs; with `client_min_messages = log` those plans come back to this
client as notices, so we document exactly what the pull executes rather than a
hand-copied approximation.

`python -m tools.explain_plans [--runs 100000]` seeds a throwaway database and
writes docs/EXPLAIN.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg

from qinglong.db import api

DOC = Path(__file__).resolve().parent.parent / "docs" / "EXPLAIN.md"


@dataclass(frozen=True)
class CapturedPlan:
    title: str
    plans: list[str]


def capture(conn: psycopg.Connection, sql: str, params: tuple = ()) -> list[str]:
    notices: list[str] = []

    def on_notice(diag: psycopg.errors.Diagnostic) -> None:
        if diag.message_primary and "Query Text" in diag.message_primary:
            notices.append(diag.message_primary)

    conn.add_notice_handler(on_notice)
    try:
        with conn.transaction():
            conn.execute("LOAD 'auto_explain'")
            for setting, value in (
                ("auto_explain.log_min_duration", "0"),
                ("auto_explain.log_analyze", "on"),
                ("auto_explain.log_buffers", "on"),
                ("auto_explain.log_nested_statements", "on"),
                ("auto_explain.log_timing", "on"),
                ("client_min_messages", "log"),
            ):
                conn.execute(f"SET LOCAL {setting} = {value}")
            conn.execute(sql, params)
    finally:
        conn.remove_notice_handler(on_notice)
    return notices


def candidate_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    plans = capture(conn, "SELECT count(*) FROM ql_private.candidate_page(NULL, NULL, NULL, 8)")
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("First keyset page (limit 8 + 1)", inner)


def ready_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The page a pull reads in the steady state (no scheduled run due, no offer
    expired unstarted): ql_private.ready_candidate_page, the ready runs alone."""
    plans = capture(conn, "SELECT count(*) FROM ql_private.ready_candidate_page("
                          "NULL, NULL, NULL, 8, clock_timestamp(), pg_current_snapshot(),"
                          " pg_current_xact_id_if_assigned())")
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Steady-state page: ready runs only (limit 8 + 1)", inner)


def next_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    row = conn.execute(
        "SELECT priority, queue_seq, id FROM ql_private.runs"
        " ORDER BY priority DESC, queue_seq, id OFFSET 7 LIMIT 1"
    ).fetchone()
    assert row is not None
    plans = capture(conn, "SELECT count(*) FROM ql_private.candidate_page(%s, %s, %s, 8)", row)
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Second keyset page (after the 8th candidate)", inner)


def class_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    row = conn.execute("SELECT array_agg(id) FROM ql_private.placement_classes").fetchone()
    assert row is not None
    plans = capture(conn, "SELECT count(*) FROM ql_private.class_candidate_page("
                          "%s, NULL, NULL, NULL, 8)", (row[0],))
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Placement-class page (the pages after a blocked head)", inner)


def seed_other_pools(conn: psycopg.Connection, pools: int = 200, runs_each: int = 10) -> None:
    """`pools` more pools of project `explain`, each with a task and `runs_each`
    queued runs, so the pool page's plan shows that other pools are not read."""
    from qinglong.service.compiler import compile_command

    compiled = compile_command({"schema": "qinglong/command@v1", "argv": ["true"],
                                "env": {}, "timeoutS": 60})
    for number in range(pools):
        name = f"pool-{number}"
        api.create_pool(project="explain", name=name).run(conn)
        task = api.publish_revision(project="explain", task=f"task-{number}",
                                    canonical=compiled.canonical,
                                    pool=f"explain/{name}").run(conn).doc["taskId"]
        api.enqueue_runs(task_id=task, priority=2, count=runs_each).run(conn)
    conn.execute("VACUUM ANALYZE ql_private.runs")
    conn.execute("VACUUM ANALYZE ql_private.attempts")


def pool_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The page of a worker granted one pool (SPEC 13.3): ql_private.pool_candidate_page,
    one runs_pool_keyset range scan per granted pool, whatever other pools hold."""
    row = conn.execute("SELECT array_agg(pl.id) FROM ql_private.pools pl"
                       " JOIN ql_private.projects p ON p.id = pl.project_id"
                       " WHERE p.name = 'explain' AND pl.name = 'default'").fetchone()
    assert row is not None
    plans = capture(conn, "SELECT count(*) FROM ql_private.pool_candidate_page("
                          "%s, NULL, NULL, NULL, 8, clock_timestamp(), pg_current_snapshot(),"
                          " pg_current_xact_id_if_assigned())", (row[0],))
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Pool page: a worker granted one pool of many (limit 8 + 1)", inner)


def lease_read_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The read every lease ACK, heartbeat and completion makes (twice: before
    and after its row locks): ql_private.lease_open's one statement over the lease
    (by offer id), its attempt, run, task, session and revision, for one of the
    offers in flight."""
    row = conn.execute("SELECT offer_id, worker_id, session_id, session_generation"
                       " FROM ql_private.run_leases ORDER BY id LIMIT 1").fetchone()
    assert row is not None
    plans = capture(conn, "SELECT category FROM ql_private.lease_open("
                          "%s, %s, %s, %s, sha256('explain'::bytea), 1, 'starting')", row)
    inner = [p for p in plans if "FROM ql_private.run_leases rl" in p]
    return CapturedPlan("Lease lifecycle read (ACK, heartbeat, completion)", inner)


def seed(conn: psycopg.Connection, runs: int) -> None:
    from qinglong.service.compiler import compile_command

    compiled = compile_command({"schema": "qinglong/command@v1", "argv": ["true"],
                                "env": {}, "timeoutS": 60})
    published = api.publish_revision(project="explain", task="explain-task",
                                     canonical=compiled.canonical).run(conn).doc
    remaining, priority = runs, 0
    while remaining > 0:
        batch = min(remaining, 10000)
        api.enqueue_runs(task_id=published["taskId"], priority=priority % 3,
                         count=batch).run(conn)
        remaining -= batch
        priority += 1
    conn.execute("VACUUM ANALYZE ql_private.runs")
    conn.execute("VACUUM ANALYZE ql_private.attempts")
    claim_offers(conn, 2000)
    conn.execute("VACUUM ANALYZE ql_private.runs")
    conn.execute("VACUUM ANALYZE ql_private.attempts")
    conn.execute("VACUUM ANALYZE ql_private.run_leases")


def claim_offers(conn: psycopg.Connection, count: int) -> None:
    """Leave `count` offers in flight (live unstarted leases), as in production,
    so the plans show that discovery does not walk past them. One worker session
    holds at most 256 (its slots), so several workers share the load."""
    for index in range(0, count, 256):
        _claim_as_new_worker(conn, index // 256, min(256, count - index))


def _claim_as_new_worker(conn: psycopg.Connection, number: int, count: int) -> None:
    import base64
    import hashlib
    import secrets
    import uuid

    from qinglong.service.capabilities import canonicalize_capabilities

    worker = api.register_worker(name=f"explain-{number}").run(conn).doc["workerId"]
    api.grant_pool(worker_id=worker, pool="*").run(conn)
    credential = f"explain{number:09d}"
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=")
    digest = hashlib.sha256(secret).digest()
    api.issue_credential(worker_id=worker, credential_id=credential,
                         secret_digest=digest).run(conn)
    caps = canonicalize_capabilities({
        "schema": "qinglong/worker-capabilities@v1", "executors": ["remote-worker"],
        "labels": {}, "runtimes": {}, "slots": 256})
    opened = api.open_session(credential_id=credential, secret_digest=digest, worker_id=worker,
                              capabilities_canonical=caps.canonical).run(conn).doc["session"]
    for _ in range(count):
        token = hashlib.sha256(secrets.token_bytes(32)).digest()
        result = api.pull_offer(credential_id=credential, secret_digest=digest, worker_id=worker,
                                session_id=opened["sessionId"],
                                generation=opened["generation"], offer_id=str(uuid.uuid4()),
                                token_digest=token).run(conn).doc
        assert result["status"] == "offered", result


def render(runs: int, captured: list[CapturedPlan]) -> str:
    lines = [
        "# Explain plans of the hot queries",
        "",
        f"Generated by `python -m tools.explain_plans --runs {runs}` on "
        f"{dt.date.today().isoformat()} ({platform.machine()}, {platform.system()}, "
        "PostgreSQL 15), with "
        f"{runs:,} queued runs in 3 priorities. Plans are captured with `auto_explain` "
        "(`log_analyze`, `log_buffers`, `log_nested_statements`) from inside "
        "`ql_private.candidate_page`, i.e. what `ql.pull_offer` really runs.",
        "",
        "2,000 offers are in flight (live unstarted leases), as in production.",
        "",
        "What to look for: waiting runs come from `Index Scan using runs_candidate_keyset` "
        "(key `-priority, queue_seq, id`) whose keyset position is an `Index Cond` row "
        "comparison (the query text calls `ql_private.keyset_after`, the one definition "
        "of the position every candidate scan uses: SQL, IMMUTABLE, no SET clause, so the "
        "planner inlines it and the plan shows its `ROW(...) > ROW(...)` as the "
        "`Index Cond`; a call left in the plan would be a per-row `Filter`); "
        "the scan stops at the `Limit` of 9 rows (limit + 1) with buffers in "
        "the tens on the first and on a later page; offers in flight are not in that index "
        "(it holds `queued` runs only) and the offers that expired unstarted come from "
        "`run_leases_unstarted_expiry`; the only sorts order at most limit + 1 rows per "
        "source — never the queue. The placement-class page (read after a first page "
        "without a passing candidate) is one `Index Scan using runs_class_keyset` per "
        "matching class, equality on the class plus the same keyset row comparison. "
        "While no scheduled run is due and no offer expired unstarted — the steady "
        "state — a pull reads `ql_private.ready_candidate_page` instead: the first "
        "source alone, one `runs_candidate_keyset` range scan, a plan that is cheap to "
        "start as well as to run. The lease lifecycle read (each ACK, heartbeat and "
        "completion makes it twice) finds the lease by `run_leases_offer_id_key` and "
        "every other row by its primary key: one row each, whatever the table sizes. "
        "The pool page (last; a worker without the all-pools grant, SPEC 13.3) is "
        "captured after 200 more pools of 10 queued runs each were added: one "
        "`Index Scan using runs_pool_keyset` per granted pool, equality on the pool "
        "plus the same keyset row comparison, so the other pools' runs are never read.",
        "",
    ]
    for plan in captured:
        lines += [f"## {plan.title}", ""]
        for text in plan.plans:
            lines += ["```", text.strip(), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from qinglong.db.migrator import migrate
    from qinglong.throwaway_postgres import throwaway_postgres

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args(argv)
    with throwaway_postgres() as cluster:
        dsn = cluster.create_database("ql_explain")
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            seed(conn, args.runs)
            captured = [candidate_page_plans(conn), next_page_plans(conn),
                        class_page_plans(conn), ready_page_plans(conn),
                        lease_read_plans(conn)]
            seed_other_pools(conn)
            captured.append(pool_page_plans(conn))
    DOC.write_text(render(args.runs, captured), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
