"""Shared helpers of the security matrix, fuzzers and abuse tests.

Each of those modules shares ONE database and ONE ingress (module-scoped
fixtures below), so forty-odd cases cost one cluster database and one listener;
isolation between cases comes from fingerprinting every ql_private table before
and after each case instead of from a fresh database per case.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qinglong.db.migrator import bootstrap
from qinglong.service import pki
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.ingress_harness import (
    INGRESS_ROLE,
    Agent,
    IngressThread,
    PkiSet,
    ensure_ingress_role,
    ingress_config,
    make_agent,
    make_pki,
)
from tests.py.provision import Provisioner, new_token, table_fingerprint

_db_counter = itertools.count()

ERROR_SCHEMA = "qinglong/error@v1"


# ------------------------------------------------------------------ certificates


def custom_worker_cert(
    ca_dir: Path,
    out_dir: Path,
    *,
    uris: Sequence[str] | None,
    dns_names: Sequence[str] = (),
    client_auth: bool = True,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
) -> pki.CertFiles:
    """A leaf signed by the CA in `ca_dir` with exactly the SAN entries given.

    `service.pki.issue_worker_cert` always writes one well-formed worker URI; the
    matrix needs the malformed shapes an attacker (or a botched enrolment) could
    present: no SAN at all, a SAN without URI, two worker URIs, odd prefixes.
    `uris=None` and no `dns_names` omits the SAN extension entirely.
    """
    ca = pki.load_ca(ca_dir)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris or ()]
    names += [x509.DNSName(d) for d in dns_names]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "odd-worker")]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - timedelta(minutes=5))
        .not_valid_after(not_after or now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [
                    ExtendedKeyUsageOID.CLIENT_AUTH
                    if client_auth
                    else ExtendedKeyUsageOID.SERVER_AUTH
                ]
            ),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    out_dir.mkdir(parents=True, exist_ok=True)
    files = pki.CertFiles(cert_file=out_dir / "worker.pem", key_file=out_dir / "worker-key.pem")
    files.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


# ------------------------------------------------------------------ database state


@dataclass(frozen=True)
class DbState:
    """Every ql_private table's md5 (security_audit apart) + the last audit id."""

    tables: dict[str, str]
    audit_max_id: int


AuditRow = tuple[str, str, str, str | None, str | None]  # action, outcome, reason, cred, worker


def db_state(conn: psycopg.Connection) -> DbState:
    tables = table_fingerprint(conn, exclude=("security_audit",))
    row = conn.execute("SELECT coalesce(max(id), 0) FROM ql_private.security_audit").fetchone()
    assert row is not None
    return DbState(tables, int(row[0]))


def audit_rows_since(conn: psycopg.Connection, after_id: int) -> list[AuditRow]:
    rows = conn.execute(
        "SELECT action, outcome, reason, credential_id, worker_id::text"
        " FROM ql_private.security_audit WHERE id > %s ORDER BY id",
        (after_id,),
    ).fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def changed_tables(before: DbState, after: DbState) -> list[str]:
    return sorted(t for t in before.tables if before.tables[t] != after.tables.get(t))


def assert_only_audit(
    conn: psycopg.Connection, before: DbState, expected_audit: Sequence[AuditRow]
) -> None:
    """No ql_private table changed except security_audit, which gained exactly
    `expected_audit` (in order)."""
    after = db_state(conn)
    assert changed_tables(before, after) == []
    assert audit_rows_since(conn, before.audit_max_id) == list(expected_audit)


# ------------------------------------------------------------------ module world


@dataclass
class World:
    """One module's database + PKI + ingress + provisioned workers."""

    cluster: ThrowawayPostgres
    db_name: str
    su_conn: psycopg.Connection
    prov: Provisioner
    pki: PkiSet
    ingress: IngressThread | None = None
    agents: dict[str, Agent] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def su_dsn(self) -> str:
        return self.cluster.dsn(self.db_name)

    @property
    def ingress_dsn(self) -> str:
        return self.cluster.dsn(self.db_name, user=INGRESS_ROLE)

    @property
    def port(self) -> int:
        assert self.ingress is not None
        return self.ingress.port

    def agent(self, name: str) -> Agent:
        if name not in self.agents:
            self.agents[name] = make_agent(self.prov, self.pki, name)
        return self.agents[name]


@contextlib.contextmanager
def module_world(
    cluster: ThrowawayPostgres,
    template: str,
    root: Path,
    *,
    start_ingress: bool = True,
    **config: Any,
) -> Iterator[World]:
    """A fresh database copied from the migrated template, a throwaway PKI and
    (optionally) the in-process ingress, all torn down at module end.

    The copy gets the bootstrap's database grants (CREATE DATABASE ... TEMPLATE
    does not copy the database ACL), so the matrix runs against the production
    surface: no CONNECT or TEMPORARY for PUBLIC."""
    name = f"ql_sec_{os.getpid()}_{next(_db_counter)}"
    cluster.create_database(name, template=template)
    bootstrap(cluster.dsn(name))
    ensure_ingress_role(cluster.dsn("postgres"))
    server: IngressThread | None = None
    try:
        with psycopg.connect(cluster.dsn(name), autocommit=True) as conn:
            world = World(cluster, name, conn, Provisioner(conn), make_pki(root / "pki"))
            if start_ingress:
                # Fuzzers and the matrix send far more than a worker's real rate
                # from one identity; the limiter has its own tests.
                settings = {"rate_per_s": 100_000.0, "rate_burst": 100_000, **config}
                server = IngressThread(
                    ingress_config(world.pki, world.ingress_dsn, **settings)
                ).start()
                world.ingress = server
            yield world
    finally:
        if server is not None:
            server.stop()
        cluster.drop_database(name)


