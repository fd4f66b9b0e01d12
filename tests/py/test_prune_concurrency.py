"""Retention racing a claim load (SPEC §9.6): pruning everything terminal while
workers claim, on truly concurrent connections, deletes every terminal run with
its rows and loses nothing live — every queued run is offered exactly once and
keeps its attempt, lease and events."""

from __future__ import annotations

import random
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
    for table, column in (
        ("runs", "id"),
        ("attempts", "run_id"),
        ("run_leases", "run_id"),
        ("events", "run_id"),
    ):
        row = conn.execute(
            f"SELECT count(*) FROM ql_private.{table} WHERE {column} = ANY(%s::uuid[])", (run_ids,)
        ).fetchone()
        counts[table] = row[0] if row else 0
    return counts


def test_prune_during_claims_loses_nothing(db_dsn: str, conn: psycopg.Connection) -> None:
    prov = Provisioner(conn)
    old_task, live_task = prov.task("finished"), prov.task("live")
    terminal = prov.enqueue(old_task, count=TERMINAL)
    # Fixture shortcut: these runs finished yesterday (the lifecycle is not under test).
    conn.execute(
        "UPDATE ql_private.runs SET state = 'succeeded', finished_at ="
        " clock_timestamp() - interval '1 day' WHERE id = ANY(%s::uuid[])",
        (terminal,),
    )
    live = prov.enqueue(live_task, count=LIVE)
    sessions = [
        prov.session(prov.worker(f"claimer-{i}"), dict(DEFAULT_CAPABILITIES, slots=256))
        for i in range(CLAIMERS)
    ]
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
                    answer = api.pull_offer(**sessions[i].lease(intent)).run(own).doc
                    if answer["status"] != "offered":
                        assert answer["status"] == "idle", answer
                        return
                    offered[i].append(answer["offer"]["candidate"]["runId"])
                    acked = (
                        api.ack_lease(
                            **sessions[i].lease(intent), lease_version=1, phase="starting"
                        )
                        .run(own)
                        .doc
                    )
                    assert acked["status"] == "ok", acked
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def prune() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                start.wait()
                while True:  # small batches: interleave with the claims
                    batch = api.prune_runs(retain_s=0, batch=25).run(own).doc
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
    states = conn.execute(
        "SELECT state, count(*) FROM ql_private.runs WHERE id = ANY(%s::uuid[]) GROUP BY 1", (live,)
    ).fetchall()
    assert dict(states) == {"starting": LIVE}


RACED_RUNS, PRUNERS, OPERATORS, RACE_S = 3000, 3, 4, 4.0


def _operator_loop(
    db_dsn: str,
    run_ids: list[str],
    seed: int,
    stop: threading.Event,
    start: threading.Barrier,
    outcomes: Counter,
    errors: list[BaseException],
) -> None:
    """Retry then cancel runs (ql.retry_run / ql.cancel_run), each call its own
    transaction, walking the runs oldest first as the pruners do (so both reach
    for the same rows at once), then again from the start; refusals a prune or
    another operator explains are expected, anything else (a deadlock above
    all) is an error."""
    rng = random.Random(seed)
    try:
        with psycopg.connect(db_dsn, autocommit=True) as own:
            start.wait()
            position = 0
            while not stop.is_set():
                position = (position + rng.randint(1, 3)) % len(run_ids)
                run_id = run_ids[position]
                for name, call in (
                    ("retried", api.retry_run(run_id=run_id)),
                    ("cancelled", api.cancel_run(run_id=run_id)),
                ):
                    try:
                        call.run(own)
                        outcomes[name] += 1
                    except psycopg.Error as exc:
                        state = exc.sqlstate or ""
                        # pruned / not retryable now / the failure under test
                        if state not in ("QL004", "QL020", "40P01"):
                            raise
                        outcomes[state] += 1
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def test_prune_racing_retry_and_cancel_never_deadlocks(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    """Prune batches racing operators who retry and cancel the same terminal
    runs: no call dies of a deadlock (40P01) — retry and cancel lock attempt ->
    run, and so does prune — and the rows left are consistent."""
    prov = Provisioner(conn)
    task = prov.task("churn")
    runs = prov.enqueue(task, count=RACED_RUNS)
    # Fixture shortcut: the runs failed just now (the lifecycle is not under test).
    conn.execute(
        "UPDATE ql_private.attempts SET state = 'failed', finished_at ="
        " clock_timestamp() WHERE run_id = ANY(%s::uuid[])",
        (runs,),
    )
    conn.execute(
        "UPDATE ql_private.runs SET state = 'failed', finished_at ="
        " clock_timestamp() WHERE id = ANY(%s::uuid[])",
        (runs,),
    )
    errors: list[BaseException] = []
    outcomes: Counter = Counter()
    stop = threading.Event()
    start = threading.Barrier(PRUNERS + OPERATORS)

    def prune() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                start.wait()
                while not stop.is_set():
                    try:
                        batch = api.prune_runs(retain_s=0, batch=4).run(own).doc
                    except psycopg.errors.DeadlockDetected:
                        outcomes["40P01"] += 1
                        continue
                    outcomes["pruned"] += batch["runs"]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=prune) for _ in range(PRUNERS)]
    threads += [
        threading.Thread(
            target=_operator_loop, args=(db_dsn, runs, i, stop, start, outcomes, errors)
        )
        for i in range(OPERATORS)
    ]
    for thread in threads:
        thread.start()
    stop.wait(RACE_S)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert outcomes["40P01"] == 0, dict(outcomes)
    assert outcomes["retried"] > 0 and outcomes["pruned"] > 0, dict(outcomes)
    # Consistent end state: every run left has its current attempt, in a state
    # that matches the run's; every attempt, lease and event left has its run.
    bad = conn.execute(
        "SELECT r.id, r.state, a.state FROM ql_private.runs r"
        " LEFT JOIN ql_private.attempts a ON a.id = r.current_attempt_id"
        " WHERE r.id = ANY(%s::uuid[]) AND NOT ("
        "   (r.state = 'queued' AND a.state = 'claimed' AND r.finished_at IS NULL)"
        "   OR (r.state = 'cancelled' AND a.state = 'cancelled' AND r.finished_at IS NOT NULL)"
        "   OR (r.state = 'failed' AND a.state = 'failed'))",
        (runs,),
    ).fetchall()
    assert bad == []
    gone = [
        r
        for r in runs
        if not conn.execute("SELECT 1 FROM ql_private.runs WHERE id = %s", (r,)).fetchone()
    ]
    assert _rows(conn, gone) == Counter(runs=0, attempts=0, run_leases=0, events=0)
