"""Secrets end to end (SPEC §14.3, §14.5): a real `qinglong worker run --execute
--run-as` process against a real mTLS ingress (holding the key-encryption key)
and real PostgreSQL, a task whose command names a secret.

* The value reaches the command's environment (it prints the value's SHA-256)
  while the command's own printing of it — byte by byte, flushed, and whole on
  stderr — comes back only as `[MASKED]` in the stored `outputTail`; the value
  is in no file the worker writes (journal/inbox, `result.json`, `output.log`,
  sampled every few ms throughout the run), not in its stderr (the event log),
  and nowhere in a dump of the database (results, live log, events, audit).
* A secret deleted after publish: the fetch answers 409, the worker ACKs
  `start_failed` `secrets_unavailable` and nothing runs.

Once through the in-process ingress (fast), and once (slow) through
`qinglong dev up` with `admin secret set|delete` and `admin run show`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qinglong.schemas.signing import Signer, create_signing_key, revision_payload
from qinglong.service import secret_store
from qinglong.service.compiler import compile_command
from qinglong.service.control_plane import publish_task
from qinglong.service.secrets_crypto import create_kek_file
from qinglong.throwaway_postgres import PG_BIN
from tests.py import ingress_harness
from tests.py.dsn_files import dsn_file
from tests.py.ingress_harness import ingress_config, make_agent
from tests.py.run_as_support import reachable_dir, run_as_args
from tests.py.test_worker_e2e import QL, Worker, _dev_up, _json_out, dev_args

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

PROJECT = "secrets-e2e"

PRINT_SECRET = """
import hashlib, os, sys, time
value = os.environ["API_KEY"].encode()
print("sha256:" + hashlib.sha256(value).hexdigest(), flush=True)
out = sys.stdout.buffer
out.write(b"<")
for byte in value:
    out.write(bytes([byte])); out.flush(); time.sleep(0.005)
