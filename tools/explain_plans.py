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
import base64
import datetime as dt
import hashlib
import platform
import secrets
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qinglong.db import api

DOC = Path(__file__).resolve().parent.parent / "docs" / "EXPLAIN.md"


@dataclass(frozen=True)
class CapturedPlan:
    title: str
    plans: list[str]


def capture(
    conn: psycopg.Connection, sql: str, params: tuple[Any, ...] | Mapping[str, Any] = ()
) -> list[str]:
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
    plans = capture(
        conn,
        "SELECT count(*) FROM ql_private.ready_candidate_page("
        "NULL, NULL, NULL, 8, clock_timestamp(), pg_current_snapshot(),"
        " pg_current_xact_id_if_assigned())",
    )
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
    plans = capture(
        conn,
        "SELECT count(*) FROM ql_private.class_candidate_page(%s, NULL, NULL, NULL, 8)",
        (row[0],),
    )
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Placement-class page (the pages after a blocked head)", inner)


def seed_other_pools(conn: psycopg.Connection, pools: int = 200, runs_each: int = 10) -> None:
    """`pools` more pools of project `explain`, each with a task and `runs_each`
    queued runs, so the pool page's plan shows that other pools are not read."""
    from qinglong.service.compiler import compile_command

    compiled = compile_command(
        {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
    )
    for number in range(pools):
        name = f"pool-{number}"
        api.create_pool(project="explain", name=name).run(conn)
        task = (
            api.publish_revision(
                project="explain",
                task=f"task-{number}",
                canonical=compiled.canonical,
                pool=f"explain/{name}",
            )
            .run(conn)
            .doc["taskId"]
        )
        api.enqueue_runs(task_id=task, priority=2, count=runs_each).run(conn)
    conn.execute("VACUUM ANALYZE ql_private.runs")
    conn.execute("VACUUM ANALYZE ql_private.attempts")


def pool_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The page of a worker granted one pool (SPEC 13.3): ql_private.pool_candidate_page,
    one runs_pool_keyset range scan per granted pool, whatever other pools hold."""
    row = conn.execute(
        "SELECT array_agg(pl.id) FROM ql_private.pools pl"
        " JOIN ql_private.projects p ON p.id = pl.project_id"
        " WHERE p.name = 'explain' AND pl.name = 'default'"
    ).fetchone()
    assert row is not None
    plans = capture(
        conn,
        "SELECT count(*) FROM ql_private.pool_candidate_page("
        "%s, NULL, NULL, NULL, 8, clock_timestamp(), pg_current_snapshot(),"
        " pg_current_xact_id_if_assigned())",
        (row[0],),
    )
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Pool page: a worker granted one pool of many (limit 8 + 1)", inner)


def lease_read_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The read every lease ACK, heartbeat and completion makes (twice: before
    and after its row locks): ql_private.lease_open's one statement over the lease
    (by offer id), its attempt, run, task, session and revision, for one of the
    offers in flight."""
    row = conn.execute(
        "SELECT offer_id, worker_id, session_id, session_generation"
        " FROM ql_private.run_leases ORDER BY id LIMIT 1"
    ).fetchone()
    assert row is not None
    plans = capture(
        conn,
        "SELECT category FROM ql_private.lease_open("
        "%s, %s, %s, %s, sha256('explain'::bytea), 1, 'starting')",
        row,
    )
    inner = [p for p in plans if "FROM ql_private.run_leases rl" in p]
    return CapturedPlan("Lease lifecycle read (ACK, heartbeat, completion)", inner)


def seed_due(conn: psycopg.Connection, runs: int = 16) -> None:
    """`runs` scheduled runs of the explain task that came due: enqueued 1 s
    ahead, then waited for (no sweeper runs here to promote them), so every due
    source has rows to read; analyzed, as autovacuum would, so the statistics
    know scheduled runs exist."""
    row = conn.execute(
        "SELECT t.id FROM ql_private.tasks t"
        " JOIN ql_private.projects p ON p.id = t.project_id"
        " WHERE p.name = 'explain' AND t.name = 'explain-task'"
    ).fetchone()
    assert row is not None
    api.enqueue_runs(task_id=str(row[0]), priority=1, count=runs, delay_ms=1000).run(conn)
    time.sleep(1.5)
    conn.execute("ANALYZE ql_private.runs")


def due_pull_plans(conn: psycopg.Connection) -> list[CapturedPlan]:
    """One real ql.pull_offer of a fresh worker while scheduled runs are due: its
    slot count and the probe that sends it to ql_private.candidate_page, then
    the claim (ql_private.claim_candidate's one statement)."""
    call = new_worker(conn, 900).pull()
    plans = capture(conn, call.statement.sql, call.params)
    probes = [p for p in plans if "run_leases_session_live_counted" in p or "runs_due" in p]
    claim = [p for p in plans if "unnest(p_run_ids) WITH ORDINALITY" in p]
    return [
        CapturedPlan("A pull while a scheduled run is due", probes),
        CapturedPlan("The claim (ql_private.claim_candidate)", claim),
    ]


def class_due_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    row = conn.execute("SELECT array_agg(id) FROM ql_private.placement_classes").fetchone()
    assert row is not None
    plans = capture(
        conn,
        "SELECT count(*) FROM ql_private.class_candidate_page(%s, NULL, NULL, NULL, 8)",
        (row[0],),
    )
    # The classes a pull switches to (ql_private.matching_classes over
    # ql_private.waiting_classes): one probe per class of runs_class_keyset and
    # of runs_class_due.
    classes = capture(
        conn,
        "SELECT ql_private.matching_classes(ws.capabilities)"
        " FROM ql_private.worker_sessions ws LIMIT 1",
    )
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    inner += [p for p in classes if "ql_private.waiting_classes" in p]
    return CapturedPlan("Placement-class page with scheduled runs due", inner)


def pool_class_due_page_plans(conn: psycopg.Connection) -> CapturedPlan:
    """The class page of a worker granted one pool (ql_private.pool_class_candidate_page)."""
    row = conn.execute(
        "SELECT array_agg(pl.id) FROM ql_private.pools pl"
        " JOIN ql_private.projects p ON p.id = pl.project_id"
        " WHERE p.name = 'explain' AND pl.name = 'default'"
    ).fetchone()
    classes = conn.execute("SELECT array_agg(id) FROM ql_private.placement_classes").fetchone()
    assert row is not None and classes is not None
    plans = capture(
        conn,
        "SELECT count(*) FROM ql_private.pool_class_candidate_page("
        "%s, %s, NULL, NULL, NULL, 8, clock_timestamp(), pg_current_snapshot(),"
        " pg_current_xact_id_if_assigned())",
        (row[0], classes[0]),
    )
    inner = [p for p in plans if "FROM ql_private.runs" in p]
    return CapturedPlan("Pool placement-class page with scheduled runs due", inner)


HOT_TABLES = ("runs", "run_leases", "attempts")
HOT_STEPS = ("claim", "ACK starting", "ACK running", "heartbeat", "completion")


@dataclass(frozen=True)
class HotCount:
    """Row updates one kind of lifecycle call made to one table, and how many
    of them were HOT (no index entry written)."""

    step: str
    table: str
    updated: int
    hot: int


def hot_updates(conn: psycopg.Connection, leases: int = 40, heartbeats: int = 3) -> list[HotCount]:
    """A small lifecycle workload: `leases` offers claimed by a fresh worker,
    each ACKed starting and running, heartbeated `heartbeats` times and
    completed. Each call runs in its own transaction, which reads its own row
    updates from pg_stat_xact_user_tables before it commits."""
    puller = new_worker(conn, 901)
    totals: dict[tuple[str, str], list[int]] = {
        (step, table): [0, 0] for step in HOT_STEPS for table in HOT_TABLES
    }

    def counts() -> dict[str, tuple[int, int]]:
        rows = conn.execute(
            "SELECT relname, n_tup_upd, n_tup_hot_upd"
            "  FROM pg_stat_xact_user_tables"
            " WHERE schemaname = 'ql_private' AND relname = ANY (%s)",
            (list(HOT_TABLES),),
        ).fetchall()
        return {table: (updated, hot) for table, updated, hot in rows}

    def step(name: str, call: api.Call[Any]) -> dict[str, Any]:
        # The view also holds counts of earlier transactions not yet flushed to
        # the shared statistics; none are flushed inside a transaction, so the
        # difference across the call is the call's own.
        with conn.transaction():
            before = counts()
            doc: dict[str, Any] = call.run(conn).doc
            for table, (updated, hot) in counts().items():
                totals[(name, table)][0] += updated - before[table][0]
                totals[(name, table)][1] += hot - before[table][1]
        assert doc["status"] in ("ok", "offered"), (name, doc)
        return doc

    for _ in range(leases):
        offer, token = str(uuid.uuid4()), hashlib.sha256(secrets.token_bytes(32)).digest()
        step("claim", puller.pull(offer, token))
        version = 1
        for phase in ("starting", "running"):
            version = step(
                f"ACK {phase}", api.ack_lease(**puller.lease(offer, token, version), phase=phase)
            )["lease"]["leaseVersion"]
        for _ in range(heartbeats):
            version = step("heartbeat", api.heartbeat_lease(**puller.lease(offer, token, version)))[
                "lease"
            ]["leaseVersion"]
        step(
            "completion",
            api.complete_lease(
                **puller.lease(offer, token, version), outcome="succeeded", exit_code=0
            ),
        )
    return [
        HotCount(step_name, table, *totals[(step_name, table)])
        for step_name in HOT_STEPS
        for table in HOT_TABLES
    ]


@dataclass(frozen=True)
class IndexRow:
    table: str
    index: str
    columns: str
    comment: str


def claim_path_indexes(conn: psycopg.Connection) -> list[IndexRow]:
    """Every index on runs, run_leases, attempts and events with its key
    (pg_get_indexdef from USING on) and its catalog comment (migration 0030)."""
    rows = conn.execute(
        "SELECT c.relname, i.relname, substring(pg_get_indexdef(i.oid) FROM ' USING btree (.*)$'),"
        "       coalesce(obj_description(i.oid, 'pg_class'), '')"
        "  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
        "  JOIN pg_class c ON c.oid = x.indrelid"
        " WHERE c.relnamespace = 'ql_private'::regnamespace"
        "   AND c.relname IN ('runs', 'run_leases', 'attempts', 'events')"
        " ORDER BY array_position(ARRAY['runs', 'run_leases', 'attempts', 'events'],"
        "          c.relname::text), i.relname"
    ).fetchall()
    return [IndexRow(*row) for row in rows]


def seed(conn: psycopg.Connection, runs: int) -> None:
    from qinglong.service.compiler import compile_command

    compiled = compile_command(
        {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
    )
    published = (
        api.publish_revision(project="explain", task="explain-task", canonical=compiled.canonical)
        .run(conn)
        .doc
    )
    remaining, priority = runs, 0
    while remaining > 0:
        batch = min(remaining, 10000)
        api.enqueue_runs(task_id=published["taskId"], priority=priority % 3, count=batch).run(conn)
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


@dataclass(frozen=True)
class Puller:
    """A worker with an open session (256 slots) granted every pool."""

    credential: str
    digest: bytes
    worker: str
    session: str
    generation: int

    def pull(self, offer_id: str | None = None, token_digest: bytes | None = None) -> api.Call[Any]:
        token = token_digest or hashlib.sha256(secrets.token_bytes(32)).digest()
        return api.pull_offer(
            credential_id=self.credential,
            secret_digest=self.digest,
            worker_id=self.worker,
            session_id=self.session,
            generation=self.generation,
            offer_id=offer_id or str(uuid.uuid4()),
            token_digest=token,
        )

    def lease(self, offer_id: str, token_digest: bytes, version: int) -> dict[str, Any]:
        """The arguments every lease call of this worker's offer `offer_id` takes."""
        return {
            "credential_id": self.credential,
            "secret_digest": self.digest,
            "worker_id": self.worker,
            "session_id": self.session,
            "generation": self.generation,
            "offer_id": offer_id,
            "token_digest": token_digest,
            "lease_version": version,
        }


def new_worker(conn: psycopg.Connection, number: int) -> Puller:
    from qinglong.service.capabilities import canonicalize_capabilities

    worker = api.register_worker(name=f"explain-{number}").run(conn).doc["workerId"]
    api.grant_pool(worker_id=worker, pool="*").run(conn)
    credential = f"explain{number:09d}"
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=")
    digest = hashlib.sha256(secret).digest()
    api.issue_credential(worker_id=worker, credential_id=credential, secret_digest=digest).run(conn)
    caps = canonicalize_capabilities(
        {
            "schema": "qinglong/worker-capabilities@v1",
            "executors": ["remote-worker"],
            "labels": {},
            "runtimes": {},
            "slots": 256,
        }
    )
    opened = (
        api.open_session(
            credential_id=credential,
            secret_digest=digest,
            worker_id=worker,
            capabilities_canonical=caps.canonical,
        )
        .run(conn)
        .doc["session"]
    )
    return Puller(credential, digest, worker, opened["sessionId"], opened["generation"])


def _claim_as_new_worker(conn: psycopg.Connection, number: int, count: int) -> None:
    puller = new_worker(conn, number)
    for _ in range(count):
        result = puller.pull().run(conn).doc
        assert result["status"] == "offered", result


def index_section(indexes: list[IndexRow], hot: list[HotCount]) -> list[str]:
    """ "Indexes on the claim path": each index with its key and catalog comment,
    then the measured HOT share of each lifecycle call's updates."""
    claims = sum(h.updated for h in hot if h.step == "claim" and h.table == "runs")
    heartbeats = sum(h.updated for h in hot if h.step == "heartbeat" and h.table == "run_leases")
    lines = [
        "## Indexes on the claim path",
        "",
        "Every index on runs, run_leases, attempts and events carries a catalog comment "
        "(migration 0030): the functions whose statements read it (`Serves:`), the rule "
        "it enforces (`Rule:`), and for an index a pull or a lease call reads, the "
        "section above whose plan shows it (`Plan:`). `tests/py/test_index_comments.py` "
        "fails on an index without a comment, a comment naming a function that does not "
        "exist, or a `Plan:` section whose plan does not use the index. None was "
        "dropped: the index scans of the pgTAP suite and of the pull, sweeper, "
        "producer, retention, admin and pool tests, each attributed to the function "
        "statement that made it, found every index read by the functions its comment "
        "names; `run_leases_one_live` is read only by a claim of a run whose offer "
        "expired unstarted. Not yet as intended: while the statistics say no "
        "scheduled run exists, the due source of `ql_private.candidate_page` and "
        "`ql_private.class_candidate_page` (the first three sections) reads "
        "`runs_task_queued_due`, which serves `ql.queue_depth`, across every queued "
        "run instead of `runs_due`; once scheduled runs are analyzed (the sections "
        'from "A pull while a scheduled run is due" on) it reads `runs_due`.',
        "",
        "| Table | Index | Key | Serves / rule |",
        "|---|---|---|---|",
    ]
    for row in indexes:
        lines.append(
            f"| {row.table} | `{row.index}` | `{row.columns.replace('|', '&#124;')}` "
            f"| {row.comment} |"
        )
    lines += [
        "",
        "### Which updates are HOT",
        "",
        "An update is HOT (heap-only: no index entry written, the old version pruned "
        "in place) only when no column that any index of the table names — key, "
        "`INCLUDE`, expression or partial-index predicate — changes, and the new "
        "version fits on the same page (runs, run_leases and attempts have "
        "fillfactor 80). A non-HOT update writes an entry into every index of its "
        "table, not only those whose columns changed. Measured on this database: "
        f"{claims} offers claimed by one worker, each ACKed starting and running, "
        f"heartbeated {heartbeats // max(claims, 1)} times and completed, every call in "
        "its own transaction, which read its own row "
        "updates from `pg_stat_xact_user_tables` (updated / of them HOT):",
        "",
        "| Call | " + " | ".join(HOT_TABLES) + " |",
        "|---|" + "---|" * len(HOT_TABLES),
    ]
    for step_name in HOT_STEPS:
        cells = [f"{h.updated} / {h.hot}" for h in hot if h.step == step_name]
        lines.append(f"| {step_name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "- runs: no lifecycle update can be HOT. Each changes `state` (the claim "
        "also clears `due_at`, a completion sets `finished_at`), a key column of "
        "`runs_state_seq`, `runs_task_state_seq` and `runs_project_state_seq` and in "
        "the predicate of every partial index on the table.",
        "- run_leases: the claim inserts the lease. ACK starting sets `started_at` and "
        "`expires_at`, every heartbeat moves `expires_at` (the key of "
        "`run_leases_live_expiry` and `run_leases_unstarted_expiry`, an `INCLUDE` "
        "column of `run_leases_session_live_counted`), a completion sets `released_at` "
        "(in the predicate of every partial index): none of them can be HOT. ACK "
        "running changes only `lease_version` and `updated_at`: HOT.",
        "- attempts: only `id`, `run_id` and `attempt_no` are indexed and no "
        "lifecycle call changes them: every update is HOT while its page has room.",
        "",
    ]
    return lines


def render(
    runs: int,
    captured: list[CapturedPlan],
    indexes: list[IndexRow] | None = None,
    hot: list[HotCount] | None = None,
) -> str:
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
    if indexes is not None and hot is not None:
        lines += index_section(indexes, hot)
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
            captured = [
                candidate_page_plans(conn),
                next_page_plans(conn),
                class_page_plans(conn),
                ready_page_plans(conn),
                lease_read_plans(conn),
            ]
            seed_other_pools(conn)
            captured.append(pool_page_plans(conn))
            seed_due(conn)
            captured += due_pull_plans(conn)
            captured += [class_due_page_plans(conn), pool_class_due_page_plans(conn)]
            hot = hot_updates(conn)
            indexes = claim_path_indexes(conn)
    DOC.write_text(render(args.runs, captured, indexes, hot), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
