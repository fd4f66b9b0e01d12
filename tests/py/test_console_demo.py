"""`qinglong demo` serves the console (SPEC §10): its URL is the first line, the
console answers while the demo runs, and it is gone after the demo; and
`--no-console` serves none."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.py.console_scenario import fetch

pytestmark = pytest.mark.slow

DEMO = [
    sys.executable,
    "-m",
    "qinglong",
    "demo",
    "--workers",
    "2",
    "--runs",
    "8",
    "--timeout",
    "60",
    "--no-crash",
]
_URL = re.compile(r"console (http://127\.0\.0\.1:(\d+)/) ")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _lines_until(process: subprocess.Popen[str], marker: str, lines: list[str]) -> None:
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    for line in process.stdout:
        lines.append(line)
        if marker in line or time.monotonic() > deadline:
            return


def _interrupt(process: subprocess.Popen[str], lines: list[str]) -> str:
    os.kill(process.pid, signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    return "".join(lines) + rest


@pytest.mark.timeout(180)
def test_demo_prints_the_console_url_first_and_serves_it() -> None:
    process = subprocess.Popen(
        [*DEMO, "--console-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    try:
        _lines_until(process, "console serving", lines)
        first = _URL.search(lines[0])
        assert first is not None, "".join(lines)
        url, port = first.group(1), int(first.group(2))
        _lines_until(process, "worker", lines)
        answer = fetch(url)  # "console serving" is said once it listens
        assert answer.status == 200, answer.body
        assert 'id="runs-by-state"' in answer.body and 'id="throughput-chart"' in answer.body
        assert fetch(url + "workers").status == 200
    finally:
        output = _interrupt(process, lines)
    assert process.returncode == 130, output
    assert not _listening(port), "the console still listens after the demo"


@pytest.mark.timeout(180)
def test_demo_without_console() -> None:
    process = subprocess.Popen(
        [*DEMO, "--no-console"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    try:
        _lines_until(process, "ingress", lines)
    finally:
        output = _interrupt(process, lines)
    assert "console" not in output.split("ingress")[0], output
    assert "working directory" in lines[0]
