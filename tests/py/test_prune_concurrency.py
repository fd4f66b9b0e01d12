"""Retention racing a claim load (SPEC §9.6): pruning everything terminal while
workers claim, on truly concurrent connections, deletes every terminal run with
its rows and loses nothing live — every queued run is offered exactly once and
keeps its attempt, lease and events."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from qinglong.db import api
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner

LIVE, TERMINAL, CLAIMERS = 240, 400, 4


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


def _rows(conn: psycopg.Connection, run_ids: list[str]) -> Counter:
    counts: Counter = Counter()
    for table, column in (("runs", "id"), ("attempts", "run_id"), ("run_leases", "run_id"),
                          ("events", "run_id")):
        row = conn.execute(f"SELECT count(*) FROM ql_private.{table}"
                           f" WHERE {column} = ANY(%s::uuid[])", (run_ids,)).fetchone()
        counts[table] = row[0] if row else 0
    return counts


def test_prune_during_claims_loses_nothing(db_dsn: str, conn: psycopg.Connection) -> None:
    prov = Provisioner(conn)
    old_task, live_task = prov.task("finished"), prov.task("live")
    terminal = prov.enqueue(old_task, count=TERMINAL)
    # Fixture shortcut: these runs finished yesterday (the lifecycle is not under test).
    conn.execute("UPDATE ql_private.runs SET state = 'succeeded', finished_at ="
                 " clock_timestamp() - interval '1 day' WHERE id = ANY(%s::uuid[])",
                 (terminal,))
    live = prov.enqueue(live_task, count=LIVE)
    sessions = [prov.session(prov.worker(f"claimer-{i}"), dict(DEFAULT_CAPABILITIES, slots=256))
                for i in range(CLAIMERS)]
    offered: list[list[str]] = [[] for _ in sessions]
    errors: list[BaseException] = []
    start = threading.Barrier(CLAIMERS + 1)
    pruned: Counter = Counter()

    def claim(i: int) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                start.wait()
                while True:
                    intent = Intent()
                    answer = api.pull_offer(**sessions[i].lease(intent)).run(own)
                    if answer["status"] != "offered":
                        assert answer["status"] == "idle", answer
                        return
                    offered[i].append(answer["offer"]["candidate"]["runId"])
                    acked = api.ack_lease(**sessions[i].lease(intent), lease_version=1,
                                          phase="starting").run(own)
                    assert acked["status"] == "ok", acked
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def prune() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                start.wait()
                while True:  # small batches: interleave with the claims
                    batch = api.prune_runs(retain_s=0, batch=25).run(own)
                    pruned.update({k: v for k, v in batch.items() if k != "more"})
                    if not batch["more"]:
                        return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(CLAIMERS)]
    threads.append(threading.Thread(target=prune))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    claimed = [run for mine in offered for run in mine]
    assert len(claimed) == len(set(claimed)) == LIVE
    assert set(claimed) == set(live)
    assert pruned["runs"] == TERMINAL and pruned["attempts"] == TERMINAL
    assert _rows(conn, terminal) == Counter(runs=0, attempts=0, run_leases=0, events=0)
    kept = _rows(conn, live)
    assert (kept["runs"], kept["attempts"], kept["run_leases"]) == (LIVE, LIVE, LIVE)
    assert kept["events"] >= 2 * LIVE  # run.queued + run.dispatched (+ starting) each
    states = conn.execute("SELECT state, count(*) FROM ql_private.runs"
                          " WHERE id = ANY(%s::uuid[]) GROUP BY 1", (live,)).fetchall()
    assert dict(states) == {"starting": LIVE}
