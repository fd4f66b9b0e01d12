"""Audit before acting (SPEC §5: authenticate, authorize, record the audit
decision, then act), against the real ingress process writing its audit log to a
real file: the `allowed` line is on disk while the database call is still
waiting, before the action has any effect, and a SIGKILL right then leaves it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from tests.py import ingress_harness
from tests.py.ingress_harness import (
    INGRESS_ROLE,
    PkiSet,
    Reply,
    make_agent,
    open_body,
    post,
    start_ingress_tree,
)

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _open_session_waiting_on_a_lock(su: psycopg.Connection) -> bool:
    """The ingress's ql.open_session call is in the database, waiting for a lock."""
    row = su.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
        " AND wait_event_type = 'Lock' AND position('open_session(' in query) > 0",
        (INGRESS_ROLE,),
    ).fetchone()
    return row is not None and row[0] == 1


def _sessions(su: psycopg.Connection, worker_id: str) -> int:
    row = su.execute(
        "SELECT count(*) FROM ql_private.worker_sessions WHERE worker_id = %s", (worker_id,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_allowed_line_precedes_the_action_and_survives_a_sigkill(
    tmp_path: Path,
    test_pki: PkiSet,
    ingress_dsn: str,
    prov,
    su_conn: psycopg.Connection,
    db_dsn: str,
) -> None:
    agent = make_agent(prov, test_pki, "audit-order")
    tree = start_ingress_tree(tmp_path / "ingress", test_pki, ingress_dsn)
    audit = tmp_path / "ingress" / "audit.log"
    replies: list[Reply | BaseException] = []

    def open_session() -> None:
        try:
            replies.append(
                post(tree.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
            )
        except (OSError, ConnectionError) as exc:  # the ingress is killed under it
            replies.append(exc)

    try:
        # The fault: another transaction holds the worker's row, so the session
        # open (which locks it to act) blocks inside the database.
        with psycopg.connect(db_dsn) as locker:
            locker.execute(
                "SELECT 1 FROM ql_private.workers WHERE id = %s FOR UPDATE", (agent.worker_id,)
            )
            opener = threading.Thread(target=open_session, daemon=True)
            opener.start()
            _wait(
                lambda: _open_session_waiting_on_a_lock(su_conn),
                "the session open waits in the database",
            )
            # The decision is on disk already; the action has had no effect yet.
            assert [
                (line["action"], line["outcome"], line["workerId"], line["credentialId"])
                for line in _lines(audit)
            ] == [("session.open", "allowed", agent.worker_id, agent.worker.credential_id)]
            assert _sessions(su_conn, agent.worker_id) == 0
            tree.process.kill()  # SIGKILL: no handler, no flush, no second line
            assert tree.process.wait(10) == -9
            locker.rollback()
        opener.join(20)
        assert replies and isinstance(replies[0], BaseException), replies
        # The database call, already sent, still commits once the row is free: the
        # action happened, and its allowed line says so.
        _wait(lambda: _sessions(su_conn, agent.worker_id) == 1, "the blocked call completes")
        assert [(line["action"], line["outcome"]) for line in _lines(audit)] == [
            ("session.open", "allowed")
        ]
    finally:
        tree.stop()


def test_an_action_gets_its_outcome_line_after_the_allowed_one(
    tmp_path: Path, test_pki: PkiSet, ingress_dsn: str, prov
) -> None:
    agent = make_agent(prov, test_pki, "audit-pair")
    tree = start_ingress_tree(tmp_path / "ingress", test_pki, ingress_dsn)
    try:
        reply = post(tree.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
        assert reply.status == 201, reply.body
    finally:
        assert tree.stop() == 0
    lines = _lines(tmp_path / "ingress" / "audit.log")
    assert [
        (line["action"], line["outcome"], line["reason"], line["workerId"]) for line in lines
    ] == [
        ("session.open", "allowed", "identity_verified", agent.worker_id),
        ("session.open", "done", "ok", agent.worker_id),
    ]
