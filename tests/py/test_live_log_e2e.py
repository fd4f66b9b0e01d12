"""Live logs end to end (SPEC §15.1, §15.2): `qinglong worker run --execute`
shipping its commands' output to the real ingress over TLS (`qinglong dev up`),
read back with `admin run log --json`.

(a) a multi-chunk output (~200 KiB: multibyte characters split across writes,
    invalid bytes, NUL) is stored byte for byte as the command's sanitized
    output, and the attempt's logBytes is its length;
(b) a worker SIGKILLed mid-stream and restarted on the same journal ships the
    rest from the server's offset before completing `worker_restarted`: the
    stored log equals the (sanitized) output.log the command left, no gap, no
    duplicate;
(c) a task with `--log-limit-bytes 1024`: the stored log is the first 1024
    bytes, marked truncated, the command completes normally and logBytes
    (larger) says how much there was.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.py.run_as_support import searchable_tmp
from tests.py.test_lifecycle_e2e import Env
from tests.py.test_worker_e2e import QL, _dev_up, _json_out

pytestmark = pytest.mark.slow

# ~200 KiB in 100 writes over ~2.5 s: more than three 64 KiB chunks, shipped
# while it runs; a 3-byte character split across two writes; invalid bytes; NUL.
CHATTY = ("import sys,time\n"
          "w=sys.stdout.buffer\n"
          "for i in range(50):\n"
          "    w.write(('line %d ' % i).encode() + 'é漢'.encode() * 1300 + b'\\xe6\\xbc')\n"
          "    w.flush(); time.sleep(0.05)\n"
          "    w.write(b'\\xa2 \\xff\\x00\\n'); w.flush()\n")  # fmt: skip
# Numbered lines for ~8 s: killed somewhere in the middle.
STEADY = ("import sys,time\n"
          "for i in range(800):\n"
          "    sys.stdout.write('%05d 漢字 steady line\\n' % i); sys.stdout.flush()\n"
          "    time.sleep(0.01)\n")  # fmt: skip


def sanitized(data: bytes) -> bytes:
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd").encode()


def expected_output(script: str) -> bytes:
    return subprocess.run([sys.executable, "-c", script], capture_output=True,
                          check=True).stdout  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    state_dir = tmp_path_factory.mktemp("dev")
    doc = _dev_up(state_dir)
    helper = Env(doc, searchable_tmp("ql-live-log-"))
    try:
        yield helper
    finally:
        for worker in helper.workers:
            worker.kill()
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(helper.directory, ignore_errors=True)


def run_log(env: Env, run_id: str, attempt: int | None = None) -> dict[str, Any]:
    argv = [*QL, "admin", "run", "log", "--dsn-file", env.dsn_file, "--run", run_id, "--json"]
    if attempt is not None:
        argv += ["--attempt", str(attempt)]
    return _json_out(argv)


def attempt_result(env: Env, run_id: str, attempt: int) -> dict[str, Any]:
    rows = env.query("SELECT result FROM ql_private.attempts WHERE run_id = %s "
                     "AND attempt_no = %s", run_id, attempt)  # fmt: skip
    return rows[0][0]


def test_a_multi_chunk_output_is_stored_byte_for_byte(env: Env) -> None:
    task = env.publish("chatty", ["/usr/bin/python3", "-c", CHATTY], lane="a")
    worker = env.worker(env.identity(), env.directory / "worker-a", lane="a")
    (run_id,) = env.enqueue(task)
    assert env.wait_runs([run_id], timeout=60)[run_id] == "succeeded"
    want = sanitized(expected_output(CHATTY))
    log = run_log(env, run_id)
    assert log["text"].encode() == want
    assert log["storedBytes"] == log["logBytes"] == len(want) > 3 * 64 * 1024
    assert log["complete"] is True and log["truncated"] is False
    assert attempt_result(env, run_id, 1)["logBytes"] == len(want)
    assert not worker.named("exec.log_incomplete")
    assert worker.stop(signal.SIGTERM) == 0


def test_b_sigkilled_worker_restarts_and_continues_without_gap_or_duplicate(env: Env) -> None:
    task = env.publish("steady", ["/usr/bin/python3", "-c", STEADY], lane="b")
    identity = env.identity()
    journal = env.directory / "worker-b"
    first = env.worker(identity, journal, lane="b")
    (run_id,) = env.enqueue(task)
    first.wait_for("exec.started", timeout=30)
    deadline = time.monotonic() + 30
    while True:  # until part of the log is stored: the crash is mid-stream
        with contextlib.suppress(AssertionError, Exception):
            if run_log(env, run_id)["storedBytes"] > 0:
                break
        assert time.monotonic() < deadline, "nothing shipped"
        time.sleep(0.3)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    restarted = env.worker(identity, journal, lane="b")
    assert env.wait_runs([run_id], timeout=60)[run_id] == "succeeded"
    assert env.attempts(run_id)[0] == (1, "failed", None, "worker_restarted")
    work = Path(str(journal) + ".work")
    [output] = [p for p in work.glob("*/output.log")
                if p.parent.name == _offer_of_attempt(env, run_id, 1)]  # fmt: skip
    on_disk = sanitized(output.read_bytes())
    log = run_log(env, run_id, attempt=1)
    assert log["text"].encode() == on_disk  # no gap, no duplicate
    assert 0 < len(on_disk) < len(expected_output(STEADY))  # really cut mid-stream
    assert expected_output(STEADY).startswith(on_disk)
    assert log["storedBytes"] == log["logBytes"] == len(on_disk) and log["complete"] is True
    resumed = restarted.named("exec.log_resumed")
    assert resumed and resumed[0]["offset"] > 0  # it went on from the server's offset
    # The retry ran the command to its end, with a log of its own.
    assert run_log(env, run_id, attempt=2)["text"].encode() == expected_output(STEADY)
    assert restarted.stop(signal.SIGTERM) == 0


def _offer_of_attempt(env: Env, run_id: str, attempt: int) -> str:
    rows = env.query(
        "SELECT l.offer_id::text FROM ql_private.run_leases l"
        " JOIN ql_private.attempts a ON a.id = l.attempt_id"
        " WHERE a.run_id = %s AND a.attempt_no = %s AND l.started_at IS NOT NULL",
        run_id, attempt)  # fmt: skip
    return rows[0][0]


def test_c_past_the_log_limit_shipping_stops_and_the_command_completes(env: Env) -> None:
    task = env.publish("capped", ["/usr/bin/python3", "-c", CHATTY], lane="c")
    _json_out([*QL, "admin", "task", "configure", "--dsn-file", env.dsn_file,
               "--task", task, "--log-limit-bytes", "1024"])  # fmt: skip
    worker = env.worker(env.identity(), env.directory / "worker-c", lane="c")
    (run_id,) = env.enqueue(task)
    assert env.wait_runs([run_id], timeout=60)[run_id] == "succeeded"
    want = sanitized(expected_output(CHATTY))
    log = run_log(env, run_id)
    assert log["storedBytes"] == 1024 and log["truncated"] is True
    assert log["text"].encode() == want[:1024]
    assert log["logBytes"] == len(want) > 1024
    assert attempt_result(env, run_id, 1)["logBytes"] == len(want)
    assert worker.named("exec.log_truncated")
    assert env.attempts(run_id) == [(1, "succeeded", 0, None)]
    assert worker.stop(signal.SIGTERM) == 0
