"""`qinglong ingress serve --processes N` (SPEC §12): N real processes share one
port through SO_REUSEPORT under a supervisor that restarts a child that dies,
forwards SIGHUP and stops everything on SIGTERM; workers talk real mTLS to a
real PostgreSQL throughout."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressTree,
    PkiSet,
    make_agent,
    open_body,
    post,
    pull_body,
    start_ingress_tree,
)

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) is dead too.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _wait(predicate: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _pull_ok(tree: IngressTree, agent: Agent, session: dict) -> None:
    reply = post(
        tree.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    assert reply.status == 200 and reply.json["status"] == "idle", reply.body


@pytest.fixture
def tree(tmp_path: Path, test_pki: PkiSet, ingress_dsn: str) -> Iterator[IngressTree]:
    started = start_ingress_tree(tmp_path / "ingress", test_pki, ingress_dsn, processes=2)
    yield started
    started.stop()


def test_two_processes_share_the_port_and_the_supervisor_keeps_them(tree, prov, test_pki):
    ready = tree.ready
    assert ready["processes"] == 2 and ready["pid"] == tree.process.pid
    children = list(ready["childPids"])
    assert len(set(children)) == 2 and all(_alive(pid) for pid in children)
    assert len(set(tree.admin_urls)) == 2  # one admin listener (own /metrics) per child
    agent = make_agent(prov, test_pki, "processes-worker")
    opened = post(tree.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert opened.status == 201, opened.body
    session = opened.json
    for _ in range(40):  # fresh connections: the kernel spreads them over both
        _pull_ok(tree, agent, session)
    served = [
        tree.metric_at(url, 'qinglong_ingress_tls_handshakes_total{outcome="full"}')
        for url in tree.admin_urls
    ]
    assert all(count > 0 for count in served), served
    assert sum(served) >= 41

    # kill -9 one child: the supervisor starts a new one on the same port.
    victim = children[1]
    os.kill(victim, signal.SIGKILL)
    _wait(
        lambda: (
            tree.ready["childPids"][1] not in (victim, 0) and _alive(tree.ready["childPids"][1])
        ),
        "child restarted",
    )
    for _ in range(10):
        _pull_ok(tree, agent, session)
    assert _alive(children[0]) and tree.process.poll() is None
    assert "supervisor.child_exited" in tree.log_text()

    # SIGTERM: every process stops, the supervisor exits 0, nothing is orphaned.
    now = list(tree.ready["childPids"])
    assert tree.stop() == 0
    _wait(lambda: not any(_alive(pid) for pid in now), "children stopped", 10)


def test_children_die_with_the_supervisor(tmp_path, test_pki, ingress_dsn):
    tree = start_ingress_tree(tmp_path / "ingress", test_pki, ingress_dsn, processes=2)
    children = list(tree.ready["childPids"])
    try:
        tree.process.kill()  # SIGKILL: no chance to stop anything itself
        tree.process.wait(5)
        _wait(lambda: not any(_alive(pid) for pid in children), "orphaned children", 15)
    finally:
        tree.stop()


def test_a_child_that_cannot_start_stops_the_tree(tmp_path, test_pki, ingress_dsn):
    # A fixed admin port already taken by someone else fails child 0 at startup:
    # the supervisor does not restart it forever, it stops the tree with status 2.
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        port = taken.getsockname()[1]
        home = tmp_path / "ingress"
        with pytest.raises(AssertionError, match="ingress exited"):
            start_ingress_tree(home, test_pki, ingress_dsn, processes=2, adminPort=port)
        assert "supervisor.child_exited" in (home / "app.log").read_text()
    finally:
        taken.close()


@pytest.mark.parametrize("value", ["0", "-1", "two", "257"])
def test_processes_must_be_a_sensible_count(tmp_path, value):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "qinglong",
            "ingress",
            "serve",
            "--config",
            str(tmp_path / "absent.json"),
            "--processes",
            value,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--processes" in done.stderr and "must be" in done.stderr
