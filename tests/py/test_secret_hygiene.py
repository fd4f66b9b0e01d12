"""R-LEASE-2 / SPEC §5: no plaintext lease token or credential secret anywhere.

A real flow runs through the real ingress process (`qinglong ingress serve`,
audit log to a file, DEBUG app log) against its own PostgreSQL cluster started
with `log_statement=all` and scram-sha-256 passwords (so the database passwords
in the DSNs are searched for too; the ingress reads its DSN from its 0600 config
file, `pg_dump` gets its password from the environment): sessions, offers,
replays, a token conflict, lease ACK/heartbeat/completion and denials with
wrong credentials. Then the data
(`pg_dump --data-only`), the PostgreSQL log and both ingress logs are searched
for every plaintext secret used, raw and encoded (hex of the ASCII, standard
base64 and base64url at every alignment): zero hits. The digests are stored
legitimately (token_digest / secret_digest) and do show up, hex, in the
statement log: the ingress hashes in process, so only digests ever leave it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from qinglong.db import api
from qinglong.service import control_plane
from qinglong.throwaway_postgres import PG_BIN, Auth, ThrowawayPostgres
from tests.py.ingress_harness import (
    CAPABILITIES,
    INGRESS_ROLE,
    PkiSet,
    Reply,
    client_context,
    make_pki,
    post,
)
from tests.py.provision import Provisioner, new_token

STATEMENT_LOGGING = {
    "log_statement": "'all'",
    "log_connections": "on",
    "log_error_verbosity": "'verbose'",
    "log_parameter_max_length": "-1",
    "log_parameter_max_length_on_error": "-1",
    "log_min_error_statement": "'info'",
}


# ------------------------------------------------------------------ encodings


def _base64_variants(secret: bytes) -> set[bytes]:
    """The secret's base64 (standard and url-safe) as it appears inside a longer
    encoded text at each of the 3 byte alignments; edge characters that depend on
    neighbouring bytes are cut off."""
    out: set[bytes] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret)
        # Only characters whose 6 bits all come from the secret: from the first
        # one starting at or after bit 8*shift to the last one ending before its end.
        start, end = -(-8 * shift // 6), 8 * (shift + len(secret)) // 6
        core = encoded[start:end]
        out |= {core, core.replace(b"+", b"-").replace(b"/", b"_")}
    return out


def encodings(secret: str) -> set[bytes]:
    raw = secret.encode("ascii")
    return {raw, raw.hex().encode(), raw.hex().upper().encode(), *_base64_variants(raw)}


def hits(blob: bytes, secrets: dict[str, str]) -> list[str]:
    found = []
    for label, secret in secrets.items():
        for needle in encodings(secret):
            if needle in blob:
                found.append(f"{label}: {needle[:12]!r}…")
    return found


def test_encodings_find_what_they_should() -> None:
    secret = new_token()
    for blob in (
        b"x" + secret.encode() + b"y",
        base64.b64encode(secret.encode() + b"zz"),
        b"\\x" + secret.encode().hex().encode(),
        base64.b64encode(b"ab" + secret.encode() + b"c"),
        base64.urlsafe_b64encode(b"a" + secret.encode()),
    ):
        assert hits(blob, {"s": secret}), blob
    assert hits(b"\\x" + os.urandom(32).hex().encode(), {"s": secret}) == []


# ------------------------------------------------------------------ the flow


@dataclass
class Artifacts:
    secrets: dict[str, str] = field(default_factory=dict)
    replies: list[Reply] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Client:
    port: int
    pki: PkiSet
    cert: Any
    token: str
    worker_id: str
    artifacts: Artifacts

    def send(
        self, path: str, body: dict[str, Any], token: str | None = None, cert: Any | None = None
    ) -> Reply:
        ctx = client_context(self.pki, cert or self.cert)
        reply = post(self.port, path, body, ctx=ctx, token=self.token if token is None else token)
        self.artifacts.replies.append(reply)
        return reply


def _start_ingress(tmp: Path, pki_set: PkiSet, dsn: str) -> tuple[subprocess.Popen[bytes], dict]:
    config = {
        "dsn": dsn,
        "certFile": str(pki_set.server.cert_file),
        "keyFile": str(pki_set.server.key_file),
        "clientCaFile": pki_set.ca_file,
        "port": 0,
        "adminPort": 0,
        "auditLog": str(tmp / "audit.log"),
        "readyFile": str(tmp / "ready.json"),
        "logLevel": "DEBUG",
        "ratePerS": 500,
        "rateBurst": 500,
    }
    fd = os.open(tmp / "ingress.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(config))
    with open(tmp / "app.log", "wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qinglong",
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
        )
    deadline = time.monotonic() + 30
    while not (tmp / "ready.json").exists():
        assert process.poll() is None, (tmp / "app.log").read_text()
        assert time.monotonic() < deadline, "ingress never became ready"
        time.sleep(0.05)
    return process, json.loads((tmp / "ready.json").read_text())


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _body(kind: str, client: Client, session: dict, **extra: Any) -> dict[str, Any]:
    return {
        "schema": f"qinglong/{kind}@v1",
        "workerId": client.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        **extra,
    }


def _lease_flow(a: Client, session: dict, secrets: dict[str, str]) -> None:
    """Two offers, replays, a token conflict, an idle pull, then a full lease life."""
    tokens = [new_token() for _ in range(4)]
    secrets.update({f"lease token {i}": t for i, t in enumerate(tokens)})
    intent = {"offerId": str(uuid.uuid4()), "leaseToken": tokens[0]}
    pull = _body("offer-pull-request", a, session, **intent)
    assert a.send("/v1/offers/pull", pull).json["status"] == "offered"
    assert a.send("/v1/offers/pull", pull).status == 200  # replay
    assert a.send("/v1/offers/pull", dict(pull, leaseToken=tokens[1])).status == 409
    second = _body(
        "offer-pull-request", a, session, offerId=str(uuid.uuid4()), leaseToken=tokens[2]
    )
    assert a.send("/v1/offers/pull", second).json["status"] == "offered"
    idle = _body("offer-pull-request", a, session, offerId=str(uuid.uuid4()), leaseToken=tokens[3])
    assert a.send("/v1/offers/pull", idle).json["status"] == "idle"
    for phase, version in (("starting", 1), ("starting", 1), ("running", 2)):  # + a replay
        ack = _body("lease-ack-request", a, session, **intent, leaseVersion=version, phase=phase)
        assert a.send("/v1/leases/ack", ack).status == 200
    beat = _body("lease-heartbeat-request", a, session, **intent, leaseVersion=3)
    assert a.send("/v1/leases/heartbeat", beat).status == 200
    assert a.send("/v1/leases/heartbeat", dict(beat, leaseToken=tokens[1])).status == 409
    done = _body(
        "lease-complete-request",
        a,
        session,
        **intent,
        leaseVersion=4,
        outcome="succeeded",
        exitCode=0,
    )
    assert a.send("/v1/leases/complete", done).status == 200
    assert a.send("/v1/leases/complete", done).status == 200


def _denials(
    a: Client, b: Client, session: dict, secrets: dict[str, str], prov: Provisioner
) -> None:
    credential_id, secret = a.token[5:21], a.token[22:]
    wrong = ("B" if secret[0] == "A" else "A") + secret[1:]
    stranger = new_token()
    secrets.update({"wrong secret": wrong, "unknown credential secret": stranger})
    pull = _body(
        "offer-pull-request", a, session, offerId=str(uuid.uuid4()), leaseToken=new_token()
    )
    secrets["denied lease token"] = pull["leaseToken"]
    expected = [
        (f"ql3w_{credential_id}_{wrong}", 401),
        (f"ql3w_{'q' * 16}_{stranger}", 401),
        (a.token[:-1], 401),
        ("", 401),
        (b.token, 403),
    ]
    for token, status in expected:
        assert a.send("/v1/offers/pull", pull, token=token).status == status
    assert (
        a.send(
            "/v1/sessions",
            {
                "schema": "qinglong/session-open-request@v1",
                "workerId": b.worker_id,
                "capabilities": CAPABILITIES,
            },
        ).status
        == 403
    )
    prov.call(api.revoke_credential(credential_id=b.token[5:21]))
    b_open = {
        "schema": "qinglong/session-open-request@v1",
        "workerId": b.worker_id,
        "capabilities": CAPABILITIES,
    }
    assert b.send("/v1/sessions", b_open).json["reason"] == "revoked_credential"


def _worker(conn: psycopg.Connection, pki_set: PkiSet, name: str) -> tuple[Any, str]:
    provisioned = control_plane.provision_worker(conn, name, pki_set.ca_dir, pki_set.root / name)
    return provisioned, provisioned.credential_file.read_text().strip()


def _run_flow(tmp: Path, cluster: ThrowawayPostgres, artifacts: Artifacts) -> None:
    from qinglong.db.migrator import migrate

    dsn = cluster.create_database("hygiene")
    migrate(dsn)
    ingress_dsn = cluster.ensure_login_role(INGRESS_ROLE, "ql_worker_ingress", "hygiene")
    artifacts.secrets.update(
        {f"database password of {role}": password for role, password in cluster.passwords.items()}
    )
    pki_set = make_pki(tmp / "pki")
    with psycopg.connect(dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        (wa, token_a), (wb, token_b) = _worker(conn, pki_set, "a"), _worker(conn, pki_set, "b")
        artifacts.secrets.update({"credential a": token_a[22:], "credential b": token_b[22:]})
        prov.enqueue(prov.task("t"), count=2)
        process, ready = _start_ingress(tmp, pki_set, ingress_dsn)
        try:
            port = int(ready["ingressUrl"].rsplit(":", 1)[1])
            a = Client(port, pki_set, wa, token_a, wa.worker_id, artifacts)
            b = Client(port, pki_set, wb, token_b, wb.worker_id, artifacts)
            reply = a.send(
                "/v1/sessions",
                {
                    "schema": "qinglong/session-open-request@v1",
                    "workerId": a.worker_id,
                    "capabilities": CAPABILITIES,
                },
            )
            assert reply.status == 201, reply.body
            _lease_flow(a, reply.json, artifacts.secrets)
            _denials(a, b, reply.json, artifacts.secrets, prov)
        finally:
            _stop(process)
    params = conninfo_to_dict(dsn)
    password = str(params.pop("password"))
    dump = subprocess.run(
        [str(PG_BIN / "pg_dump"), "--data-only", "-d", make_conninfo(**params)],
        capture_output=True,
        check=True,
        timeout=60,
        env=os.environ | {"PGPASSWORD": password},
    )
    artifacts.files.update(
        {
            "pg_dump --data-only": dump.stdout,
            "postgresql log": cluster.log_file.read_bytes(),
            "ingress audit log": (tmp / "audit.log").read_bytes(),
            "ingress app log": (tmp / "app.log").read_bytes(),
            "responses": b"\n".join(r.body + str(r.headers).encode() for r in artifacts.replies),
        }
    )


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artifacts]:
    tmp = tmp_path_factory.mktemp("hygiene")
    cluster = ThrowawayPostgres(settings=dict(STATEMENT_LOGGING), auth=Auth.SCRAM)
    found = Artifacts()
    try:
        cluster.start()
        if cluster.existing_dsn is not None:
            pytest.skip("needs its own cluster (QL_TEST_DSN points at a shared server)")
        _run_flow(tmp, cluster, found)
        yield found
    finally:
        cluster.cleanup()


SOURCES = [
    "pg_dump --data-only",
    "postgresql log",
    "ingress audit log",
    "ingress app log",
    "responses",
]


@pytest.mark.parametrize("source", SOURCES)
def test_no_plaintext_secret_in(artifacts: Artifacts, source: str) -> None:
    blob = artifacts.files[source]
    assert blob, f"{source} is empty: the scan would prove nothing"
    assert hits(blob, artifacts.secrets) == []


def test_the_scanned_sources_really_saw_the_flow(artifacts: Artifacts) -> None:
    """Guards against a vacuous pass: the statement log has every worker call with
    its (digest) parameters, the audit log every decision, the dump the leases."""
    log = artifacts.files["postgresql log"].decode(errors="replace")
    for function in (
        "ql.open_session",
        "ql.pull_offer",
        "ql.ack_lease",
        "ql.heartbeat_lease",
        "ql.complete_lease",
        "ql.record_auth_denial",
    ):
        assert f"SELECT {function}(" in log, function
    assert "parameters: $1 = " in log and "'\\x" in log  # digests, hex, as bytea
    # The database passwords were really used (and so really searched for).
    assert f'identity="{INGRESS_ROLE}" method=scram-sha-256' in log
    audit = [json.loads(line) for line in artifacts.files["ingress audit log"].splitlines()]
    outcomes = {(d["outcome"], d["reason"]) for d in audit}
    assert {
        ("denied", "bad_secret"),
        ("denied", "unknown_credential"),
        ("denied", "revoked_credential"),
        ("denied", "worker_mismatch"),
    } <= outcomes
    dump = artifacts.files["pg_dump --data-only"].decode()
    assert "run_leases" in dump and "security_audit" in dump
    assert len(artifacts.secrets) == 11  # 9 worker-side + 2 database passwords
