"""SPEC §16.3 black-box: `admin worker renew-cert --worker ID` needs no other flag.

On a `qinglong dev up` stack the CA is the one the database names (the dev
stack's caDir) and the new pair lands in a new directory beside it, which
`dev down` removes. The renewed certificate names the same worker, is accepted
by the ingress, and `admin cert revoke --serial` takes openssl's own output
verbatim and gets it refused. Elsewhere a missing `--ca-dir` is a clear input
error that writes nothing.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from cryptography import x509

QL = [sys.executable, "-m", "qinglong"]


def _ql(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*QL, *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=os.environ | (env or {}),
    )


def _status_of(dev: dict[str, Any], cert_dir: Path) -> tuple[int, str]:
    """POST to the ingress with the certificate in `cert_dir` -> (status, reason)."""
    ctx = ssl.create_default_context(cafile=dev["caFile"])
    ctx.load_cert_chain(cert_dir / "worker.pem", cert_dir / "worker-key.pem")
    request = urllib.request.Request(
        dev["ingressUrl"] + "/v1/no-such-route", data=b"{}", method="POST"
    )
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as reply:
            return reply.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["reason"]


def test_renew_cert_with_only_the_worker_on_a_dev_stack(tmp_path: Path) -> None:
    state_dir = tmp_path / "dev"
    up = _ql("dev", "up", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    try:
        dev = json.loads((state_dir / "dev-env.json").read_text())
        worker_id = dev["worker"]["workerId"]
        done = _ql(
            "admin",
            "worker",
            "renew-cert",
            "--worker",
            worker_id,
            env={"QINGLONG_DSN": dev["runtimeDsn"]},
        )
        assert done.returncode == 0, done.stderr
        renewed = json.loads(done.stdout)
        cert_dir = Path(renewed["certFile"]).parent
        assert cert_dir.parent == state_dir.resolve() / "worker-certs"
        assert cert_dir.stat().st_mode & 0o777 == 0o700
        cert = x509.load_pem_x509_certificate(Path(renewed["certFile"]).read_bytes())
        ca = x509.load_pem_x509_certificate(Path(dev["caFile"]).read_bytes())
        assert cert.issuer == ca.subject
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.UniformResourceIdentifier) == [
            f"urn:qinglong:worker:{worker_id}"
        ]
        assert int(renewed["serial"], 16) == cert.serial_number
        with psycopg.connect(dev["dsn"]) as conn:
            assert conn.execute(
                "SELECT worker_id::text FROM ql_private.worker_certificates WHERE serial = %s",
                (renewed["serial"],),
            ).fetchone() == (worker_id,)
        assert _status_of(dev, cert_dir) == (404, "unknown_route")  # admitted

        printed = subprocess.run(
            ["openssl", "x509", "-serial", "-noout", "-in", renewed["certFile"]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        revoked = _ql(
            "admin", "cert", "revoke", "--serial", printed, env={"QINGLONG_DSN": dev["runtimeDsn"]}
        )
        assert revoked.returncode == 0, revoked.stderr
        deadline = time.monotonic() + 5
        while _status_of(dev, cert_dir) != (401, "certificate_revoked"):
            assert time.monotonic() < deadline, "revoked certificate still admitted after 5 s"
            time.sleep(0.2)
    finally:
        down = _ql("dev", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert not (state_dir / "worker-certs").exists()


def test_renew_cert_without_a_ca_outside_a_dev_stack_is_an_input_error(
    db_dsn: str, tmp_path: Path
) -> None:
    ca_dir = tmp_path / "ca"
    assert _ql("admin", "ca", "init", "--dir", str(ca_dir)).returncode == 0
    made = _ql(
        "admin",
        "worker",
        "create",
        "--dsn",
        db_dsn,
        "--name",
        "w1",
        "--ca-dir",
        str(ca_dir),
        "--out",
        str(tmp_path / "w1"),
    )
    assert made.returncode == 0, made.stderr
    worker_id = json.loads(made.stdout)["workerId"]
    done = _ql("admin", "worker", "renew-cert", "--dsn", db_dsn, "--worker", worker_id)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stderr)
    assert (error["error"], error["reason"], error["field"]) == (
        "invalid_input",
        "ca_dir_required",
        "caDir",
    )
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ql_private.worker_certificates").fetchone() == (
            1,
        )  # only the one `worker create` issued
    # With the CA named, OUT still defaults: a new directory beside the CA.
    done = _ql(
        "admin",
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        worker_id,
        "--ca-dir",
        str(ca_dir),
    )
    assert done.returncode == 0, done.stderr
    cert_file = Path(json.loads(done.stdout)["certFile"])
    assert cert_file.parent.parent == tmp_path / "worker-certs"
    assert cert_file.is_file()
