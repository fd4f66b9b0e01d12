"""Test harness for the ingress: a throwaway PKI, the ingress running in-process
on a background event loop (or as a real `qinglong ingress serve --processes N`
process tree), and a stdlib TLS 1.3 client."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.service import pki
from qinglong.service.audit import AuditLog
from qinglong.service.config import IngressConfig
from qinglong.service.serve import RunningIngress, start_ingress
from qinglong.service.state import ProjectionHook
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.provision import Provisioner, Worker, table_fingerprint

INGRESS_ROLE = "ql_ingress_test"
UNREACHABLE_DSN = "host=127.0.0.1 port=1 dbname=none user=none connect_timeout=1"


# ------------------------------------------------------------------ PKI


@dataclass
class PkiSet:
    root: Path
    ca_dir: Path
    server: pki.CertFiles
    foreign_ca_dir: Path

    @property
    def ca_file(self) -> str:
        return str(self.ca_dir / pki.CA_CERT_NAME)

    def worker_cert(
        self,
        worker_id: str,
        *,
        foreign: bool = False,
        expired: bool = False,
        name: str | None = None,
    ) -> pki.CertFiles:
        out = self.root / "workers" / (name or f"{worker_id}-{foreign}-{expired}")
        kwargs: dict[str, Any] = {}
        if expired:
            now = datetime.now(UTC)
            kwargs = {"not_before": now - timedelta(days=10), "not_after": now - timedelta(days=1)}
        ca = self.foreign_ca_dir if foreign else self.ca_dir
        return pki.issue_worker_cert(ca, out, worker_id, **kwargs)


def make_pki(root: Path) -> PkiSet:
    ca_dir = root / "ca"
    pki.init_ca(ca_dir)
    foreign = root / "foreign-ca"
    pki.init_ca(foreign, common_name="Somebody Else's CA")
    server = pki.issue_server_cert(ca_dir, root / "server", ("localhost", "127.0.0.1"))
    return PkiSet(root, ca_dir, server, foreign)


# ------------------------------------------------------------------ config


def ingress_config(test_pki: PkiSet, dsn: str, **overrides: Any) -> IngressConfig:
    base = IngressConfig(
        dsn=dsn,
        cert_file=str(test_pki.server.cert_file),
        key_file=str(test_pki.server.key_file),
        client_ca_file=test_pki.ca_file,
        port=0,
        admin_port=0,
        statement_timeout_ms=2000,
        acquire_timeout_ms=1500,
        connect_timeout_s=2,
        rate_per_s=50.0,
        rate_burst=100,
        shutdown_timeout_s=5.0,
        unavailable_retry_after_s=2,
        audit_log="stderr",
    )
    return dataclasses.replace(base, **overrides).validate()


def ensure_ingress_role(superuser_dsn: str) -> None:
    """A login role IN ROLE ql_worker_ingress (roles are cluster-wide)."""
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
            f"'{INGRESS_ROLE}') THEN CREATE ROLE {INGRESS_ROLE} LOGIN IN ROLE "
            "ql_worker_ingress; END IF; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )


# ------------------------------------------------------------------ server


@dataclass
class IngressThread:
    """The real ingress (TLS site, admin site, pool) on its own event loop."""

    config: IngressConfig
    projection_hook: ProjectionHook | None = None
    audit_lines: list[str] = field(default_factory=list)
    running: RunningIngress | None = None
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None

    def start(self) -> IngressThread:
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.running = self.run(
            start_ingress(
                self.config,
                audit=AuditLog(self.audit_lines.append),
                projection_hook=self.projection_hook,
            )
        )
        return self

    def run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        if self.running is not None:
            self.run(self.running.stop())
            self.running = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()

    @property
    def port(self) -> int:
        assert self.running is not None
        return self.running.port

    @property
    def admin_port(self) -> int:
        assert self.running is not None
        return self.running.admin_port

    @property
    def metrics(self) -> Any:
        assert self.running is not None
        return self.running.state.metrics

    def metrics_text(self) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=10)
        try:
            conn.request("GET", "/metrics")
            return conn.getresponse().read().decode()
        finally:
            conn.close()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def client_context(
    test_pki: PkiSet, cert: pki.CertFiles | None, *, tls12: bool = False
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=test_pki.ca_file)
    if tls12:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert_file), str(cert.key_file))
    return ctx


def post(
    port: int,
    path: str,
    body: Any,
    *,
    ctx: ssl.SSLContext,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> Reply:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
    try:
        conn.request(method, path, body=data if method == "POST" else None, headers=all_headers)
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        conn.close()


def tls_socket(port: int, ctx: ssl.SSLContext, timeout: float = 5) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


@dataclass
class IngressTree:
    """`qinglong ingress serve --processes N` as a real process (a supervisor
    above N children when N > 1), started from a JSON config file."""

    process: subprocess.Popen[bytes]
    home: Path

    @property
    def ready(self) -> dict[str, Any]:
        return json.loads((self.home / "ready.json").read_text())

    @property
    def port(self) -> int:
        return int(str(self.ready["ingressUrl"]).rsplit(":", 1)[1])

    @property
    def admin_urls(self) -> list[str]:
        ready = self.ready
        return list(ready.get("adminUrls", [ready["adminUrl"]]))

    def log_text(self) -> str:
        return (self.home / "app.log").read_text(errors="replace")

    def metric_sum(self, series: str) -> float:
        """`series` (name plus labels, as exposed) summed over every process."""
        return sum(self.metric_at(url, series) for url in self.admin_urls)

    @staticmethod
    def metric_at(admin_url: str, series: str) -> float:
        """`series` on one process's /metrics (0 if absent)."""
        host, port = admin_url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name == series:
                return float(value)
        return 0.0

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def stop(self, timeout_s: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return int(self.process.returncode)


def start_ingress_tree(
    home: Path, test_pki: PkiSet, dsn: str, *, processes: int = 1, **overrides: Any
) -> IngressTree:
    """Start the real ingress (`--processes N`; 1 unless a test asks for more, so
    process-local state such as metrics stays in one process) and wait until its
    ready file says it listens."""
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "dsn": dsn,
        "certFile": str(test_pki.server.cert_file),
        "keyFile": str(test_pki.server.key_file),
        "clientCaFile": test_pki.ca_file,
        "port": 0,
        "adminPort": 0,
        "auditLog": str(home / "audit.log"),
        "readyFile": str(home / "ready.json"),
        "logLevel": "INFO",
        "ratePerS": 1000,
        "rateBurst": 1000,
        "shutdownTimeoutS": 5,
        **overrides,
    }
    (home / "ingress.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_INGRESS_")}
    with open(home / "app.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qinglong",
                "ingress",
                "serve",
                "--config",
                str(home / "ingress.json"),
                "--processes",
                str(processes),
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    tree = IngressTree(process, home)
    deadline = time.monotonic() + 60
    while not (home / "ready.json").exists():
        if process.poll() is not None:
            raise AssertionError("ingress exited: " + tree.log_text()[-3000:])
        if time.monotonic() > deadline:
            tree.stop()
            raise AssertionError("ingress never became ready: " + tree.log_text()[-3000:])
        time.sleep(0.05)
    return tree


# ------------------------------------------------------------------ workers


@dataclass
class Agent:
    """A provisioned worker with its certificate and client context."""

    worker: Worker
    cert: pki.CertFiles
    ctx: ssl.SSLContext

    @property
    def token(self) -> str:
        return f"ql3w_{self.worker.credential_id}_{self.worker.secret}"

    @property
    def worker_id(self) -> str:
        return self.worker.worker_id


def make_agent(prov: Provisioner, test_pki: PkiSet, name: str) -> Agent:
    worker = prov.worker(name)
    cert = test_pki.worker_cert(worker.worker_id, name=name)
    return Agent(worker, cert, client_context(test_pki, cert))


CAPABILITIES: dict[str, Any] = {
    "schema": "qinglong/worker-capabilities@v1",
    "executors": ["remote-worker"],
    "labels": {},
    "runtimes": {},
    "slots": 4,
}


def open_body(agent: Agent) -> dict[str, Any]:
    return {
        "schema": "qinglong/session-open-request@v1",
        "workerId": agent.worker_id,
        "capabilities": CAPABILITIES,
    }


def pull_body(
    agent: Agent, session: dict[str, Any], offer_id: str | None = None, token: str | None = None
) -> dict[str, Any]:
    from tests.py.provision import new_token

    return {
        "schema": "qinglong/offer-pull-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "offerId": offer_id or str(uuid.uuid4()),
        "leaseToken": token or new_token(),
    }


@dataclass(frozen=True)
class Snapshot:
    tables: dict[str, str]
    audit_rows: int


def snapshot(conn: psycopg.Connection) -> Snapshot:
    tables = table_fingerprint(conn, exclude=("security_audit",))
    row = conn.execute("SELECT count(*) FROM ql_private.security_audit").fetchone()
    assert row is not None
    return Snapshot(tables, int(row[0]))


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def test_pki(tmp_path: Path) -> PkiSet:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def ingress_dsn(pg_cluster: ThrowawayPostgres, db_name: str) -> str:
    ensure_ingress_role(pg_cluster.dsn("postgres"))
    return pg_cluster.dsn(db_name, user=INGRESS_ROLE)


@pytest.fixture
def su_conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def prov(su_conn: psycopg.Connection) -> Provisioner:
    return Provisioner(su_conn)


IngressFactory = Callable[..., IngressThread]


@pytest.fixture
def start_ingress_thread() -> Iterator[IngressFactory]:
    started: list[IngressThread] = []

    def factory(
        config: IngressConfig, projection_hook: ProjectionHook | None = None
    ) -> IngressThread:
        server = IngressThread(config, projection_hook).start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def ingress(
    start_ingress_thread: IngressFactory, test_pki: PkiSet, ingress_dsn: str
) -> IngressThread:
    return start_ingress_thread(ingress_config(test_pki, ingress_dsn))
