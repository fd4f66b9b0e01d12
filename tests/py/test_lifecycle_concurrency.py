"""Lease lifecycle under real concurrency (SPEC §7): heartbeats racing sweepers at
the expiry boundary, and sweepers racing each other. Every thread has its own
connection and acts in the role production uses (ql_worker_ingress for worker
calls, ql_runtime for the sweeper).

(a) ≥ 1,000 started leases expire over a ~2 s window; each gets one heartbeat
    fired within ±15 ms of its expiry while three sweepers loop. No lease may be
    both extended (heartbeat ok) and lost (sweeper): checked on the answers and
    on the final rows/events.
(b) Three sweepers start together over ≥ 1,000 expired started leases: every
    lost attempt is retried exactly once (one attempt.lost, one new attempt, one
    run.retry_scheduled per run).
(c) A starting ACK and a cancel of the same offered run, queued behind a third
    session's lock on the attempt in the order that would deadlock an ACK
    locking its lease or run first: both finish, every time (the one lock order
    attempt -> run -> lease of ql_private.lease_open and ql.cancel_run).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass

import psycopg
import pytest

from qinglong.db import api
from qinglong.db.answers import Conflict, RunCancel
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner, Session

N_LEASES = 1200
SLOTS = 256


@dataclass
class Started:
    session: Session
    intent: Intent
    run_id: str
    attempt_id: str


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def prov(conn: psycopg.Connection) -> Provisioner:
    return Provisioner(conn)


def _heartbeat(conn: psycopg.Connection, lease: Started, version: int) -> dict:
    return (
        api.heartbeat_lease(**lease.session.lease(lease.intent), lease_version=version)
        .run(conn)
        .doc
    )


def _send(conn: psycopg.Connection, call: api.Call) -> psycopg.Cursor:
    """Queue one call in the connection's pipeline; fetch its answer later."""
    return conn.execute(call.statement.sql, call.params)