out.write(b">\\n"); out.flush()
sys.stderr.write("err " + os.environ["API_KEY"] + "\\n")
"""


class RawWorker(Worker):
    """A Worker that also keeps its raw stderr (not only the JSON lines)."""

    def __init__(self, args: list[str], **env: str) -> None:
        self.raw: list[str] = []
        super().__init__(args, **env)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self.raw.append(line)
                with contextlib.suppress(ValueError):
                    self.lines.append(json.loads(line))
                self._cond.notify_all()


# ------------------------------------------------------------------ in-process ingress


def digest_line(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def harness(tmp_path: Path, start_ingress_thread, test_pki, ingress_dsn, prov) -> dict[str, Any]:
    """An ingress with a KEK, a provisioned worker and its `--config` file."""
    kek_path = tmp_path / "kek.key"
    kek = create_kek_file(kek_path)
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn, kek_file=str(kek_path)))
    agent = make_agent(prov, test_pki, "secrets-e2e")
    credential = tmp_path / "credential"
    credential.write_text(agent.token)
    credential.chmod(0o600)
    config = {"ingressUrl": f"https://127.0.0.1:{server.port}", "workerId": agent.worker_id,
              "certFile": str(agent.cert.cert_file), "keyFile": str(agent.cert.key_file),
              "caFile": str(test_pki.ca_file), "credentialFile": str(credential),
              "cadence": {"idlePollMs": 200, "jitterMs": 50}}  # fmt: skip
    return {"kek": kek, "config": config, "dir": tmp_path, "server": server}


def config_worker(harness: dict[str, Any], base: Path) -> RawWorker:
    path = harness["dir"] / "worker.json"
    path.write_text(json.dumps(dict(harness["config"], journal=str(base / "journal"))))
    return RawWorker([*QL, "worker", "run", "--config", str(path), "--execute", *run_as_args()])


def command_doc(code: str, secret_name: str) -> dict[str, Any]:
    return {"schema": "qinglong/command@v1", "argv": ["python3", "-c", code], "env": {},
            "timeoutS": 60, "secrets": {"API_KEY": secret_name}}  # fmt: skip


def attempt_row(su_conn, run_id: str, timeout: float = 60) -> tuple[str, str | None, Any]:
    deadline = time.monotonic() + timeout
    while True:
        row = su_conn.execute("SELECT state, reason, result FROM ql_private.attempts"
                              " WHERE run_id = %s::uuid", (run_id,)).fetchone()  # fmt: skip
        if row is not None and row[0] not in ("claimed", "starting", "running"):
            return row
        assert time.monotonic() < deadline, row
        time.sleep(0.2)


def test_in_process_the_value_reaches_the_command_only(harness, prov, su_conn, db_dsn) -> None:
    value = "e2e-" + secrets.token_hex(16)
    secret_store.set_secret(su_conn, harness["kek"], "p", "api-key", value.encode())
    task = prov.task("print-secret", command_doc(PRINT_SECRET, "api-key"))
    with reachable_dir("ql-secrets-") as base:
        watch = FileWatch(base, [value.encode()])
        worker = config_worker(harness, base)
        try:
            (run_id,) = prov.enqueue(task)
            state, _, result = attempt_row(su_conn, run_id)
            worker.wait_for("exec.completed")
        finally:
            worker.kill()
            hits = watch.stop()
        work = base / "journal.work"
        logs = [p.read_text() for p in work.rglob("output.log")]
        assert list(work.rglob("result.json"))
    assert state == "succeeded", (state, result, worker.lines)
    lines = result["outputTail"].splitlines()
    assert digest_line(value) in lines  # the command's environment had it
    assert "<[MASKED]>" in lines and "err [MASKED]" in lines
    assert result["outputBytes"] == len(logs[0].encode())
    assert value not in json.dumps(result)
    assert watch.scans > 3 and hits == set()
    assert value not in "".join(worker.raw)
    assert [e["variables"] for e in worker.named("exec.secrets_delivered")] == [["API_KEY"]]
    dump = subprocess.run([str(PG_BIN / "pg_dump"), "-d", db_dsn], capture_output=True,
                          check=True, timeout=60).stdout  # fmt: skip
    assert b"<[MASKED]>" in dump  # the stored result (and live log) are in it, masked
    assert value.encode() not in dump and value.encode().hex().encode() not in dump


def test_in_process_a_secret_gone_after_publish_fails_the_start(harness, prov, su_conn) -> None:
    secret_store.set_secret(su_conn, harness["kek"], "p", "short-lived", b"gone-0123456789")
    with reachable_dir("ql-secrets-") as base:
        marker = base / "ran"
        task = prov.task("gone", command_doc(f"open({str(marker)!r}, 'w')", "short-lived"))
        secret_store.delete_secret(su_conn, "p", "short-lived")
        worker = config_worker(harness, base)
        try:
            (run_id,) = prov.enqueue(task)
            state, reason, _ = attempt_row(su_conn, run_id)
            failed = worker.wait_for("exec.start_failed")
        finally:
            worker.kill()
        assert not marker.exists()
    assert (state, reason) == ("failed", "secrets_unavailable")
    assert failed[0]["reason"] == "secrets_unavailable"
    assert failed[0]["category"] == "secret_missing"


def signed_task(su_conn, name: str, doc: dict[str, Any], key: dict[str, str]) -> str:
    """Publish `doc` signed by the signing key `key` (as `admin task publish --sign-key`)."""
    compiled = compile_command(doc)
    signer = Signer.load(key["privateKeyFile"])

    def sign(task_id: str) -> str:
        return signer.sign(
            revision_payload(
                task_id, compiled.kind, compiled.executor, compiled.spec, compiled.placement
            )
        )

    return publish_task(su_conn, "p", name, compiled.canonical, sign=sign).task_id


def secrets_rows(su_conn) -> dict[str, list[str]]:
    """runId -> secret names of every `lease.secrets` security_audit row."""
    rows = su_conn.execute(
        "SELECT detail FROM ql_private.security_audit WHERE action = 'lease.secrets' ORDER BY id"
    ).fetchall()
    return {row[0]["runId"]: row[0]["names"] for row in rows}


def test_in_process_an_untrusted_revision_never_receives_a_secret(
    harness, prov, su_conn, tmp_path: Path
) -> None:
    """SPEC §16.1 before §14.3: an enforcing worker checks the signature before the
    secrets fetch, so an unsigned revision and one signed by an untrusted key are
    ACKed start_failed signature_invalid without any POST /v1/leases/secrets (no
    audit line, no security_audit row); a trusted one in the same worker does fetch
    (the positive control for both checks)."""
    value = "trust-" + secrets.token_hex(16)
    secret_store.set_secret(su_conn, harness["kek"], "p", "api-key", value.encode())
    trusted = create_signing_key(str(tmp_path / "trusted"))
    stranger = create_signing_key(str(tmp_path / "stranger"))
    keys = tmp_path / "trusted.jwks.json"
    keys.write_text(json.dumps({"keys": [json.loads(Path(trusted["publicJwkFile"]).read_text())]}))
    with reachable_dir("ql-secrets-") as base:
        out = base / "out"
        out.mkdir()
        out.chmod(0o1777)
        docs = {name: command_doc(f"open({str(out / name)!r}, 'w')", "api-key")
                for name in ("unsigned", "untrusted", "good")}  # fmt: skip
        tasks = {"unsigned": prov.task("unsigned", docs["unsigned"]),
                 "untrusted": signed_task(su_conn, "untrusted", docs["untrusted"], stranger),
                 "good": signed_task(su_conn, "good", docs["good"], trusted)}  # fmt: skip
        path = harness["dir"] / "worker.json"
        path.write_text(json.dumps(dict(harness["config"], journal=str(base / "journal"))))
        worker = RawWorker([*QL, "worker", "run", "--config", str(path), "--execute",
                            *run_as_args(), "--trust-keys", str(keys),
                            "--trust-policy", "enforce"])  # fmt: skip
        try:
            runs = {name: prov.enqueue(task)[0] for name, task in tasks.items()}
            rows = {name: attempt_row(su_conn, run_id) for name, run_id in runs.items()}
            worker.wait_for("exec.completed", count=3, timeout=60)
        finally:
            worker.kill()
        ran = sorted(p.name for p in out.iterdir())
    assert ran == ["good"]
    assert rows["good"][:2] == ("succeeded", None)
    for name in ("unsigned", "untrusted"):
        assert rows[name][:2] == ("failed", "signature_invalid"), name
    refused = {e["runId"]: e["category"] for e in worker.named("exec.signature_invalid")}
    assert refused == {runs["unsigned"]: "unsigned", runs["untrusted"]: "unknown_kid"}
    # The only delivery, in the database and at the ingress, is the trusted run's.
    assert secrets_rows(su_conn) == {runs["good"]: ["api-key"]}
    fetches = [json.loads(line) for line in harness["server"].audit_lines]
    admitted = [f for f in fetches if f["action"] == "lease.secrets" and f["outcome"] == "allowed"]
    assert len(admitted) == 1, fetches  # one POST /v1/leases/secrets in all
    assert [e["runId"] for e in worker.named("exec.secrets_delivered")] == [runs["good"]]


# ------------------------------------------------------------------ dev up (slow)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state_dir = tmp_path_factory.mktemp("dev")
    doc = _dev_up(state_dir)
    path = state_dir / "dev-env-copy.json"
    path.write_text(json.dumps(doc))
    try:
        yield dict(doc, _file=str(path), _dsnFile=dsn_file(state_dir, "admin.dsn", doc["dsn"]))
    finally:
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip


def admin(dev: dict[str, Any], *args: str, stdin: str | None = None) -> dict[str, Any]:
    result = subprocess.run([*QL, "admin", *args, "--dsn-file", dev["_dsnFile"]], input=stdin,
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}


def set_secret(dev: dict[str, Any], name: str, value: str, directory: Path) -> None:
    path = directory / f"{name}.value"
    path.write_text(value)
    admin(dev, "secret", "set", "--project", PROJECT, "--name", name, "--from-file", str(path),
          "--kek-file", dev["kekFile"])  # fmt: skip
    path.unlink()


def publish_and_enqueue(dev: dict[str, Any], directory: Path, name: str, code: str,
                        secret_name: str) -> str:  # fmt: skip
    command = {"schema": "qinglong/command@v1", "argv": ["python3", "-c", code], "env": {},
               "timeoutS": 60, "secrets": {"API_KEY": secret_name}}  # fmt: skip
    path = directory / f"{name}.json"
    path.write_text(json.dumps(command))
    task = admin(dev, "task", "publish", "--project", PROJECT, "--name", name,
                 "--command-file", str(path), "--max-attempts", "1")  # fmt: skip
    out = admin(dev, "run", "enqueue", "--task", task["taskId"])
    (run_id,) = out["runIds"]
    return run_id


def finished(dev: dict[str, Any], run_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = _json_out([*QL, "admin", "run", "show", "--dsn-file", dev["_dsnFile"],
                           "--run", run_id])  # fmt: skip
        if shown["run"]["state"] in ("succeeded", "failed", "cancelled"):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.3)


class FileWatch:
    """Samples every file under ``root`` until stopped: the paths that ever held a needle."""

    def __init__(self, root: Path, needles: list[bytes]) -> None:
        self.root, self.needles = root, needles
        self.hits: set[str] = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.scan()
            time.sleep(0.005)

    def scan(self) -> None:
        for path in self.root.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    if any(n in data for n in self.needles):
                        self.hits.add(str(path))
        self.scans += 1

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join(10)
        self.scan()
        return self.hits


@pytest.mark.slow
def test_the_value_reaches_the_command_only(dev: dict[str, Any], tmp_path: Path) -> None:
    value = "e2e-" + secrets.token_hex(16)
    set_secret(dev, "api-key", value, tmp_path)
    with reachable_dir("ql-secrets-") as base:
        watch = FileWatch(base, [value.encode()])
        worker = RawWorker(dev_args(dev, base / "journal", "--execute", *run_as_args()))
        try:
            run_id = publish_and_enqueue(dev, tmp_path, "print-secret", PRINT_SECRET, "api-key")
            shown = finished(dev, run_id)
            worker.wait_for("exec.completed")
        finally:
            worker.kill()
            hits = watch.stop()
        work = base / "journal.work"
        logs = [p.read_text() for p in work.rglob("output.log")]
        results = [p.read_text() for p in work.rglob("result.json")]
    assert shown["run"]["state"] == "succeeded", shown
    (attempt,) = shown["attempts"]
    tail = attempt["result"]["outputTail"]
    assert "sha256:" + hashlib.sha256(value.encode()).hexdigest() in tail.splitlines()
    assert "<[MASKED]>" in tail.splitlines() and "err [MASKED]" in tail.splitlines()
    assert value not in json.dumps(shown)
    assert watch.scans > 3 and hits == set()
    assert logs and "<[MASKED]>" in logs[0] and results
    stderr = "".join(worker.raw)
    assert value not in stderr
    assert [e["variables"] for e in worker.named("exec.secrets_delivered")] == [["API_KEY"]]


@pytest.mark.slow
def test_a_secret_gone_after_publish_fails_the_start(dev: dict[str, Any], tmp_path: Path) -> None:
    set_secret(dev, "short-lived", "gone-" + secrets.token_hex(8), tmp_path)
    with reachable_dir("ql-secrets-") as base:
        marker = base / "ran"
        code = f"open({str(marker)!r}, 'w').write('x')"
        run_id = publish_and_enqueue(dev, tmp_path, "gone", code, "short-lived")
        admin(dev, "secret", "delete", "--project", PROJECT, "--name", "short-lived")
        worker = RawWorker(dev_args(dev, base / "journal", "--execute", *run_as_args()))
        try:
            shown = finished(dev, run_id)
            failed = worker.wait_for("exec.start_failed")
        finally:
            worker.kill()
        assert not marker.exists()
    (attempt,) = shown["attempts"]
    assert (attempt["state"], attempt["reason"]) == ("failed", "secrets_unavailable")
    assert shown["run"]["state"] == "failed"
    assert failed[0]["reason"] == "secrets_unavailable" and failed[0]["category"]
