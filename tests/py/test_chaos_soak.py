"""The chaos soak, short mode (docs/RELIABILITY.md), plus unit tests of its proxy.

`test_short_soak` runs in CI by default (about 3-4 minutes on 2 cores): it
needs a private PostgreSQL it can restart, so it ignores QL_TEST_DSN. Set
QL_SKIP_CHAOS_SOAK=1 to skip it. `test_every_mutant_is_caught_by_the_short_soak`
runs the mutant campaign (`python -m tools.chaos mutate`, a short soak per mutant,
about 45 minutes on 2 cores): longer than the whole CI run may take, so it runs only
when asked, with QL_CHAOS_MUTATE=1 (or run the command itself). Whether every
mutant still applies is checked fast, in the default lane
(tests/py/test_chaos_checker.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.chaos.history import FAULT_KINDS
from tools.chaos.proxy import ChaosProxy

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

REQUIRED_FAULTS = list(FAULT_KINDS)

# ------------------------------------------------------------------ proxy


class Upstream:
    """Answers every chunk it receives with 200 bytes; remembers what it got."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                self.received.append(data)
                conn.sendall(b"r" * 200)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxied() -> Iterator[tuple[Upstream, ChaosProxy]]:
    upstream = Upstream()
    proxy = ChaosProxy([upstream.port]).start()
    try:
        yield upstream, proxy
    finally:
        proxy.close()
        upstream.close()


def _exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    received = b""
    while len(received) < 200:
        chunk = sock.recv(4096)
        if not chunk:
            return received
        received += chunk
    return received


def test_proxy_forwards_the_request_and_drops_its_response(proxied) -> None:
    upstream, proxy = proxied
    dropped: list[int] = []
    proxy._on_drop = dropped.append
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        # Two bursts stand for the TLS handshake: never dropped.
        assert _exchange(sock, b"hello") == b"r" * 200
        assert _exchange(sock, b"finished") == b"r" * 200
        proxy.drop_probability = 1.0
        assert _exchange(sock, b"request") == b""  # the answer never arrives
    deadline = time.monotonic() + 5
    while b"request" not in upstream.received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"request" in upstream.received  # ... but the upstream did the work
    assert proxy.stats.dropped_responses == 1 and dropped == [1]


def test_proxy_latency_spike_delays_answers(proxied) -> None:
    _, proxy = proxied
    proxy.latency_s = 0.5
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        began = time.monotonic()
        assert _exchange(sock, b"ping") == b"r" * 200
        assert time.monotonic() - began >= 0.5


def test_proxy_skips_a_dead_upstream(proxied) -> None:
    upstream, proxy = proxied
    dead = socket.create_server(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()
    proxy.upstreams = [dead_port, upstream.port]
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            assert _exchange(sock, b"ping") == b"r" * 200


# ------------------------------------------------------------------ finding


def test_retry_racing_its_own_first_request_gets_the_same_offer(db_dsn: str) -> None:
    """The first request of an intent is still running server-side (its ingress was
    killed, or the worker timed out) when the worker's retry of the same offer id +
    token arrives. The retry must answer with that offer (idempotent), never idle."""
    import psycopg

    from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner

    with psycopg.connect(db_dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        session = prov.session(prov.worker("w"), dict(DEFAULT_CAPABILITIES, slots=1))
        prov.enqueue(prov.task("t"), 2)
    intent = Intent()
    answers: list[dict] = []

    def retry() -> None:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            answers.append(Provisioner(conn).pull(session, intent))

    with psycopg.connect(db_dsn) as first:  # the first attempt, not yet committed
        assert Provisioner(first).pull(session, intent)["status"] == "offered"
        racer = threading.Thread(target=retry)
        racer.start()
        racer.join(1.0)
        assert racer.is_alive()  # the retry waits for its first request (offer-id lock)
        first.commit()
    racer.join(30)
    assert answers and answers[0]["status"] == "idempotent", answers


# ------------------------------------------------------------------ the soak


@pytest.mark.timeout(900)
@pytest.mark.skipif(os.environ.get("QL_SKIP_CHAOS_SOAK") == "1",
                    reason="QL_SKIP_CHAOS_SOAK=1")  # fmt: skip
def test_short_soak_finds_no_anomalies(tmp_path: Path) -> None:
    from tools.chaos.cli import summary
    from tools.chaos.soak import SHORT, Soak

    # QL_CHAOS_OUT keeps the artifacts where pytest's temp-dir rotation cannot reach.
    out = Path(os.environ.get("QL_CHAOS_OUT") or tmp_path) / "soak"
    report = Soak(SHORT, out).run()
    for line in summary(report):
        print(line)  # shown by pytest on failure, with the directory
    print(f"out: {out}")
    result = json.loads((out / "soak.json").read_text())
    assert report.by_class() == {name: 0 for name in report.by_class()}, report.to_doc()
    assert report.ok
    assert result["pulls"] >= 2000, result
    # Every fault kind of the brief happened, and a worker died in every crash window.
    assert all(report.faults[kind] >= 1 for kind in REQUIRED_FAULTS), report.faults
    assert not result["crashWindowsMissed"], result["crashWindows"]
    assert all(hits >= 1 for hits in result["crashWindows"].values()), result["crashWindows"]
    assert report.counts["idleAnswers"] > 0  # every idle answer is in the history
    assert report.counts["leases"] > 0 and report.counts["claims"] > 0
    # Executing workers ran commands under the faults: leases started and completed,
    # commands failed and were retried by the policy, a cancel reached a running
    # command, and every second process on a held journal was turned away.
    counts = report.counts
    assert counts["leasesStarted"] > 0 and counts["execCompleted"] > 0, counts
    assert counts.get("attemptsFailed", 0) > 0 and counts["attemptsRetried"] > 0, counts
    assert counts["execCancelSeen"] > 0, counts
    # Executing workers killed mid-command: leases lost to the sweeper or recovered.
    assert counts.get("attemptsLost", 0) + counts["execRecovered"] > 0, counts
    assert counts.get("doubleStartRefused", 0) > 0 and "doubleStartRan" not in counts, counts
    # The hostile worker (class j) was answered, and refused on others' leases/sessions.
    assert counts.get("byzJudged", 0) > 100 and counts.get("byzForeignRefused", 0) > 0, counts
    # Two pools (SPEC §13): it was offered runs of its own pool, and its sessions
    # declaring the honest fleet's labels were refused label_not_granted.
    assert counts.get("byzHonestOffers", 0) > 0 and counts.get("byzLabelsRefused", 0) > 0, counts
    # The offline checker alone (the CLI) agrees with the soak's own verdict.
    check = subprocess.run([sys.executable, "-m", "tools.chaos", "check", str(out)],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "OK, no anomalies" in check.stdout


# ------------------------------------------------------------------ the mutant campaign


@pytest.mark.timeout(5400)
@pytest.mark.skipif(os.environ.get("QL_CHAOS_MUTATE") != "1",
                    reason="the ~45 min mutant campaign: QL_CHAOS_MUTATE=1")  # fmt: skip
def test_every_mutant_is_caught_by_the_short_soak() -> None:
    """`python -m tools.chaos mutate`: a short soak per mutant (about 40 minutes on
    2 cores); each planted bug must show at least one anomaly."""
    from tools.chaos.mutate import load_mutants

    done = subprocess.run([sys.executable, "-m", "tools.chaos", "mutate"], capture_output=True,
                          text=True, timeout=5300, check=False)  # fmt: skip
    total = len(load_mutants())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{total} of {total} mutants caught" in done.stdout, done.stdout[-4000:]