def _start_leases(conn: psycopg.Connection, prov: Provisioner, n: int) -> list[Started]:
    """n real claims (ql.pull_offer), each ACKed `starting`."""
    task = prov.task("lifecycle")
    conn.execute("UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = %s", (task,))
    prov.enqueue(task, count=n)
    caps = dict(DEFAULT_CAPABILITIES, slots=SLOTS)
    sessions = [prov.session(prov.worker(f"w{i}"), caps) for i in range(math.ceil(n / SLOTS))]
    pending = []
    # Pipelined (each ACK only needs the offer id and token its pull was sent
    # with, so nothing waits for a round trip), one transaction per call, and a
    # VACUUM every chunk: claimed-then-started runs leave dead entries in the
    # candidate index that autovacuum would only remove later, and every pull's
    # scan would walk them.
    for chunk in range(0, n, 200):
        with conn.pipeline():
            for i in range(chunk, min(n, chunk + 200)):
                session, intent = sessions[i // SLOTS], Intent()
                pull = _send(conn, api.pull_offer(**session.lease(intent)))
                ack = _send(
                    conn, api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")
                )
                pending.append((session, intent, pull, ack))
        conn.execute("VACUUM ql_private.runs, ql_private.attempts, ql_private.run_leases")
    started: list[Started] = []
    for session, intent, pull, ack in pending:
        result, acked = pull.fetchone()[0], ack.fetchone()[0]
        assert result["status"] == "offered", result
        assert acked["status"] == "ok", acked
        candidate = result["offer"]["candidate"]
        started.append(Started(session, intent, candidate["runId"], candidate["attemptId"]))
    return started


def _sweeper(
    dsn: str,
    stop: threading.Event,
    barrier: threading.Barrier,
    totals: list[Counter],
    errors: list[str],
    until_idle: bool = False,
) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as own:
            own.execute("SET ROLE ql_runtime")
            mine: Counter = Counter()
            barrier.wait()
            while not stop.is_set():
                result = api.sweep_leases(batch=64).run(own).doc
                for key in ("expired", "lost", "retried", "failed", "cancelled", "skipped"):
                    mine[key] += result[key]
                mine["passes"] += 1
                if (
                    until_idle
                    and not result["more"]
                    and result["lost"] == 0
                    and result["skipped"] == 0
                ):
                    break
                if not result["more"]:
                    time.sleep(0.001)
            totals.append(mine)
    except Exception as exc:  # surfaced by the main thread
        errors.append(repr(exc))


def _lease_rows(conn: psycopg.Connection) -> dict[str, tuple]:
    rows = conn.execute(
        "SELECT offer_id::text, release_reason, expires_at > clock_timestamp(), lease_version"
        " FROM ql_private.run_leases"
    ).fetchall()
    return {row[0]: row[1:] for row in rows}


def test_heartbeats_racing_sweepers_never_extend_a_lost_lease(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    leases = _start_leases(conn, prov, N_LEASES)
    # Age every lease to expire somewhere in the next 0.4 .. 2.4 s.
    conn.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp()"
        " + (0.4 + random() * 2.0) * interval '1 second' WHERE released_at IS NULL"
    )
    expiry_ms = {
        offer: ms
        for offer, ms in conn.execute(
            "SELECT offer_id::text, floor(extract(epoch FROM expires_at) * 1000)::bigint"
            " FROM ql_private.run_leases WHERE released_at IS NULL"
        ).fetchall()
    }
    by_offer = {lease.intent.offer_id: lease for lease in leases}
    order = sorted(by_offer, key=lambda offer: expiry_ms[offer])
    n_heartbeaters = 4
    answers: dict[str, dict] = {}
    errors: list[str] = []
    stop = threading.Event()
    barrier = threading.Barrier(n_heartbeaters + 3)
    totals: list[Counter] = []
    offsets_ms = [((i * 7919) % 31) - 15 for i in range(len(order))]  # -15 .. +15 ms

    def heartbeater(index: int) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                own.execute("SET ROLE ql_worker_ingress")
                barrier.wait()
                for position in range(index, len(order), n_heartbeaters):
                    offer = order[position]
                    fire_at = (expiry_ms[offer] + offsets_ms[position]) / 1000.0
                    delay = fire_at - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    answers[offer] = _heartbeat(own, by_offer[offer], 2)
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=heartbeater, args=(i,)) for i in range(n_heartbeaters)]
    threads += [
        threading.Thread(target=_sweeper, args=(db_dsn, stop, barrier, totals, errors))
        for _ in range(3)
    ]
    started_at = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads[:n_heartbeaters]:
        thread.join(timeout=60)
    stop.set()
    for thread in threads[n_heartbeaters:]:
        thread.join(timeout=60)
    assert not errors, errors
    assert time.monotonic() - started_at < 30

    # Leases whose heartbeat lost the race may not be swept yet: one final pass.
    with psycopg.connect(db_dsn, autocommit=True) as last:
        final = api.sweep_leases(batch=5000).run(last).doc
    swept_lost = sum(t["lost"] for t in totals) + final["lost"]

    assert len(answers) == N_LEASES
    statuses = Counter(
        a["status"] if a["status"] == "ok" else a.get("category") for a in answers.values()
    )
    assert set(statuses) <= {"ok", "lease_expired"}, statuses
    extended = {offer for offer, a in answers.items() if a["status"] == "ok"}
    refused = {offer for offer, a in answers.items() if a["status"] != "ok"}
    # The race really happened on both sides of the boundary.
    assert extended and refused, statuses

    rows = _lease_rows(conn)
    lost = {offer for offer, (reason, _, _) in rows.items() if reason == "lost"}
    live = {offer for offer, (reason, unexpired, _) in rows.items() if reason is None and unexpired}
    assert extended.isdisjoint(lost), "a lease was both extended and lost"
    assert extended <= live
    assert all(rows[offer][2] == 3 for offer in extended), "extended exactly once"
    assert refused == lost, "every refused heartbeat's lease, and only those, is lost"
    assert swept_lost == len(lost)
    for offer in extended:  # the answer carried the extension
        assert answers[offer]["lease"]["expiresAtMs"] > expiry_ms[offer]

    lost_events = Counter(
        offer
        for (offer,) in conn.execute(
            "SELECT payload->>'offerId' FROM ql_private.events WHERE type = 'attempt.lost'"
        ).fetchall()
    )
    assert set(lost_events) == lost and set(lost_events.values()) == {1}
    attempts = dict(
        conn.execute("SELECT run_id::text, count(*) FROM ql_private.attempts GROUP BY 1").fetchall()
    )
    lost_runs = {by_offer[offer].run_id for offer in lost}
    assert all(
        attempts[lease.run_id] == (2 if lease.run_id in lost_runs else 1) for lease in leases
    )


