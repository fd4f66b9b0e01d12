"""SPEC §14 end to end: a secret's value appears nowhere but in the command's environment.

One real flow: `qinglong dev up` (its own PostgreSQL cluster with SCRAM, real
TLS, its KEK file, the ingress at DEBUG logging to a file, the sweeper logging
to a file), with the cluster's statement log switched on (`ALTER SYSTEM`
`log_statement = all`, full parameters) before anything touches the secret;
`admin secret set` of a random value; a task whose `secrets` names it and whose
command prints the value — cut at several places across flushed writes,
byte by byte on stderr, whole on stdout and stderr, before and after a pause
while the attempt is live — and its SHA-256; `worker run --execute --run-as`
runs it to completion while every file under the worker's journal, inbox and
work directory is sampled every few milliseconds; a real `qinglong console`
(a ql_readonly login) is read over HTTP while the attempt is live and after.

Then every artifact is searched for the value raw, hex and base64/base64url at
every alignment (tests/py/test_secret_hygiene.py's encodings): `pg_dump
--data-only` and a full dump, the PostgreSQL log, every ingress / audit /
sweeper log file, the worker's stderr (its event log), every console page of
the run, its task, the workers and the overview (and the log endpoint),
`admin run show`, `admin run log` (text and `--json`), `admin secret list`, the
`lease.secrets` audit rows. Zero hits. Positively: the command had the value
(its printed SHA-256 matches), the stored output tail and live log and the
console's log show `[MASKED]`, the audit names the secret, and the statement
log holds the ingress's `ql.lease_secrets` calls — so the scan cannot pass
vacuously.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from qinglong.console_cli import ensure_console_role
from qinglong.throwaway_postgres import PG_BIN
from tests.py.console_scenario import console_process, fetch
from tests.py.dsn_files import dsn_file
from tests.py.run_as_support import reachable_dir, run_as_args
from tests.py.test_secret_hygiene import encodings, hits
from tests.py.test_secrets_e2e import FileWatch, RawWorker
from tests.py.test_worker_e2e import QL, dev_args

PROJECT = "dev"  # the project of dev up's producer API token
SECRET_NAME = "db-password"
ENV_NAME = "MY_SECRET"
READY = "qinglong-hygiene-ready"

STATEMENT_LOG = {
    "log_statement": "all",
    "log_connections": "on",
    "log_error_verbosity": "verbose",
    "log_parameter_max_length": "-1",
    "log_parameter_max_length_on_error": "-1",
    "log_min_error_statement": "info",
}

# Prints the value cut at 1, half and len-1 across flushed writes (with pauses,
# so the pieces reach the worker as separate reads), byte by byte on stderr,
# whole on both streams; then waits until the test, having read the live
# attempt, creates the file GO, and prints it once more (a later live-log chunk).
# The dots after READY are belt and braces: the masker holds back only a tail
# that could begin the value, so the live log shows READY while the command waits.
COMMAND = """
import hashlib, os, sys, time
value = os.environ[ENV_NAME]
raw = value.encode()
out, err = sys.stdout.buffer, sys.stderr.buffer
print("sha256:" + hashlib.sha256(raw).hexdigest(), flush=True)
for cut in (1, len(raw) // 2, len(raw) - 1):
    out.write(b"cut<" + raw[:cut]); out.flush(); time.sleep(0.2)
    out.write(raw[cut:] + b">\\n"); out.flush()
err.write(b"bytes<")
for byte in raw:
    err.write(bytes([byte])); err.flush(); time.sleep(0.005)
err.write(b">\\n"); err.flush()
print("whole " + value, flush=True)
sys.stderr.write("stderr " + value + "\\n"); sys.stderr.flush()
print(READY + "\\n" + "." * 64, flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(GO) and time.monotonic() < deadline:
    time.sleep(0.05)
print("again " + value, flush=True)
"""


@dataclass
class Found:
    """What the flow produced: the value, and every artifact by name."""

    value: str = field(repr=False)
    run_id: str = ""
    task_id: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    shown: dict[str, Any] = field(default_factory=dict)
    log_json: dict[str, Any] = field(default_factory=dict)
    audit: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    watch_hits: set[str] = field(default_factory=set)
    watch_scans: int = 0
    delivered: list[Any] = field(default_factory=list)


# ------------------------------------------------------------------ helpers


def _ql(dev: dict[str, Any], *args: str) -> str:
    result = subprocess.run(
        [*QL, "admin", *args, "--dsn-file", dev["_dsnFile"]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _dev_up(state_dir: Path) -> dict[str, Any]:
    """`dev up` with the ingress at DEBUG (its config's logLevel, by environment)."""
    result = subprocess.run(
        [*QL, "dev", "up", "--state-dir", str(state_dir)],
        env=os.environ | {"QL_INGRESS_LOG_LEVEL": "DEBUG"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((state_dir / "dev-env.json").read_text())


def _statement_log_on(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in STATEMENT_LOG.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
    time.sleep(1)  # every backend re-reads the configuration before its next command


def _publish(dev: dict[str, Any], directory: Path, go: Path) -> tuple[str, str]:
    head = f"ENV_NAME, READY, GO = {ENV_NAME!r}, {READY!r}, {str(go)!r}"
    command = {
        "schema": "qinglong/command@v1",
        "argv": ["python3", "-c", head + COMMAND],
        "env": {},
        "timeoutS": 120,
        "secrets": {ENV_NAME: SECRET_NAME},
    }
    path = directory / "command.json"
    path.write_text(json.dumps(command))
    task = json.loads(
        _ql(
            dev,
            "task",
            "publish",
            "--project",
            PROJECT,
            "--name",
            "print",
            "--command-file",
            str(path),
            "--max-attempts",
            "1",
        )
    )
    (run_id,) = json.loads(_ql(dev, "run", "enqueue", "--task", task["taskId"]))["runIds"]
    return task["taskId"], run_id


def _api_args(dev: dict[str, Any]) -> list[str]:
    api = dev["api"]
    return ["--api", api["url"], "--token-file", api["tokenFile"], "--ca-file", api["caFile"]]


def _producer(dev: dict[str, Any], *args: str) -> bytes:
    """`qinglong run …` through dev up's producer API (the dev project's token)."""
    result = subprocess.run(
        [*QL, "run", *args, *_api_args(dev)], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _state(dev: dict[str, Any], run_id: str) -> dict[str, Any]:
    return json.loads(_ql(dev, "run", "show", "--run", run_id))


def _pages(url: str, found: Found, when: str) -> None:
    paths = [
        "/",
        "/runs",
        f"/runs?task={found.task_id}",
        f"/runs/{found.run_id}",
        f"/runs/{found.run_id}/log?attempt=1&offset=0",
        "/workers",
    ]
    for path in paths:
        answer = fetch(url + path)
        assert answer.status == 200, (path, answer.status, answer.body[:300])
        found.files[f"console {path} ({when})"] = answer.body.encode()


def _wait_live(url: str, found: Found, timeout: float = 60) -> None:
    """Until the console's run page shows the live log up to the ready line."""
    deadline = time.monotonic() + timeout
    while READY not in (page := fetch(f"{url}/runs/{found.run_id}")).body:
        assert time.monotonic() < deadline, (
            "the live log never reached the console",
            page.status,
            page.body[-2000:],
        )
        time.sleep(0.3)


def _finished(dev: dict[str, Any], run_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (shown := _state(dev, run_id))["run"]["state"] not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline, shown
        time.sleep(0.3)
    return shown


def _dumps(dsn: str) -> dict[str, bytes]:
    params = conninfo_to_dict(dsn)
    env = os.environ | {"PGPASSWORD": str(params.pop("password", ""))}
    target = make_conninfo(**params)
    return {
        f"pg_dump{flag}": subprocess.run(
            [str(PG_BIN / "pg_dump"), *([flag] if flag else []), "-d", target],
            capture_output=True,
            check=True,
            timeout=60,
            env=env,
        ).stdout
        for flag in ("--data-only", "")
    }


def _audit(dsn: str) -> list[tuple[str, str, dict[str, Any]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT outcome, reason, detail FROM ql_private.security_audit"
            " WHERE action = 'lease.secrets' ORDER BY id"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


# ------------------------------------------------------------------ the flow


def _run(dev: dict[str, Any], state_dir: Path, directory: Path, found: Found) -> None:
    _statement_log_on(dev["dsn"])
    value_file = directory / "value"
    value_file.write_text(found.value)
    _ql(
        dev,
        "secret",
        "set",
        "--project",
        PROJECT,
        "--name",
        SECRET_NAME,
        "--from-file",
        str(value_file),
        "--kek-file",
        dev["kekFile"],
    )
    value_file.unlink()
    found.files["admin secret list"] = _ql(dev, "secret", "list", "--project", PROJECT).encode()
    console_dsn = ensure_console_role(dev["dsn"], "ql_console_hygiene")
    with reachable_dir("ql-hygiene-") as base, console_process(console_dsn) as root:
        url = root.rstrip("/")
        watch = FileWatch(base, sorted(encodings(found.value)))
        worker = RawWorker(dev_args(dev, base / "journal", "--execute", *run_as_args()))
        follow: subprocess.Popen[bytes] | None = None
        try:
            found.task_id, found.run_id = _publish(dev, directory, base / "go")
            follow = subprocess.Popen(
                [*QL, "run", "log", "--run", found.run_id, "--follow", *_api_args(dev)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            _wait_live(url, found)
            _pages(url, found, "live")
            found.files["admin run show (live)"] = _ql(
                dev, "run", "show", "--run", found.run_id
            ).encode()
            found.files["admin run log (live)"] = _ql(
                dev, "run", "log", "--run", found.run_id
            ).encode()
            (base / "go").touch()
            found.shown = _finished(dev, found.run_id)
            worker.wait_for("exec.completed", timeout=30)
            followed, errors = follow.communicate(timeout=60)
            assert follow.returncode == 0 and hits(errors, {"value": found.value}) == [], errors
            found.files["run log --follow (producer API)"] = followed
        finally:
            worker.kill()
            if follow is not None:
                follow.kill()
            found.watch_hits, found.watch_scans = watch.stop(), watch.scans
        _pages(url, found, "after")
        found.delivered = [e["variables"] for e in worker.named("exec.secrets_delivered")]
        found.files["worker stderr"] = "".join(worker.raw).encode()
        found.files["worker files after the run"] = b"\n".join(
            p.read_bytes() for p in base.rglob("*") if p.is_file() and not p.is_symlink()
        )
    found.files["admin run show"] = json.dumps(found.shown).encode()
    found.files["admin run log"] = _ql(dev, "run", "log", "--run", found.run_id).encode()
    found.files["run show (producer API)"] = _producer(dev, "show", "--run", found.run_id)
    found.files["run log (producer API)"] = _producer(dev, "log", "--run", found.run_id)
    found.log_json = json.loads(_ql(dev, "run", "log", "--run", found.run_id, "--json"))
    found.files["admin run log --json"] = json.dumps(found.log_json).encode()
    found.audit = _audit(dev["dsn"])
    found.files["security_audit rows"] = json.dumps(found.audit).encode()
    found.files.update(_dumps(dev["dsn"]))
    for path in sorted((state_dir / "logs").iterdir()):
        found.files[f"logs/{path.name}"] = path.read_bytes()
    pg_base = Path(json.loads((state_dir / "dev-state.json").read_text())["pgBaseDir"])
    found.files["postgresql log"] = (pg_base / "postgres.log").read_bytes()


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Found]:
    state_dir = tmp_path_factory.mktemp("dev")
    directory = tmp_path_factory.mktemp("hygiene")
    result = Found(value="hyg-" + secrets.token_urlsafe(24))
    try:
        doc = _dev_up(state_dir)
        dev = dict(
            doc,
            _file=str(state_dir / "dev-env.json"),
            _dsnFile=dsn_file(directory, "admin.dsn", doc["dsn"]),
        )
        _run(dev, state_dir, directory, result)
        yield result
    finally:
        subprocess.run(
            [*QL, "dev", "down", "--state-dir", str(state_dir)],
            check=False,
            capture_output=True,
            timeout=120,
        )


# ------------------------------------------------------------------ the checks


def test_the_command_had_the_value(found: Found) -> None:
    """The positive half: without it a run that never got the secret would pass."""
    assert found.shown["run"]["state"] == "succeeded", found.shown
    (attempt,) = found.shown["attempts"]
    digest = "sha256:" + hashlib.sha256(found.value.encode()).hexdigest()
    assert digest in attempt["result"]["outputTail"].splitlines()
    assert found.delivered == [[ENV_NAME]]


def test_the_stored_output_tail_and_live_log_are_masked(found: Found) -> None:
    (attempt,) = found.shown["attempts"]
    tail = attempt["result"]["outputTail"].splitlines()
    expected = ["cut<[MASKED]>"] * 3 + [
        "bytes<[MASKED]>",
        "whole [MASKED]",
        "stderr [MASKED]",
        READY,
        "." * 64,
        "again [MASKED]",
    ]
    assert tail[1:] == expected, tail
    log = found.log_json
    assert log["complete"] is True and log["text"].splitlines()[1:] == expected, log
    assert log["storedBytes"] == len(log["text"].encode()) == attempt["result"]["logBytes"]
    live = found.files[f"console /runs/{found.run_id}/log?attempt=1&offset=0 (live)"]
    assert b"whole [MASKED]" in live and b"again" not in live  # read while it ran
    for source in ("run log (producer API)", "run log --follow (producer API)"):
        assert found.files[source].decode().splitlines()[1:] == expected, source


def test_the_audit_names_the_delivery_never_the_value(found: Found) -> None:
    delivered = [d for o, r, d in found.audit if (o, r) == ("allowed", "secrets_delivered")]
    assert [d["names"] for d in delivered] == [[SECRET_NAME]]
    assert delivered[0]["runId"] == found.run_id


def test_the_statement_log_saw_the_delivery(found: Found) -> None:
    """The PostgreSQL log really logged every statement, the secret's store and
    delivery included (ciphertext, wrapped keys: hex), so its scan is not vacuous."""
    log = found.files["postgresql log"].decode(errors="replace")
    assert "ql.set_secret(" in log and "ql.lease_secrets(" in log
    assert "ql.append_log(" in log and "parameters: $1 = " in log  # the live log's chunks
    assert '"level":"debug"' in found.files["logs/ingress.log"].decode()
    audit = [json.loads(line) for line in found.files["logs/audit.log"].splitlines()]
    assert ("lease.secrets", "allowed") in {(a["action"], a["outcome"]) for a in audit}
    assert b"sweep.pass" in found.files["logs/sweeper.log"]


def test_no_file_the_worker_wrote_ever_held_the_value(found: Found) -> None:
    assert found.watch_scans > 10 and found.watch_hits == set()


SOURCES = [
    "pg_dump--data-only",
    "pg_dump",
    "postgresql log",
    "logs/ingress.log",
    "logs/audit.log",
    "logs/sweeper.log",
    "worker stderr",
    "worker files after the run",
    "admin run show (live)",
    "admin run log (live)",
    "admin run show",
    "admin run log",
    "admin run log --json",
    "admin secret list",
    "security_audit rows",
    "run show (producer API)",
    "run log (producer API)",
    "run log --follow (producer API)",
]


@pytest.mark.parametrize("source", SOURCES)
def test_no_trace_of_the_value_in(found: Found, source: str) -> None:
    blob = found.files[source]
    assert blob, f"{source} is empty: the scan would prove nothing"
    assert hits(blob, {"secret value": found.value}) == []


def test_no_trace_of_the_value_in_any_console_page(found: Found) -> None:
    pages = {k: v for k, v in found.files.items() if k.startswith("console ")}
    assert len(pages) == 12 and all(pages.values())
    for when in ("live", "after"):
        assert b"whole [MASKED]" in pages[f"console /runs/{found.run_id} ({when})"]
    assert {k: hits(v, {"secret value": found.value}) for k, v in pages.items()} == {
        k: [] for k in pages
    }


def test_every_log_file_was_scanned(found: Found) -> None:
    logs = {k for k in found.files if k.startswith("logs/")}
    assert {"logs/ingress.log", "logs/audit.log", "logs/sweeper.log"} <= logs
    assert all(hits(found.files[k], {"secret value": found.value}) == [] for k in logs)
