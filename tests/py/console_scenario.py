"""A demo-like database for the console tests, and a running console over it.

`build_scenario` provisions through the real SQL API (tests/py/provision.py):
two workers with live sessions (one whose label value is an HTML payload), a
disabled worker, an auth denial, a task whose runs succeeded (output tail
`<script>alert(1)</script>`), failed, started or still wait, and a task whose
placement no live session satisfies. `console_process` starts
`qinglong console` as a subprocess on a free loopback port, logged in as a role
that is only a member of ql_readonly, and yields its URL; `remote_files` and
`remote_args` make the TLS material (the project's dev CA, service/pki.py) and
the 0600 access token file of a `--allow-remote` console.
"""

from __future__ import annotations

import os
import secrets
import selectors
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from qinglong.db import api
from qinglong.service import pki
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner, Session, command

XSS_TAIL = "compiling…\n<script>alert(1)</script>\ndone\n"
XSS_LABEL = '<img src=x onerror="alert(2)">'
GPU_PLACEMENT = {
    "required": {"executors": ["remote-worker"], "labels": {"gpu": ["yes"]}, "runtimes": {}},
    "preferred": [],
}


@dataclass
class Scenario:
    build_task: str
    train_task: str
    succeeded_run: str
    failed_run: str
    started_run: str
    queued_runs: list[str]
    train_run: str
    secrets: list[str] = field(default_factory=list)


def _finish(
    prov: Provisioner, session: Session, outcome: str, tail: str, secrets: list[str]
) -> str:
    intent, run_id = _start(prov, session, secrets)
    exit_code = 0 if outcome == "succeeded" else 3
    done = prov.call(
        api.complete_lease(
            **session.lease(intent),
            lease_version=2,
            outcome=outcome,
            exit_code=exit_code,
            result={
                "exitCode": exit_code,
                "durationMs": 1234,
                "outputTail": tail,
                "outputBytes": len(tail.encode()),
            },
        )
    ).doc
    assert done["status"] == "ok", done
    return run_id


def _start(prov: Provisioner, session: Session, secrets: list[str]) -> tuple[Intent, str]:
    intent = Intent()
    secrets += [intent.token, intent.token_digest.hex()]
    pulled = prov.pull(session, intent)
    assert pulled["status"] == "offered", pulled
    ack = prov.call(api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")).doc
    assert ack["status"] == "ok", ack
    return intent, pulled["offer"]["candidate"]["runId"]


def build_scenario(conn: psycopg.Connection) -> Scenario:
    prov = Provisioner(conn)
    edge = prov.worker("edge-1")
    gpu = prov.worker("gpu-box")
    retired = prov.worker("retired")
    secrets = [w.secret for w in (edge, gpu, retired)] + [
        w.secret_digest.hex() for w in (edge, gpu, retired)
    ]
    edge_session = prov.session(
        edge,
        dict(
            DEFAULT_CAPABILITIES,
            slots=4,
            labels={"region": "eu-1", "note": XSS_LABEL},
            runtimes={"python": "3.11.4"},
        ),
    )
    prov.session(gpu, dict(DEFAULT_CAPABILITIES, slots=2, labels={"gpu": "no"}))
    prov.call(api.disable_worker(worker_id=retired.worker_id))
    prov.call(
        api.record_auth_denial(
            credential_id=retired.credential_id,
            worker_id=retired.worker_id,
            action="session.open",
            reason="worker_disabled",
        )
    )
    build = prov.task("build", command(["make", "all"]), project="web")
    prov.call(api.configure_task(task_id=build, max_attempts=1))  # a failure is final
    train = prov.task(
        "train", command(["python", "train.py"], placement=GPU_PLACEMENT), project="ml"
    )
    runs = prov.enqueue(build, 5)
    succeeded = _finish(prov, edge_session, "succeeded", XSS_TAIL, secrets)
    failed = _finish(prov, edge_session, "failed", "error: boom\n", secrets)
    _, started = _start(prov, edge_session, secrets)
    (train_run,) = prov.enqueue(train, 1)
    queued = [r for r in runs if r not in (succeeded, failed, started)]
    return Scenario(build, train, succeeded, failed, started, queued, train_run, secrets)


def readonly_dsn(conn: psycopg.Connection, cluster: Any, db_name: str) -> str:
    """A login role that is a member of ql_readonly only, and its DSN."""
    role = f"ql_console_{db_name}"
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ql_readonly").format(sql.Identifier(role)))
    return str(cluster.dsn(db_name, user=role))


def drop_role(conn: psycopg.Connection, db_name: str) -> None:
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"ql_console_{db_name}")))


START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's first stdout line, or "" when it exits or stays silent past timeout_s."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
    return proc.stdout.readline()  # it has written; the line ends with its flush


@contextmanager
def console_process(dsn: str, *extra: str) -> Iterator[str]:
    """`qinglong console` on a free loopback port; yields its URL (its first line).

    Never hangs or leaks: the first line is awaited at most START_TIMEOUT_S,
    stderr goes to a file (a pipe nobody reads could fill and block the
    console), and a console that does not stop on SIGTERM is killed.
    """
    env = dict(os.environ, QINGLONG_DSN=dsn)
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "qinglong", "console", "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        try:
            first = _first_line(proc, START_TIMEOUT_S)
            if not first.startswith(("console: http://127.0.0.1:", "console: https://")):
                stderr.seek(0)
                raise AssertionError(f"the console did not start: {first!r} {stderr.read()}")
            yield first.split(" ", 1)[1].strip()
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen[str], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL when it is still there after timeout_s."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str]


def fetch(
    url: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> Answer:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return Answer(response.status, response.read().decode(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read().decode(), dict(exc.headers))


# ------------------------------------------------------------ a remote console

REMOTE_HOST = "localhost"  # the --allowed-host; the certificate names it and 127.0.0.1


@dataclass(frozen=True)
class RemoteFiles:
    ca_file: Path
    cert_file: Path
    key_file: Path
    token_file: Path
    token: str = field(repr=False)

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def remote_files(root: Path) -> RemoteFiles:
    """A dev CA, a server certificate for localhost/127.0.0.1, a 0600 token file."""
    pki.init_ca(root / "ca")
    server = pki.issue_server_cert(root / "ca", root / "server", (REMOTE_HOST, "127.0.0.1"))
    token = secrets.token_urlsafe(32)
    pki.write_private_file(root / "console.token", f"{token}\n".encode())
    return RemoteFiles(
        root / "ca" / pki.CA_CERT_NAME,
        server.cert_file,
        server.key_file,
        root / "console.token",
        token,
    )


def remote_args(files: RemoteFiles, *hosts: str) -> list[str]:
    """`qinglong console` flags of a remote console over `files` (bound to 127.0.0.1)."""
    allowed = [arg for host in hosts or (REMOTE_HOST,) for arg in ("--allowed-host", host)]
    return [
        "--allow-remote",
        "--tls-cert",
        str(files.cert_file),
        "--tls-key",
        str(files.key_file),
        "--auth-token-file",
        str(files.token_file),
        *allowed,
    ]
