"""A draining session ends with its last lease even when the ends race (SPEC §9.5
`--drain`; ql_private.drain_session, ql_private.close_drained_session). Truly
concurrent connections, each in the role production uses (ql_runtime for the
operator, ql_worker_ingress for the worker's completions):

(a) the drain starts while the session's last started lease is being completed
    (the completion's transaction open, not committed): the drain waits for it
    and then closes the session at once — it never stays `draining` with
    nothing left to end it;
(b) two started leases of one draining session complete at the same time: the
    second waits for the first on the session row and closes the session —
    neither can miss the other.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.db.answers import LeaseOk, SessionEnded
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner, Session


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def prov(conn: psycopg.Connection) -> Provisioner:
    return Provisioner(conn)


def _started(prov: Provisioner, n: int) -> tuple[Session, list[Intent]]:
    """One session holding n real claims, each ACKed `starting` (lease version 2)."""
    task = prov.task("drain-race")
    prov.enqueue(task, count=n)
    session = prov.session(prov.worker("drain-race"), dict(DEFAULT_CAPABILITIES, slots=8))
    intents = []
    for _ in range(n):
        intent = Intent()
        assert prov.pull(session, intent)["status"] == "offered"
        ack = prov.call(
            api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")
        ).doc
        assert ack["status"] == "ok", ack
        intents.append(intent)
    return session, intents


def _complete(session: Session, intent: Intent) -> api.Call[Any]:
    return api.complete_lease(
        **session.lease(intent), lease_version=2, outcome="succeeded", exit_code=0
    )


def _open_completion(db_dsn: str, session: Session, intent: Intent) -> psycopg.Connection:
    """A worker's completion applied in a transaction left open (the caller commits)."""
    own = psycopg.connect(db_dsn)
    own.execute("SET ROLE ql_worker_ingress")
    answer = _complete(session, intent).run(own)
    assert isinstance(answer, LeaseOk) and answer.status == "ok", answer
    return own


def _in_thread(
    db_dsn: str, role: str, call: api.Call[Any], out: dict[str, Any]
) -> threading.Thread:
    def run() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                own.execute(f"SET ROLE {role}")
                out["pid"] = own.info.backend_pid
                out["answer"] = call.run(own)
        except Exception as exc:  # surfaced by the main thread
            out.setdefault("pid", -1)
            out["answer"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _waits_on_a_lock(conn: psycopg.Connection, out: dict[str, Any]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pid = out.get("pid")
        if pid is not None:
            assert pid > 0, out
            row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                               (pid,)).fetchone()  # fmt: skip
            if row is not None and row[0] == "Lock":
                return
        assert "answer" not in out, f"finished without waiting: {out}"
        time.sleep(0.005)
    raise AssertionError("the call never waited on a lock")


def _state(conn: psycopg.Connection, session: Session) -> str:
    row = conn.execute("SELECT state FROM ql_private.worker_sessions WHERE session_id = %s",
                       (session.session_id,)).fetchone()  # fmt: skip
    return row[0]


@pytest.mark.parametrize("round_", range(3))
def test_drain_racing_the_last_completion_closes_the_session(
    db_dsn: str, conn, prov: Provisioner, round_: int
) -> None:
    session, (intent,) = _started(prov, 1)
    worker = _open_completion(db_dsn, session, intent)
    try:
        out: dict[str, Any] = {}
        thread = _in_thread(
            db_dsn, "ql_runtime", api.end_session(session_id=session.session_id, drain=True), out
        )
        _waits_on_a_lock(conn, out)  # on the lease the completion holds
        worker.commit()
    finally:
        worker.close()
    thread.join(timeout=10)
    answer = out["answer"]
    assert isinstance(answer, SessionEnded), answer
    assert (answer.state, answer.leases_running) == ("closed", 0)
    assert _state(conn, session) == "closed"


@pytest.mark.parametrize("round_", range(3))
def test_two_last_completions_at_once_close_the_draining_session(
    db_dsn: str, conn, prov: Provisioner, round_: int
) -> None:
    session, (first, second) = _started(prov, 2)
    drained = prov.call(api.end_session(session_id=session.session_id, drain=True)).doc
    assert (drained["state"], drained["leasesRunning"]) == ("draining", 2)
    worker = _open_completion(db_dsn, session, first)
    try:
        out: dict[str, Any] = {}
        thread = _in_thread(db_dsn, "ql_worker_ingress", _complete(session, second), out)
        _waits_on_a_lock(conn, out)  # on the draining session row the first one holds
        assert _state(conn, session) == "draining"
        worker.commit()
    finally:
        worker.close()
    thread.join(timeout=10)
    answer = out["answer"]
    assert isinstance(answer, LeaseOk) and answer.status == "ok", answer
    assert _state(conn, session) == "closed"
    events = conn.execute(
        "SELECT count(*) FROM ql_private.events WHERE type = 'session.drained' AND worker_id = %s",
        (session.worker.worker_id,),
    ).fetchone()
    assert events == (1,)
