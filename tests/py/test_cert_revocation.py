"""SPEC §16.3: `admin worker renew-cert` and `admin cert revoke --serial S`.

A revoked certificate is refused by every ingress process within 5 s (401
certificate_revoked; the processes learn it by NOTIFY and, when a notification
is lost, by their periodic re-read); one audit line per refused connection and
at most one security_audit row per serial and process a minute, however hard a
client retries. A renewed certificate names the same worker and works at once;
the old one keeps working until it is revoked. Real processes, real mTLS, real
PostgreSQL, the real CLI and openssl's own serial format.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.service import pki
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressTree,
    PkiSet,
    client_context,
    make_agent,
    open_body,
    post,
    pull_body,
    start_ingress_tree,
)
from tests.py.provision import Worker

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

REFUSED = (
    401,
    {"schema": "qinglong/error@v1", "error": "unauthorized", "reason": "certificate_revoked"},
)
DENIALS = (
    'qinglong_ingress_auth_decisions_total{action="certificate.admit",'
    'outcome="denied",reason="certificate_revoked"}'
)


def _admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _ok(*args: str) -> dict[str, Any]:
    done = _admin(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _openssl_serial(cert_file: Path) -> str:
    """`serial=0A1B…` exactly as openssl prints it."""
    return subprocess.run(
        ["openssl", "x509", "-serial", "-noout", "-in", str(cert_file)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _agent(
    created: dict[str, Any],
    test_pki: PkiSet,
    cert_file: str | None = None,
    key_file: str | None = None,
) -> Agent:
    token = Path(created["credentialFile"]).read_text().strip()
    credential_id, secret = token[5:21], token[22:]
    cert = pki.CertFiles(
        Path(cert_file or created["certFile"]), Path(key_file or created["keyFile"])
    )
    return Agent(
        Worker(created["workerId"], credential_id, secret), cert, client_context(test_pki, cert)
    )


def _pull(port: int, agent: Agent, session: dict[str, Any]) -> ingress_harness.Reply:
    return post(
        port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )


@pytest.fixture
def tree(tmp_path: Path, test_pki: PkiSet, ingress_dsn: str) -> Iterator[IngressTree]:
    started = start_ingress_tree(tmp_path / "ingress", test_pki, ingress_dsn, processes=2)
    yield started
    started.stop()


def test_renewed_certificate_works_and_a_revoked_one_is_refused_by_every_process(
    tree: IngressTree, test_pki: PkiSet, db_dsn: str, tmp_path: Path, su_conn: psycopg.Connection
) -> None:
    created = _ok(
        "worker",
        "create",
        "--dsn",
        db_dsn,
        "--name",
        "renewing",
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(tmp_path / "w"),
    )
    old = _agent(created, test_pki)
    session = post(tree.port, "/v1/sessions", open_body(old), ctx=old.ctx, token=old.token).json
    assert _pull(tree.port, old, session).status == 200

    renewed = _ok(
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        old.worker_id,
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(tmp_path / "w2"),
    )
    new = _agent(created, test_pki, renewed["certFile"], renewed["keyFile"])
    new_cert = pki.certificate_facts(Path(renewed["certFile"]))
    assert renewed["serial"] == new_cert.serial
    assert renewed["notAfterMs"] == new_cert.not_after_ms
    assert (
        pki.worker_id_from_cert_der(_der(Path(renewed["certFile"]))) == old.worker_id
    )  # the same identity
    assert _pull(tree.port, new, session).status == 200
    assert _pull(tree.port, old, session).status == 200  # the old one until revoked

    serial_text = _openssl_serial(Path(created["certFile"]))  # serial=0A1B...
    old_serial = pki.certificate_facts(Path(created["certFile"])).serial
    colons = ":".join(serial_text[7:][i : i + 2] for i in range(0, len(serial_text) - 7, 2))
    revoked = _ok("cert", "revoke", "--dsn", db_dsn, "--serial", colons.lower())
    revoked_at = time.monotonic()
    assert (revoked["serial"], revoked["workerId"], revoked["revoked"]) == (
        old_serial,
        old.worker_id,
        True,
    )

    refusals = 0
    while time.monotonic() < revoked_at + 8:
        reply = _pull(tree.port, old, session)  # a fresh connection each time
        if reply.status == 200:
            assert time.monotonic() - revoked_at < 5.0, "allowed after 5 s"
            continue
        assert (reply.status, reply.json) == REFUSED
        refusals += 1
        if (
            time.monotonic() > revoked_at + 5.2
            and refusals >= 20
            and all(tree.metric_at(url, DENIALS) > 0 for url in tree.admin_urls)
        ):
            break
    assert [tree.metric_at(url, DENIALS) > 0 for url in tree.admin_urls] == [True, True], (
        "every process refuses the revoked certificate"
    )
    assert sum(tree.metric_at(url, DENIALS) for url in tree.admin_urls) == refusals
    # Again by openssl's own spelling: already revoked, nothing changes.
    again = _ok("cert", "revoke", "--dsn", db_dsn, "--serial", serial_text)
    assert (again["serial"], again["revoked"]) == (old_serial, False)

    # The renewed certificate of the same worker is not affected.
    assert _pull(tree.port, new, session).status == 200
    # One audit line per refused connection; security_audit at most one row per
    # serial and process (two processes), not one per request.
    lines = [
        json.loads(line)
        for line in (tree.home / "audit.log").read_text().splitlines()
        if '"certificate_revoked"' in line
    ]
    assert len(lines) == refusals
    assert {(line["workerId"], line["outcome"]) for line in lines} == {(old.worker_id, "denied")}
    stored = su_conn.execute(
        "SELECT count(*) FROM ql_private.security_audit WHERE reason = 'certificate_revoked'"
        " AND worker_id = %s::uuid",
        (old.worker_id,),
    ).fetchone()[0]
    assert 1 <= stored <= 2
    events = su_conn.execute(
        "SELECT type, payload->>'serial' FROM ql_private.events WHERE worker_id = %s::uuid"
        " AND type LIKE 'worker.certificate%%' ORDER BY id",
        (old.worker_id,),
    ).fetchall()
    assert [tuple(e) for e in events] == [
        ("worker.certificate_issued", old_serial),
        ("worker.certificate_issued", new_cert.serial),
        ("worker.certificate_revoked", old_serial),
    ]


def _der(cert_file: Path) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(cert_file.read_bytes()).public_bytes(Encoding.DER)


def test_a_lost_notification_still_refuses_within_5_s_and_retries_store_one_row(
    ingress: Any, prov: Any, test_pki: PkiSet, su_conn: psycopg.Connection
) -> None:
    agent = make_agent(prov, test_pki, "unnotified")
    session = post(
        ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
    ).json
    assert _pull(ingress.port, agent, session).status == 200
    serial = pki.certificate_facts(agent.cert.cert_file).serial
    # Revoked behind the ingress's back: no NOTIFY, only the periodic re-read finds it.
    su_conn.execute(
        "INSERT INTO ql_private.certificate_revocations (serial, revoked_by) VALUES (%s, 'test')",
        (serial,),
    )
    revoked_at = time.monotonic()
    while (reply := _pull(ingress.port, agent, session)).status == 200:
        assert time.monotonic() - revoked_at < 5.0, "allowed after 5 s"
        time.sleep(0.1)
    assert (reply.status, reply.json) == REFUSED
    assert reply.headers["Connection"] == "close"  # each retry costs a handshake
    for _ in range(60):
        assert (lambda r: (r.status, r.json))(_pull(ingress.port, agent, session)) == REFUSED
    stored = su_conn.execute(
        "SELECT count(*) FROM ql_private.security_audit WHERE reason = 'certificate_revoked'"
    ).fetchone()[0]
    assert stored == 1  # 61 refusals, one row
    assert (
        ingress.metrics.auth_decisions.value("certificate.admit", "denied", "certificate_revoked")
        == 61
    )


def test_cli_refuses_bad_serials_existing_files_and_unknown_workers(
    db_dsn: str, test_pki: PkiSet, tmp_path: Path, su_conn: psycopg.Connection
) -> None:
    for bad in ("xyz", "", "serial=", "ab" * 21):
        done = _admin("cert", "revoke", "--dsn", db_dsn, "--serial", bad)
        assert done.returncode == 2, (bad, done.stderr)
        assert json.loads(done.stderr)["field"] == "serial"
    assert (
        su_conn.execute("SELECT count(*) FROM ql_private.certificate_revocations").fetchone()[0]
        == 0
    )

    created = _ok(
        "worker",
        "create",
        "--dsn",
        db_dsn,
        "--name",
        "w",
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(tmp_path / "w"),
    )
    into_old = _admin(
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        created["workerId"],
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(tmp_path / "w"),
    )
    assert into_old.returncode == 1
    assert json.loads(into_old.stderr)["reason"] == "files_exist"
    assert (
        pki.certificate_facts(Path(created["certFile"])).serial
        == su_conn.execute(
            "SELECT serial FROM ql_private.worker_certificates WHERE worker_id = %s::uuid",
            (created["workerId"],),
        ).fetchone()[0]
    )  # untouched, and recorded at create

    unknown = _admin(
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        "00000000-0000-4000-8000-000000000000",
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(tmp_path / "nobody"),
    )
    assert unknown.returncode == 1
    assert json.loads(unknown.stderr)["error"] == "not_found"
    assert not list((tmp_path / "nobody").glob("*.pem"))  # nothing left behind


def test_a_kept_alive_connection_is_refused_once_its_certificate_is_revoked(
    ingress: Any, prov: Any, test_pki: PkiSet, db_dsn: str
) -> None:
    import http.client

    agent = make_agent(prov, test_pki, "kept-alive")
    session = post(
        ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
    ).json
    conn = http.client.HTTPSConnection("127.0.0.1", ingress.port, context=agent.ctx, timeout=15)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {agent.token}"}

    def pull() -> http.client.HTTPResponse:
        conn.request(
            "POST", "/v1/offers/pull", body=json.dumps(pull_body(agent, session)), headers=headers
        )
        response = conn.getresponse()
        response.read()
        return response

    try:
        assert pull().status == 200
        sock = conn.sock  # the connection made before the revocation
        _ok(
            "cert",
            "revoke",
            "--dsn",
            db_dsn,
            "--serial",
            _openssl_serial(agent.cert.cert_file).lower(),
        )
        revoked_at = time.monotonic()
        while (reply := pull()).status == 200:
            assert conn.sock is sock, "the ingress closed the connection before refusing"
            assert time.monotonic() - revoked_at < 5.0, "allowed after 5 s"
            time.sleep(0.05)
        assert reply.status == 401 and reply.getheader("Connection") == "close"
    finally:
        conn.close()
