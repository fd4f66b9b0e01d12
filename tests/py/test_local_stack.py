"""qinglong.local_stack's teardown (what `dev down` and the demo's cleanup run):
services stop while their database still answers, then PostgreSQL stops and its
directory goes; a second teardown does nothing; a recorded pid that is no longer
the process we started is never signalled. Real processes, a real cluster."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from qinglong.local_stack import LocalStack, cluster_base_dir, proc_start_time

# A service that, when told to stop, checks whether PostgreSQL still answers and
# writes what it found (its DSN comes through the environment, never argv).
PROBE = """
import os, signal, sys, time
import psycopg
found, ready = sys.argv[1], sys.argv[2]
def stop(*_):
    try:
        with psycopg.connect(os.environ["PROBE_DSN"], connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        answer = "postgres up"
    except psycopg.Error:
        answer = "postgres down"
    with open(found, "w") as handle:
        handle.write(answer)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(ready, "w").close()
while True:
    time.sleep(0.1)
"""


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_teardown_stops_services_before_postgres_and_is_idempotent(tmp_path: Path) -> None:
    recorded: dict[str, object] = {}
    stack = LocalStack(tmp_path, "postgres", {}, record=recorded.update)
    base = cluster_base_dir(tmp_path)
    cluster = stack.start_persistent(base)
    try:
        assert recorded["pgBaseDir"] == str(base) and recorded["pgPort"] == cluster.port
        found, ready = tmp_path / "found.txt", tmp_path / "ready"
        probes = [
            stack.launch(
                name,
                [sys.executable, "-c", PROBE, str(found) + name, str(ready) + name],
                env={**os.environ, "PROBE_DSN": cluster.dsn()},
            )
            for name in ("first", "second")
        ]
        for probe in probes:
            marker = Path(str(ready) + probe.name)
            assert (
                stack.wait_ready(probe, lambda m=marker: True if m.exists() else None, 30) is True
            )
            assert recorded[f"{probe.name}Pid"] == probe.pid
        port = cluster.port
    finally:
        stack.teardown()
    for probe in probes:
        assert Path(str(found) + probe.name).read_text() == "postgres up", probe.name
        assert probe.exited() and probe.process is not None
        assert probe.process.returncode == 0  # it stopped on SIGTERM, not SIGKILL
    assert not base.exists(), "the cluster's directory was left behind"
    assert not _listening(port), "PostgreSQL still listening"
    assert stack.facts.services == [] and stack.facts.cluster is None
    stack.teardown()  # again: nothing left to do, nothing raised
    stack.stop_service("first")


def _sleeper(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", *argv], start_new_session=True
    )


def test_a_recorded_service_is_stopped_only_while_it_is_ours(tmp_path: Path) -> None:
    """`dev down` rebuilds the stack from dev-state.json: the pid must still run
    the command naming its config file, with the recorded start time."""
    marker = tmp_path / "ingress.json"
    marker.write_text("{}")
    ours = _sleeper(str(marker))
    stranger = _sleeper()  # a recycled pid: another command line
    late = _sleeper(str(marker))  # the same command line, another start time
    try:
        for name, process in (("ingress", ours), ("sweeper", stranger), ("api", late)):
            (tmp_path / f"{name}.pid").write_text(f"{process.pid}\n")
        record = {
            "ingressStartTime": proc_start_time(ours.pid),
            "apiPid": late.pid,
            "apiStartTime": "1",
        }
        markers = {"ingress": "ingress.json", "sweeper": "ingress.json", "api": "ingress.json"}
        stack = LocalStack.from_record(tmp_path, "qinglong", record, markers)
        assert [s.name for s in stack.facts.services] == ["ingress", "sweeper", "api"]
        assert stack.facts.cluster is None  # nothing recorded: no cluster to stop
        stack.teardown()
        assert ours.wait(10) == -signal.SIGTERM
        assert stranger.poll() is None and late.poll() is None
        LocalStack.from_record(tmp_path, "qinglong", record, markers).teardown()
        assert stranger.poll() is None and late.poll() is None
    finally:
        for process in (ours, stranger, late):
            process.kill()
            process.wait()