# ------------------------------------------------------------------ wire bodies


def session_body(kind: str, agent_id: str, session: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": f"qinglong/session-{kind}-request@v1",
        "workerId": agent_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }


def lease_body(
    kind: str,
    agent_id: str,
    session: dict[str, Any],
    offer_id: str,
    token: str,
    version: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    """`version`: the lease version the worker last saw (1 = as offered)."""
    return {
        "schema": f"qinglong/lease-{kind}-request@v1",
        "workerId": agent_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "offerId": offer_id,
        "leaseToken": token,
        "leaseVersion": version,
        **extra,
    }


def pull_request(
    agent_id: str, session: dict[str, Any], offer_id: str | None = None, token: str | None = None
) -> dict[str, Any]:
    return {
        "schema": "qinglong/offer-pull-request@v1",
        "workerId": agent_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "offerId": offer_id or str(uuid.uuid4()),
        "leaseToken": token or new_token(),
    }


def error_doc(status: int, reason: str) -> dict[str, str]:
    from qinglong.service.errors import kind_for_status

    return {"schema": ERROR_SCHEMA, "error": kind_for_status(status).value, "reason": reason}


# ------------------------------------------------------------------ HTTP clients


def mtls_session(test_pki: PkiSet, cert: pki.CertFiles, token: str | None) -> requests.Session:
    """A keep-alive `requests` session presenting the worker certificate (and the
    bearer credential), trusting only the throwaway CA."""
    session = requests.Session()
    # No REQUESTS_CA_BUNDLE / proxies from the environment: they would silently
    # replace `verify` (a requests quirk) or route loopback through a proxy.
    session.trust_env = False
    session.verify = test_pki.ca_file
    session.cert = (str(cert.cert_file), str(cert.key_file))
    if token is not None:
        session.headers["Authorization"] = f"Bearer {token}"
    return session


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): no interpolation, so p99 of 200
    samples is the 198th smallest — a real observed latency."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# ------------------------------------------------------------------ ingress subprocess


def read_status_kib(pid: int, field_name: str) -> int:
    """A `/proc/PID/status` memory field (VmRSS, VmHWM, …) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise KeyError(field_name)


@dataclass
class IngressProcess:
    """`qinglong ingress serve` as its own process, so its RSS is its own."""

    process: subprocess.Popen[bytes]
    ready: dict[str, Any]
    log_path: Path

    @property
    def pid(self) -> int:
        return int(self.ready["pid"])

    @property
    def port(self) -> int:
        return int(str(self.ready["ingressUrl"]).rsplit(":", 1)[1])

    @property
    def admin_url(self) -> str:
        return str(self.ready["adminUrl"])

    def metrics_text(self) -> str:
        return requests.get(self.admin_url + "/metrics", timeout=10).text

    def metric(self, name: str) -> float:
        for line in self.metrics_text().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_ingress_process(
    tmp: Path,
    test_pki: PkiSet,
    dsn: str,
    *,
    command: Sequence[str] = (sys.executable, "-m", "qinglong"),
    cwd: Path | None = None,
    **overrides: Any,
) -> IngressProcess:
    config: dict[str, Any] = {
        "dsn": dsn,
        "certFile": str(test_pki.server.cert_file),
        "keyFile": str(test_pki.server.key_file),
        "clientCaFile": test_pki.ca_file,
        "port": 0,
        "adminPort": 0,
        "auditLog": str(tmp / "audit.log"),
        "readyFile": str(tmp / "ready.json"),
        "logLevel": "WARNING",
        "ratePerS": 100_000,
        "rateBurst": 100_000,
        **overrides,
    }
    (tmp / "ingress.json").write_text(json.dumps(config))
    log_path = tmp / "app.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                *command,
                "ingress",
                "serve",
                "--processes",
                "1",
                "--config",
                str(tmp / "ingress.json"),
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    deadline = time.monotonic() + 60
    ready_file = tmp / "ready.json"
    while not ready_file.exists():
        if process.poll() is not None:
            raise AssertionError("ingress exited: " + log_path.read_text()[-2000:])
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("ingress never became ready")
        time.sleep(0.05)
    return IngressProcess(process, json.loads(ready_file.read_text()), log_path)


# ------------------------------------------------------------------ pytest plumbing


@pytest.fixture(scope="module")
def world(
    pg_cluster: ThrowawayPostgres, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with module_world(pg_cluster, migrated_template, tmp_path_factory.mktemp("sec")) as w:
        yield w
