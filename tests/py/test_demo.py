"""`qinglong demo` end to end (black-box, a subprocess without a TTY): every run
offered, a summary, exit 0, and nothing left behind — also after Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

DEMO = [sys.executable, "-m", "qinglong", "demo"]
_PG = re.compile(r"PostgreSQL 15 on 127\.0\.0\.1:(\d+) \((/[^)]+)\)")
_INGRESS = re.compile(r"ingress https://127\.0\.0\.1:(\d+) .* admin http://127\.0\.0\.1:(\d+)")
_ROOT = re.compile(r"working directory (/\S+) ")
_SWEEPER = re.compile(r"lease sweeper every \S+ \(pid (\d+)\)")
_API = re.compile(r"producer API https://127\.0\.0\.1:(\d+) ")
_CURL = re.compile(r"the same enqueue from a shell \(the token is read from its file\): (curl .*)$")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _assert_gone(output: str) -> None:
    pg = _PG.search(output)
    if pg is not None:  # not when QL_TEST_DSN points at an existing server
        assert not Path(pg.group(2)).exists(), "the throwaway cluster dir was left behind"
        assert not _listening(int(pg.group(1))), "PostgreSQL still listening"
    sweeper = _SWEEPER.search(output)
    assert sweeper is not None, output  # the demo runs a sweeper, as a deployment does
    assert not Path(f"/proc/{sweeper.group(1)}").exists() \
        or Path(f"/proc/{sweeper.group(1)}/stat").read_text().rsplit(")", 1)[-1].split()[0] \
        == "Z", "the sweeper is still running"
    ingress = _INGRESS.search(output)
    assert ingress is not None, output
    for port in ingress.groups():
        assert not _listening(int(port)), f"ingress still listening on {port}"
    api = _API.search(output)
    assert api is not None, output  # the runs are enqueued through the producer API
    assert not _listening(int(api.group(1))), "the producer API is still listening"
    assert "qlp_" not in output, "a project token was printed"


@pytest.mark.timeout(180)
def test_demo_offers_every_run_and_cleans_up() -> None:
    result = subprocess.run([*DEMO, "--workers", "3", "--runs", "18"], capture_output=True,
                            text=True, timeout=150, check=False)
    output = result.stdout
    assert result.returncode == 0, output + result.stderr
    assert "every run offered" in output or "every run done" in output
    assert "Summary: runs per task and the worker that took them" in output
    total = next(line for line in output.splitlines() if line.strip().startswith("total"))
    assert total.split()[1] == "18"
    # The flaky worker's lost response was recovered, not leased twice.
    assert '"idempotent": 1' in output, output
    assert "restarted: it replays the same offer id + token" in output
    assert "enqueueing the runs through the producer API" in output
    _assert_gone(output)
    root = _ROOT.search(output)
    assert root is not None and not Path(root.group(1)).exists()


@pytest.mark.timeout(180)
def test_demo_cleans_up_on_ctrl_c() -> None:
    process = subprocess.Popen([*DEMO, "--workers", "2", "--runs", "12", "--timeout", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    for line in process.stdout:
        lines.append(line)
        if "workers run without an executor" in line or "worker old-b" in line \
                or "worker gpu-b" in line:
            break
        if time.monotonic() > deadline:
            break
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert "interrupted: cleaning up" in output
    _assert_gone(output)
    root = _ROOT.search(output)
    assert root is not None and not Path(root.group(1)).exists(), "working directory left"


@pytest.mark.timeout(180)
def test_the_printed_curl_line_enqueues_through_the_demo_api() -> None:
    """The curl line the demo prints works while the demo runs (SPEC §13.5): it
    reads the token from the demo's 0600 file and the API answers 201."""
    process = subprocess.Popen([*DEMO, "--workers", "2", "--runs", "6", "--timeout", "60",
                                "--no-console"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    lines: list[str] = []
    curl = None
    for line in process.stdout:
        lines.append(line)
        found = _CURL.search(line.rstrip("\n"))
        if found is not None or "Summary:" in line:
            curl = found and found.group(1)
            break
    try:
        assert curl is not None, "".join(lines)
        assert '-H "Authorization: Bearer $(cat ' in curl and "qlp_" not in curl
        done = subprocess.run(["bash", "-c", curl], capture_output=True, text=True,
                              timeout=30, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        answer = json.loads(done.stdout)
        assert answer["schema"] == "qinglong/run-enqueued@v1"
        assert len(answer["runIds"]) == 1 and answer["existing"] is False
    finally:
        os.kill(process.pid, signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode in (0, 1, 130), output
    _assert_gone(output)
