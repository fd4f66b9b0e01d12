"""Run results (SPEC §9.3): the worker's executor reports `result`, the ingress
passes it on, the database stores it with the attempt, `admin run show` shows it.

* Over real mTLS against an in-process ingress + real PostgreSQL: the complete
  request's own body limit (16 KiB; every other request keeps 4 KiB), the
  result's schema (unknown fields, NUL, over 8 KiB) and what is stored.
* End to end (slow): `qinglong dev up` + `qinglong worker run --dev-env …
  --execute`; a command that prints a marker and exits 3, and one that prints
  more than 8 KiB, read back with `qinglong admin run show`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from tests.py import ingress_harness
from tests.py.dsn_files import dsn_file
from tests.py.run_as_support import reachable_dir, run_as_args
from tests.py.test_ingress_leases import COMPLETE, HEARTBEAT, Claim, _claim, _lease
from tests.py.test_worker_e2e import QL, Worker, _dev_up, _json_out, dev_args

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

TAIL_BYTES = 8192


def padded(doc: dict[str, Any], size: int) -> bytes:
    """`doc` as JSON, padded with insignificant whitespace to exactly `size` bytes."""
    data = json.dumps(doc).encode()
    assert len(data) <= size
    return data[:-1] + b" " * (size - len(data)) + b"}"


@pytest.fixture
def claim(ingress, prov, test_pki) -> Claim:
    agent = ingress_harness.make_agent(prov, test_pki, "results")
    claim = _claim(ingress, agent, prov)
    _lease(claim.ack("starting"), "starting", 2)
    _lease(claim.ack("running"), "running", 3)
    return claim


def _stored_result(su_conn, claim: Claim) -> Any:
    attempt = claim.offer["candidate"]["attemptId"]
    row = su_conn.execute("SELECT result FROM ql_private.attempts WHERE id = %s",
                          (attempt,)).fetchone()  # fmt: skip
    return row[0]


def _send_bytes(claim: Claim, path: str, data: bytes) -> ingress_harness.Reply:
    agent = claim.agent
    return ingress_harness.post(claim.server.port, path, data, ctx=agent.ctx, token=agent.token)


def _utf8(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def _complete_body(claim: Claim, result: dict[str, Any]) -> dict[str, Any]:
    return claim.body("complete", outcome="failed", exitCode=3, reason="exit_nonzero",
                      result=result)  # fmt: skip


def test_complete_takes_16_kib_other_requests_keep_4_kib(claim: Claim, su_conn, prov) -> None:
    result = {"exitCode": 3, "durationMs": 1200, "outputTail": "x" * 8000, "outputBytes": 8000}
    body = _complete_body(claim, result)
    too_big = _send_bytes(claim, COMPLETE, padded(body, 16 * 1024 + 1))
    assert (too_big.status, too_big.json["reason"]) == (413, "body_too_large")
    heartbeat = _send_bytes(claim, HEARTBEAT, padded(claim.body("heartbeat"), 4097))
    assert (heartbeat.status, heartbeat.json["reason"]) == (413, "body_too_large")
    assert _stored_result(su_conn, claim) is None
    # 12 KiB (8000 bytes of tail + padding) is accepted and stored as sent.
    _lease(_send_bytes(claim, COMPLETE, padded(body, 12 * 1024)), "failed", 4)
    assert _stored_result(su_conn, claim) == result
    shown = prov.call(api.show_run(run_id=claim.offer["candidate"]["runId"])).doc
    assert shown["attempts"][0]["result"] == result
    assert shown["attempts"][0]["exitCode"] == 3


@pytest.mark.parametrize(
    "result",
    [
        {"durationMs": 1, "outputTail": "", "outputBytes": 0, "signal": 9},  # unknown field
        {"durationMs": 1, "outputTail": "a\u0000b", "outputBytes": 3},  # NUL (jsonb refuses it)
        {"durationMs": -1, "outputTail": "", "outputBytes": 0},
        {"durationMs": 1, "outputTail": "", "outputBytes": 1.5},
        {"durationMs": 1, "outputTail": "x" * 8193, "outputBytes": 8193},
        {"durationMs": 1, "outputBytes": 0},  # outputTail missing
        {"exitCode": 2**31, "durationMs": 1, "outputTail": "", "outputBytes": 0},
    ],
)
def test_malformed_results_are_400_and_change_nothing(
    claim: Claim, su_conn, result: dict[str, Any]
) -> None:
    reply = claim.send(COMPLETE, _complete_body(claim, result))
    assert (reply.status, reply.json["reason"]) == (400, "schema_invalid"), reply.body
    assert _stored_result(su_conn, claim) is None


def test_a_tail_over_8192_utf8_bytes_is_refused(claim: Claim, su_conn) -> None:
    # 3000 characters (within the schema's maxLength) but 9000 bytes in UTF-8:
    # the database counts bytes (QL001 invalid_input, 400).
    result = {"durationMs": 1, "outputTail": "€" * 3000, "outputBytes": 9000}
    reply = _send_bytes(claim, COMPLETE, _utf8(_complete_body(claim, result)))
    assert (reply.status, reply.json["reason"]) == (400, "invalid_input"), reply.body
    assert _stored_result(su_conn, claim) is None
    ok = dict(result, outputTail="€" * 2730)  # 8190 bytes
    _lease(_send_bytes(claim, COMPLETE, _utf8(_complete_body(claim, ok))), "failed", 4)
    assert _stored_result(su_conn, claim) == ok


def test_complete_without_result_still_works(claim: Claim, su_conn) -> None:
    _lease(claim.complete("succeeded", exitCode=0), "succeeded", 4)
    assert _stored_result(su_conn, claim) is None


# ------------------------------------------------------------------ end to end (slow)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state_dir = tmp_path_factory.mktemp("dev")
    # The dev ingress inherits this environment: a polling budget that lets one
    # worker run 250 short commands back to back (the default is 5 pulls/s).
    doc = _dev_up(
        state_dir, os.environ | {"QL_INGRESS_RATE_PER_S": "500", "QL_INGRESS_RATE_BURST": "500"}
    )
    path = state_dir / "dev-env-copy.json"
    path.write_text(json.dumps(doc))
    try:
        # dev up's DSNs hold passwords: admin commands get them by file, not argv.
        yield dict(doc, _file=str(path), _dsnFile=dsn_file(state_dir, "admin.dsn", doc["dsn"]))
    finally:
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip


def _publish_and_enqueue(dev: dict[str, Any], directory: Path, name: str, script: str) -> str:
    command = {"schema": "qinglong/command@v1", "argv": ["sh", "-c", script], "env": {},
               "timeoutS": 60}  # fmt: skip
    path = directory / f"{name}.json"
    path.write_text(json.dumps(command))
    task = _json_out([*QL, "admin", "task", "publish", "--dsn-file", dev["_dsnFile"], "--project",
                      "results-e2e", "--name", name, "--command-file", str(path),
                      "--max-attempts", "1"])  # fmt: skip
    out = _json_out([*QL, "admin", "run", "enqueue", "--dsn-file", dev["_dsnFile"], "--task",
                     task["taskId"]])  # fmt: skip
    (run_id,) = out["runIds"]
    return run_id


def _show_when_finished(dev: dict[str, Any], run_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = _json_out([*QL, "admin", "run", "show", "--dsn-file", dev["_dsnFile"],
                           "--run", run_id])  # fmt: skip
        if shown["run"]["state"] in ("succeeded", "failed", "cancelled"):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)


@pytest.fixture
def exec_journal() -> Iterator[Path]:
    """An executing worker's journal: not under tmp_path (0700 ancestors), so the
    run-as user reaches the runs directory beside it."""
    with reachable_dir("ql-results-") as base:
        yield base / "journal"


@pytest.mark.slow
def test_executor_reports_exit_code_and_output_tail(
    dev: dict[str, Any], tmp_path: Path, exec_journal: Path
) -> None:
    marker = f"RESULT-MARKER-{time.time_ns()}"
    small = _publish_and_enqueue(dev, tmp_path, "exit-3", f"echo {marker}; echo err >&2; exit 3")
    # 20,000 bytes of 'y' then a marker line: more than 8 KiB.
    big = _publish_and_enqueue(
        dev, tmp_path, "chatty", "head -c 20000 /dev/zero | tr '\\0' y; echo END-MARKER"
    )
    worker = Worker(dev_args(dev, exec_journal, "--execute", *run_as_args()))
    try:
        shown = _show_when_finished(dev, small)
        big_shown = _show_when_finished(dev, big)
        # The operator retries the failed run: a new attempt runs on the same worker.
        retried = _json_out([*QL, "admin", "run", "retry", "--dsn-file", dev["_dsnFile"],
                             "--run", small])  # fmt: skip
        assert retried["runId"] == small and retried["attemptNo"] == 2
        again = _show_when_finished(dev, small)
    finally:
        worker.kill()
    assert [a["number"] for a in again["attempts"]] == [1, 2]
    second = again["attempts"][1]
    assert second["attemptId"] == retried["attemptId"] and second["state"] == "failed"
    assert second["exitCode"] == 3 and marker in second["result"]["outputTail"]
    assert second["workerId"] == dev["worker"]["workerId"]
    assert "run.retried" in [e["type"] for e in again["events"]]
    assert shown["run"]["state"] == "failed"
    (attempt,) = shown["attempts"]
    assert attempt["exitCode"] == 3 and attempt["state"] == "failed"
    result = attempt["result"]
    assert result["exitCode"] == 3 and result["durationMs"] >= 0
    assert sorted(result["outputTail"].split()) == sorted([marker, "err"])
    assert result["outputBytes"] == len(f"{marker}\nerr\n")

    assert big_shown["run"]["state"] == "succeeded"
    (attempt,) = big_shown["attempts"]
    result = attempt["result"]
    assert result["exitCode"] == 0
    assert result["outputBytes"] == 20000 + len("END-MARKER\n")
    tail = result["outputTail"]
    assert len(tail.encode()) == TAIL_BYTES
    assert tail == "y" * (TAIL_BYTES - len("END-MARKER\n")) + "END-MARKER\n"


@pytest.mark.slow
def test_run_list_pages_through_250_executed_runs_exactly_once(
    dev: dict[str, Any], tmp_path: Path, exec_journal: Path
) -> None:
    """250 runs executed by a real worker, then `admin run list --state succeeded
    --limit 100` pages through them: 100 + 100 + 50, each run exactly once."""
    command = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
    path = tmp_path / "true.json"
    path.write_text(json.dumps(command))
    task = _json_out(
        [
            *QL,
            "admin",
            "task",
            "publish",
            "--dsn-file",
            dev["_dsnFile"],
            "--project",
            "results-e2e",
            "--name",
            "many",
            "--command-file",
            str(path),
        ]
    )
    enqueued = _json_out(
        [
            *QL,
            "admin",
            "run",
            "enqueue",
            "--dsn-file",
            dev["_dsnFile"],
            "--task",
            task["taskId"],
            "--count",
            "250",
        ]
    )["runIds"]
    worker = Worker(dev_args(dev, exec_journal, "--execute", "--slots", "8", *run_as_args()))
    try:
        deadline = time.monotonic() + 240
        while True:
            with psycopg.connect(dev["dsn"]) as conn:
                done = (
                    api.list_runs(task_id=task["taskId"], states=["succeeded"], limit=1000)
                    .run(conn)
                    .doc
                )
            if len(done["runs"]) == 250:
                break
            assert time.monotonic() < deadline, len(done["runs"])
            time.sleep(1)
    finally:
        worker.kill()
    pages, after = [], None
    while True:
        args = [
            *QL,
            "admin",
            "run",
            "list",
            "--dsn-file",
            dev["_dsnFile"],
            "--task",
            task["taskId"],
            "--state",
            "succeeded",
            "--limit",
            "100",
        ]
        page = _json_out([*args, *(["--after", after] if after else [])])
        pages.append([run["runId"] for run in page["runs"]])
        assert all(run["state"] == "succeeded" for run in page["runs"])
        after = page["next"]
        if after is None:
            break
    assert [len(p) for p in pages] == [100, 100, 50]
    seen = [run_id for p in pages for run_id in p]
    assert len(seen) == len(set(seen)) == 250 and set(seen) == set(enqueued)