def test_concurrent_sweepers_retry_each_lost_attempt_once(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    leases = _start_leases(conn, prov, N_LEASES)
    conn.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'"
        " WHERE released_at IS NULL"
    )
    stop = threading.Event()
    barrier = threading.Barrier(3)
    totals: list[Counter] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=_sweeper, args=(db_dsn, stop, barrier, totals, errors, True))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stop.set()
    assert not errors, errors
    assert len(totals) == 3

    assert sum(t["lost"] for t in totals) == N_LEASES
    assert sum(t["retried"] for t in totals) == N_LEASES
    assert sum(t["failed"] + t["cancelled"] + t["expired"] for t in totals) == 0

    per_attempt = conn.execute(
        "SELECT count(*), count(DISTINCT attempt_id) FROM ql_private.events"
        " WHERE type = 'attempt.lost'"
    ).fetchone()
    assert per_attempt == (N_LEASES, N_LEASES)
    retries = conn.execute(
        "SELECT count(*), count(DISTINCT run_id) FROM ql_private.events"
        " WHERE type = 'run.retry_scheduled'"
    ).fetchone()
    assert retries == (N_LEASES, N_LEASES)
    shape = conn.execute(
        "SELECT a.attempt_no, a.state, count(*) FROM ql_private.attempts a"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    assert shape == [(1, "lost", N_LEASES), (2, "claimed", N_LEASES)]
    current = conn.execute(
        "SELECT count(*) FROM ql_private.runs r JOIN ql_private.attempts a"
        " ON a.id = r.current_attempt_id WHERE r.state = 'queued' AND a.attempt_no = 2"
    ).fetchone()[0]
    assert current == N_LEASES
    assert {lease.attempt_id for lease in leases} == {
        str(a)
        for (a,) in conn.execute(
            "SELECT attempt_id FROM ql_private.events WHERE type = 'attempt.lost'"
        ).fetchall()
    }
    # The retried runs are candidates again (retry_base_ms = 0).
    nothing_live = conn.execute(
        "SELECT count(*) FROM ql_private.run_leases WHERE released_at IS NULL"
    ).fetchone()[0]
    assert nothing_live == 0


LOCK_ORDER_ROUNDS = 12


def _wait_for_lock_wait(conn: psycopg.Connection, pid: int) -> None:
    """Until backend `pid` waits on a heavyweight lock (a row lock's tuple or
    transaction lock): it has taken every lock it takes before that one."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row is not None and row[0] == "Lock":
            return
        time.sleep(0.005)
    raise AssertionError(f"backend {pid} never waited on a lock")


def _in_thread(
    dsn: str, role: str, call: api.Call, pids: list[int], answers: dict[str, object]
) -> threading.Thread:
    """Run `call` as `role` on its own connection; its backend pid goes to
    `pids` once connected, its answer (or error) to answers[role]."""

    def run() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as own:
                own.execute(f"SET ROLE {role}")
                pids.append(own.info.backend_pid)
                answers[role] = call.run(own)
        except Exception as exc:  # surfaced by the main thread
            pids.append(-1)
            answers[role] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _started_pid(pids: list[int], count: int) -> int:
    deadline = time.monotonic() + 10
    while len(pids) < count and time.monotonic() < deadline:
        time.sleep(0.002)
    assert len(pids) == count and pids[-1] > 0, pids
    return pids[-1]


def _offers(conn: psycopg.Connection, prov: Provisioner, n: int) -> list[Started]:
    """n real claims (ql.pull_offer), not ACKed: unstarted live leases."""
    task = prov.task("lock-order")
    prov.enqueue(task, count=n)
    session = prov.session(prov.worker("lock-order"), dict(DEFAULT_CAPABILITIES, slots=SLOTS))
    offers: list[Started] = []
    for _ in range(n):
        intent = Intent()
        result = prov.pull(session, intent)
        assert result["status"] == "offered", result
        candidate = result["offer"]["candidate"]
        offers.append(Started(session, intent, candidate["runId"], candidate["attemptId"]))
    return offers


def test_ack_and_cancel_queue_in_one_lock_order(db_dsn: str, conn, prov: Provisioner) -> None:
    """A third session holds an offered run's attempt lock; a cancel of the run
    queues on it first, then the worker's starting ACK. When the holder commits,
    the cancel takes attempt, run and then the unstarted lease (it releases it);
    an ACK that had locked the lease (or the run) before the attempt would now
    wait for the cancel while the cancel waits for it — a deadlock PostgreSQL
    breaks with 40P01. In the one order both finish: the run is cancelled, and
    the ACK, deciding again on the locked rows, answers lease_terminal."""
    offers = _offers(conn, prov, LOCK_ORDER_ROUNDS)
    for offer in offers:
        pids: list[int] = []
        answers: dict[str, object] = {}
        with psycopg.connect(db_dsn) as holder:  # one transaction, held open
            holder.execute(
                "SELECT 1 FROM ql_private.attempts WHERE id = %s FOR UPDATE", (offer.attempt_id,)
            )
            cancel = _in_thread(
                db_dsn, "ql_runtime", api.cancel_run(run_id=offer.run_id), pids, answers
            )
            _wait_for_lock_wait(conn, _started_pid(pids, 1))
            ack = _in_thread(
                db_dsn,
                "ql_worker_ingress",
                api.ack_lease(
                    **offer.session.lease(offer.intent), lease_version=1, phase="starting"
                ),
                pids,
                answers,
            )
            _wait_for_lock_wait(conn, _started_pid(pids, 2))
        cancel.join(timeout=30)
        ack.join(timeout=30)
        assert not cancel.is_alive() and not ack.is_alive()
        errors = [answer for answer in answers.values() if isinstance(answer, Exception)]
        assert errors == [], errors
        cancelled, acked = answers["ql_runtime"], answers["ql_worker_ingress"]
        assert isinstance(cancelled, RunCancel) and cancelled.state == "cancelled", cancelled
        assert isinstance(acked, Conflict), acked
        assert acked.doc == {"status": "conflict", "category": "lease_terminal"}, acked
    states = conn.execute(
        "SELECT state, count(*) FROM ql_private.runs WHERE id = ANY(%s::uuid[]) GROUP BY state",
        ([offer.run_id for offer in offers],),
    ).fetchall()
    assert states == [("cancelled", LOCK_ORDER_ROUNDS)], states
