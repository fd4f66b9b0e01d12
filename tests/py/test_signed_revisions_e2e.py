"""Signed revisions end to end (SPEC §16.1): `qinglong dev up` (real PostgreSQL,
real mTLS ingress), `admin signing-key create`, `admin task publish --sign-key`
and `qinglong worker run --execute --trust-keys JWKS --trust-policy …`.

* An enforcing worker never starts (a) an unsigned revision, (b) one signed by
  a key it does not trust, (c) one a superuser edited inside the database
  (immutability trigger disabled, canonical bytes and digest recomputed, so
  the offer passes the worker's digest check): each attempt is ACKed
  `start_failed` `signature_invalid` and its command — which would create a
  file — never ran; a correctly signed revision in the same batch runs.
* A worker trusting the old and the new key at once (rotation) runs revisions
  signed by either.
* `warn` runs an unsigned revision and logs `exec.signature_unverified` loudly.
* `enforce` without a keys file refuses to start (exit 2).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.schemas.canonical import content_digest
from tests.py.dsn_files import dsn_file
from tests.py.run_as_support import reachable_dir, run_as_args
from tests.py.test_worker_e2e import QL, Worker, _dev_up, _json_out, dev_args, run

pytestmark = pytest.mark.slow

PROJECT = "signed-e2e"
TERMINAL = ("succeeded", "failed", "cancelled")


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


def admin(dev: dict[str, Any], *args: str) -> dict[str, Any]:
    return _json_out([*QL, "admin", *args, "--dsn-file", dev["_dsnFile"]])


def signing_key(directory: Path) -> dict[str, Any]:
    """`admin signing-key create` (no database) -> {kid, privateKeyFile, publicJwkFile}."""
    return _json_out([*QL, "admin", "signing-key", "create", "--out", str(directory)])


def jwks(path: Path, *keys: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"keys": [json.loads(Path(k["publicJwkFile"]).read_text())
                                         for k in keys]}))  # fmt: skip
    return path


def publish(dev: dict[str, Any], directory: Path, name: str, argv: list[str],
            key: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    command = {"schema": "qinglong/command@v1", "argv": argv, "env": {}, "timeoutS": 60}
    path = directory / f"{name}.json"
    path.write_text(json.dumps(command))
    sign = [] if key is None else ["--sign-key", key["privateKeyFile"]]
    return admin(dev, "task", "publish", "--project", PROJECT, "--name", name,
                 "--command-file", str(path), "--max-attempts", "1", *sign)  # fmt: skip


def enqueue(dev: dict[str, Any], task: dict[str, Any]) -> str:
    (run_id,) = admin(dev, "run", "enqueue", "--task", task["taskId"])["runIds"]
    return run_id


def touch(marker: Path) -> list[str]:
    return ["sh", "-c", f"echo ran > '{marker}'"]


def finished(dev: dict[str, Any], run_ids: list[str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    shown: dict[str, Any] = {}
    for run_id in run_ids:
        while True:
            doc = _json_out([*QL, "admin", "run", "show", "--dsn-file", dev["_dsnFile"],
                             "--run", run_id])  # fmt: skip
            if doc["run"]["state"] in TERMINAL:
                shown[run_id] = doc
                break
            assert time.monotonic() < deadline, doc
            time.sleep(0.3)
    return shown


def attempts(shown: dict[str, Any]) -> list[tuple[str, str | None, bool]]:
    """(state, reason, ever started running) of every attempt."""
    return [(a["state"], a["reason"], a.get("result") is not None) for a in shown["attempts"]]


def edit_revision_as_superuser(dsn: str, revision_id: str, argv: list[str]) -> None:
    """What §16.1 defends against: the trigger disabled, the spec rewritten, the
    canonical bytes and the digest recomputed so the database is self-consistent."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        spec, placement = conn.execute(
            "SELECT spec, placement FROM ql_private.execution_revisions WHERE id = %s",
            (revision_id,)).fetchone()  # fmt: skip
        spec = dict(spec, argv=argv)
        canonical, digest = content_digest("qinglong/command@v1", "remote_worker", spec, placement)
        with conn.transaction():
            conn.execute("ALTER TABLE ql_private.execution_revisions"
                         " DISABLE TRIGGER execution_revisions_immutable")  # fmt: skip
            conn.execute("UPDATE ql_private.execution_revisions SET spec = %s, canonical = %s,"
                         " content_digest = %s WHERE id = %s",
                         (json.dumps(spec), canonical, digest, revision_id))  # fmt: skip
            conn.execute("ALTER TABLE ql_private.execution_revisions"
                         " ENABLE TRIGGER execution_revisions_immutable")  # fmt: skip


def start_worker(dev: dict[str, Any], base: Path, *trust: str) -> Worker:
    worker = Worker(dev_args(dev, base / "journal", "--execute", *run_as_args(), *trust))
    worker.wait_for("session.opened", timeout=30)
    return worker


def outbox(base: Path) -> Path:
    """Where commands leave their marker files (the run-as user may write there)."""
    out = base / "out"
    out.mkdir()
    out.chmod(0o1777)
    return out


