"""`qinglong admin …` black-box: subprocess against a real migrated database."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from qinglong.throwaway_postgres import ThrowawayPostgres

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TOKEN_RE = re.compile(r"ql3w_([a-z0-9]{16})_([A-Za-z0-9_-]{43})")
COMMAND = {"schema": "qinglong/command@v1", "argv": ["echo", "hi"], "env": {}, "timeoutS": 30}


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ok(*args: str) -> dict[str, Any]:
    result = admin(*args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def fails(*args: str) -> dict[str, Any]:
    """A refused command: invalid input exits 2 (naming the field), the rest 1."""
    result = admin(*args)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stderr.strip().splitlines()[-1])
    assert {"error", "reason"} <= doc.keys()
    if doc["error"] == "invalid_input":
        assert result.returncode == 2, doc
        assert "field" in doc, doc
    else:
        assert result.returncode == 1, doc
    return doc


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    ok("ca", "init", "--dir", str(tmp_path / "ca"))
    return tmp_path / "ca"


@pytest.fixture
def command_file(tmp_path: Path) -> Path:
    path = tmp_path / "command.json"
    path.write_text(json.dumps(COMMAND))
    return path


def _publish(dsn: str, command_file: Path, name: str = "build") -> dict[str, Any]:
    return ok(
        "task", "publish", "--dsn", dsn, "--project", "demo", "--name", name,
        "--command-file", str(command_file),
    )  # fmt: skip


# ----------------------------------------------------------------------- CA


def test_ca_init(tmp_path: Path) -> None:
    out = ok("ca", "init", "--dir", str(tmp_path / "ca"))
    assert set(out) == {"caDir", "certFile", "keyFile"}
    assert Path(out["caDir"]) == tmp_path / "ca"
    assert Path(out["certFile"]).is_file()
    assert _mode(out["keyFile"]) == 0o600


def test_ca_init_refuses_existing(ca_dir: Path) -> None:
    before = (ca_dir / "ca-key.pem").read_bytes()
    doc = fails("ca", "init", "--dir", str(ca_dir))
    assert doc["reason"] == "ca_exists"
    assert (ca_dir / "ca-key.pem").read_bytes() == before


# ------------------------------------------------------------------- worker


def test_worker_create(db_dsn: str, ca_dir: Path, tmp_path: Path) -> None:
    from qinglong.service.pki import worker_id_from_cert_der

    out_dir = tmp_path / "w1"
    result = admin(
        "worker", "create", "--dsn", db_dsn, "--name", "edge-1",
        "--ca-dir", str(ca_dir), "--out", str(out_dir),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"workerId", "certFile", "keyFile", "credentialFile"}
    assert UUID_RE.fullmatch(out["workerId"])
    assert _mode(out_dir) == 0o700
    assert _mode(out["keyFile"]) == 0o600
    assert _mode(out["credentialFile"]) == 0o600

    token = Path(out["credentialFile"]).read_text()
    match = TOKEN_RE.fullmatch(token)
    assert match, "credential file must hold exactly the ql3w_ token"
    credential_id, secret = match.groups()
    assert secret not in result.stdout + result.stderr

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    cert = x509.load_pem_x509_certificate(Path(out["certFile"]).read_bytes())
    assert worker_id_from_cert_der(cert.public_bytes(Encoding.DER)) == out["workerId"]

    with psycopg.connect(db_dsn) as conn:
        row = conn.execute(
            "SELECT worker_id::text, secret_digest, revoked_at FROM ql_private.worker_credentials"
            " WHERE credential_id = %s",
            (credential_id,),
        ).fetchone()
    assert row is not None
    assert row[0] == out["workerId"]
    assert bytes(row[1]) == hashlib.sha256(secret.encode("ascii")).digest()
    assert row[2] is None


def test_worker_create_without_ca_fails_cleanly(db_dsn: str, tmp_path: Path) -> None:
    doc = fails(
        "worker", "create", "--dsn", db_dsn, "--name", "edge-1",
        "--ca-dir", str(tmp_path / "no-ca"), "--out", str(tmp_path / "w"),
    )  # fmt: skip
    assert doc["reason"] == "ca_not_found"


def test_unreachable_database_is_a_json_error(ca_dir: Path, tmp_path: Path) -> None:
    doc = fails(
        "worker", "create", "--dsn", "host=127.0.0.1 port=1 connect_timeout=2",
        "--name", "edge-1", "--ca-dir", str(ca_dir), "--out", str(tmp_path / "w"),
    )  # fmt: skip
    assert doc["reason"] == "database_unavailable"


# --------------------------------------------------------------- credential


def test_credential_revoke(db_dsn: str, ca_dir: Path, tmp_path: Path) -> None:
    worker = ok(
        "worker", "create", "--dsn", db_dsn, "--name", "edge-2",
        "--ca-dir", str(ca_dir), "--out", str(tmp_path / "w"),
    )  # fmt: skip
    match = TOKEN_RE.fullmatch(Path(worker["credentialFile"]).read_text())
    assert match
    credential_id = match.group(1)
    out = ok("credential", "revoke", "--dsn", db_dsn, "--credential-id", credential_id)
    assert out["credentialId"] == credential_id
    assert isinstance(out["revokedAtMs"], int) and out["revokedAtMs"] > 0
    with psycopg.connect(db_dsn) as conn:
        row = conn.execute(
            "SELECT revoked_at FROM ql_private.worker_credentials WHERE credential_id = %s",
            (credential_id,),
        ).fetchone()
    assert row is not None and row[0] is not None


def test_credential_revoke_unknown(db_dsn: str) -> None:
    doc = fails("credential", "revoke", "--dsn", db_dsn, "--credential-id", "0123456789abcdef")
    assert doc["reason"] == "not_found"


# --------------------------------------------------------------------- task


def test_task_publish_revisions(db_dsn: str, command_file: Path) -> None:
    from qinglong.service.compiler import compile_command

    first = _publish(db_dsn, command_file)
    assert set(first) == {
        "taskId",
        "revisionId",
        "revision",
        "pool",
        "contentDigest",
        "signatureKid",
    }
    assert first["signatureKid"] is None  # unsigned (SPEC §16.1)
    assert first["revision"] == 1
    assert first["contentDigest"] == compile_command(command_file.read_bytes()).content_digest

    again = _publish(db_dsn, command_file)
    assert again == first, "identical content returns the existing revision"

    command_file.write_text(json.dumps({**COMMAND, "argv": ["echo", "bye"]}))
    second = _publish(db_dsn, command_file)
    assert second["taskId"] == first["taskId"]
    assert second["revision"] == 2
    assert second["revisionId"] != first["revisionId"]
    assert second["contentDigest"] != first["contentDigest"]


def test_task_publish_rejects_invalid_command(db_dsn: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "qinglong/command@v1", "argv": []}')
    doc = fails(
        "task", "publish", "--dsn", db_dsn, "--project", "demo", "--name", "x",
        "--command-file", str(bad),
    )  # fmt: skip
    assert doc["error"] == "invalid_input"
    assert doc["field"] == "commandFile"


def test_task_publish_missing_file(db_dsn: str, tmp_path: Path) -> None:
    doc = fails(
        "task", "publish", "--dsn", db_dsn, "--project", "demo", "--name", "x",
        "--command-file", str(tmp_path / "missing.json"),
    )  # fmt: skip
    assert doc["error"] == "io_error"


# ---------------------------------------------------------------------- run


def test_run_enqueue_and_cancel(db_dsn: str, command_file: Path) -> None:
    task = _publish(db_dsn, command_file)
    one = ok("run", "enqueue", "--dsn", db_dsn, "--task", task["taskId"])
    assert len(one["runIds"]) == 1
    many = ok(
        "run", "enqueue", "--dsn", db_dsn, "--task", task["taskId"],
        "--priority", "-5", "--count", "3",
    )  # fmt: skip
    assert len(many["runIds"]) == 3
    assert all(UUID_RE.fullmatch(run_id) for run_id in one["runIds"] + many["runIds"])

    with psycopg.connect(db_dsn) as conn:
        rows = conn.execute(
            "SELECT r.priority, r.execution_revision_id::text, a.state, a.executor"
            " FROM ql_private.runs r JOIN ql_private.attempts a ON a.id = r.current_attempt_id"
            " WHERE r.id = ANY(%s::uuid[])",
            (many["runIds"],),
        ).fetchall()
    assert len(rows) == 3
    assert {row[0] for row in rows} == {-5}
    assert {row[1] for row in rows} == {task["revisionId"]}
    assert {(row[2], row[3]) for row in rows} == {("claimed", "remote_worker")}

    cancelled = ok("run", "cancel", "--dsn", db_dsn, "--run", one["runIds"][0])
    assert set(cancelled) == {"runId", "state", "cancelRequested"}
    assert cancelled["runId"] == one["runIds"][0]
    assert cancelled["cancelRequested"] is True or cancelled["state"] == "cancelled"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--priority", "32768"),
        ("--priority", "-32769"),
        ("--priority", "x"),
        ("--count", "0"),
        ("--count", "10001"),
    ],
)
def test_run_enqueue_bad_numbers(db_dsn: str, command_file: Path, option: str, value: str) -> None:
    task = _publish(db_dsn, command_file)
    doc = fails("run", "enqueue", "--dsn", db_dsn, "--task", task["taskId"], option, value)
    assert doc["error"] == "invalid_input"
    assert doc["field"] == option.removeprefix("--")


def test_run_enqueue_unknown_task(db_dsn: str) -> None:
    doc = fails("run", "enqueue", "--dsn", db_dsn, "--task", str(uuid.uuid4()))
    assert doc["reason"] == "not_found"


def test_run_enqueue_malformed_task_id(db_dsn: str) -> None:
    doc = fails("run", "enqueue", "--dsn", db_dsn, "--task", "not-a-uuid")
    assert doc["reason"] == "invalid_input"
    assert doc["field"] == "taskId"


def test_run_cancel_unknown(db_dsn: str) -> None:
    doc = fails("run", "cancel", "--dsn", db_dsn, "--run", str(uuid.uuid4()))
    assert doc["reason"] == "not_found"


# ------------------------------------------------- non-superuser ql_runtime role


@pytest.fixture
def runtime_dsn(pg_cluster: ThrowawayPostgres, db_name: str) -> Iterator[str]:
    role = f"ql_admin_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_cluster.dsn(db_name), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE ql_runtime").format(sql.Identifier(role))
        )
    try:
        yield pg_cluster.dsn(db_name, user=role)
    finally:
        with psycopg.connect(pg_cluster.dsn(db_name), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_admin_as_runtime_role(
    runtime_dsn: str, ca_dir: Path, tmp_path: Path, command_file: Path
) -> None:
    worker = ok(
        "worker", "create", "--dsn", runtime_dsn, "--name", "edge-3",
        "--ca-dir", str(ca_dir), "--out", str(tmp_path / "w"),
    )  # fmt: skip
    assert UUID_RE.fullmatch(worker["workerId"])
    task = _publish(runtime_dsn, command_file)
    runs = ok("run", "enqueue", "--dsn", runtime_dsn, "--task", task["taskId"], "--count", "2")
    assert len(runs["runIds"]) == 2
    ok("run", "cancel", "--dsn", runtime_dsn, "--run", runs["runIds"][0])


# ------------------------------------------------------ service.control_plane


def test_provision_worker_is_atomic(
    db_dsn: str, ca_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qinglong.db import api
    from qinglong.service import control_plane

    def refuse(**_kwargs: object) -> dict:
        raise control_plane.ControlPlaneError("invalid_input", "refused by test")

    # The credential step fails after the worker and its certificate were made.
    monkeypatch.setattr(api, "issue_credential", refuse)
    out_dir = tmp_path / "w"
    with (
        control_plane.connect(db_dsn) as conn,
        pytest.raises(control_plane.ControlPlaneError),
    ):
        control_plane.provision_worker(conn, "edge-x", ca_dir, out_dir)
    assert list(out_dir.iterdir()) == []
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ql_private.workers").fetchone() == (0,)


def test_unmigrated_database_reason(empty_db_dsn: str) -> None:
    doc = fails("run", "cancel", "--dsn", empty_db_dsn, "--run", str(uuid.uuid4()))
    assert doc["reason"] == "database_not_migrated"


def test_sqlstate_table_matches_design() -> None:
    from qinglong.service.sqlstates import BY_CODE, lookup

    assert lookup("QL004") is not None and lookup("QL004").http_status == 404
    assert lookup("QL011").reason == "session_replaced"
    assert lookup("23505") is None
    assert sorted(BY_CODE) == [
        "QL001", "QL002", "QL003", "QL004", "QL006", "QL010", "QL011", "QL012",
        "QL013", "QL014", "QL015", "QL016", "QL020", "QL021", "QL022", "QL030", "QL031",
        "QL040", "QL041",
    ]  # fmt: skip