def test_an_enforcing_worker_starts_only_revisions_signed_by_a_trusted_key(
    dev: dict[str, Any], tmp_path: Path
) -> None:
    trusted, stranger = signing_key(tmp_path / "trusted"), signing_key(tmp_path / "stranger")
    keys = jwks(tmp_path / "trusted.jwks.json", trusted)
    with reachable_dir("ql-signed-") as base:
        out = outbox(base)
        unsigned = publish(dev, tmp_path, "unsigned", touch(out / "unsigned"), None)
        untrusted = publish(dev, tmp_path, "untrusted", touch(out / "untrusted"), stranger)
        edited = publish(dev, tmp_path, "edited", ["true"], trusted)
        good = publish(dev, tmp_path, "good", touch(out / "good"), trusted)
        assert edited["signatureKid"] == good["signatureKid"] == trusted["kid"]
        edit_revision_as_superuser(dev["dsn"], edited["revisionId"], touch(out / "edited"))
        runs = {name: enqueue(dev, task) for name, task in
                (("unsigned", unsigned), ("untrusted", untrusted), ("edited", edited),
                 ("good", good))}  # fmt: skip
        worker = start_worker(dev, base, "--trust-keys", str(keys), "--trust-policy", "enforce")
        try:
            shown = finished(dev, list(runs.values()))
            # The database may know before the worker heard the last answer.
            worker.wait_for("exec.completed", count=4, timeout=90)
        finally:
            assert worker.stop(signal.SIGTERM) == 0
        ran = sorted(p.name for p in out.iterdir())
    assert ran == ["good"], "only the trusted, unedited revision ran"
    assert attempts(shown[runs["good"]]) == [("succeeded", None, True)]
    for name in ("unsigned", "untrusted", "edited"):
        assert attempts(shown[runs[name]]) == [("failed", "signature_invalid", False)], name
        assert shown[runs[name]]["run"]["state"] == "failed"
    refused = {e["runId"]: e for e in worker.named("exec.signature_invalid")}
    assert {r: refused[r]["category"] for r in refused} == {
        runs["unsigned"]: "unsigned", runs["untrusted"]: "unknown_kid",
        runs["edited"]: "bad_signature"}  # fmt: skip
    assert all(e["level"] == "error" and e["policy"] == "enforce" for e in refused.values())
    assert refused[runs["untrusted"]]["kid"] == stranger["kid"]
    # Nothing of a refused revision was spawned; the trusted one was.
    started = {e["runId"] for e in worker.named("exec.started")}
    assert started == {runs["good"]}
    assert worker.named("worker.trust")[0]["kids"] == [trusted["kid"]]


def test_a_worker_trusting_old_and_new_keys_runs_both(dev: dict[str, Any],
                                                      tmp_path: Path) -> None:  # fmt: skip
    old, new = signing_key(tmp_path / "old"), signing_key(tmp_path / "new")
    keys = jwks(tmp_path / "rotation.jwks.json", old, new)
    with reachable_dir("ql-signed-") as base:
        out = outbox(base)
        runs = [
            enqueue(dev, publish(dev, tmp_path, "by-old", touch(out / "old"), old)),
            enqueue(dev, publish(dev, tmp_path, "by-new", touch(out / "new"), new)),
        ]
        worker = start_worker(dev, base, "--trust-keys", str(keys), "--trust-policy", "enforce")
        try:
            shown = finished(dev, runs)
        finally:
            assert worker.stop(signal.SIGTERM) == 0
        ran = sorted(p.name for p in out.iterdir())
    assert ran == ["new", "old"]
    assert all(attempts(shown[r]) == [("succeeded", None, True)] for r in runs)
    assert not worker.named("exec.signature_invalid")
    assert not worker.named("exec.signature_unverified")


def test_warn_runs_an_unsigned_revision_and_says_so(dev: dict[str, Any], tmp_path: Path) -> None:
    key = signing_key(tmp_path / "k")
    keys = jwks(tmp_path / "warn.jwks.json", key)
    with reachable_dir("ql-signed-") as base:
        out = outbox(base)
        run_id = enqueue(dev, publish(dev, tmp_path, "warned", touch(out / "warned"), None))
        worker = start_worker(dev, base, "--trust-keys", str(keys), "--trust-policy", "warn")
        try:
            shown = finished(dev, [run_id])
        finally:
            assert worker.stop(signal.SIGTERM) == 0
        ran = sorted(p.name for p in out.iterdir())
    assert ran == ["warned"]
    assert attempts(shown[run_id]) == [("succeeded", None, True)]
    (warned,) = worker.named("exec.signature_unverified")
    assert (warned["level"], warned["category"], warned["policy"], warned["runId"]) == (
        "error",
        "unsigned",
        "warn",
        run_id,
    )


def test_enforce_without_keys_refuses_to_start(dev: dict[str, Any], tmp_path: Path) -> None:
    with reachable_dir("ql-signed-") as base:
        result = run(dev_args(dev, base / "journal", "--execute", *run_as_args(),
                              "--trust-policy", "enforce"))  # fmt: skip
        bad = base / "bad.jwks.json"
        bad.write_text('{"keys": [{"kty": "RSA"}]}')
        invalid = run(dev_args(dev, base / "journal", "--execute", *run_as_args(),
                               "--trust-keys", str(bad)))  # fmt: skip
    assert result.returncode == 2
    failed = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert failed[-1]["event"] == "worker.failed" and failed[-1]["reason"] == "invalid_trust"
    assert invalid.returncode == 2 and "invalid_jwks" in invalid.stderr
