"""SPEC §16.2: credentials expire; a worker rotates its own at 75 % of its
lifetime and survives a crash at every step of it.

Real PostgreSQL, a real ingress (mTLS), the real `admin worker create
--credential-ttl`, the real `qinglong worker run` killed with a real SIGKILL at
each rotation point (QL_WORKER_CRASH_AT), then restarted: it authenticates, and
the old credential ends up refused once the new one has been used. The durable
write itself is checked under every power-loss state of the crash harness
(tests/py/crashsim.py): the credential file is always the old token or the new
one, and the new one once the write returned.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.service import pki
from qinglong.worker import credential_rotation as rotation
from tests.py import crashsim, ingress_harness
from tests.py.ingress_harness import IngressThread, PkiSet, client_context, post

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

QL = [sys.executable, "-m", "qinglong"]
POINTS = ("before_rotate", "after_rotate_response", "after_rotate_write", "after_rotate_first_use")


def _create(db_dsn: str, test_pki: PkiSet, out: Path, ttl: str = "1h") -> dict[str, Any]:
    done = subprocess.run(
        [
            *QL,
            "admin",
            "worker",
            "create",
            "--dsn",
            db_dsn,
            "--name",
            out.name,
            "--ca-dir",
            str(test_pki.ca_dir),
            "--out",
            str(out),
            "--credential-ttl",
            ttl,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _make_due(credential_file: str) -> rotation.Lifetime:
    """Pretend the credential was issued long enough ago that 75 % has passed."""
    lifetime = rotation.read_lifetime(credential_file)
    assert lifetime is not None
    now = int(time.time() * 1000)
    aged = rotation.Lifetime(lifetime.credential_id, now - 3 * 3600_000, lifetime.expires_at_ms)
    assert aged.rotate_at_ms <= now
    Path(rotation.lifetime_path(credential_file)).write_text(json.dumps(aged.as_json()))
    return aged


def _config(tmp: Path, created: dict[str, Any], test_pki: PkiSet, port: int) -> Path:
    path = tmp / "worker.json"
    path.write_text(
        json.dumps(
            {
                "ingressUrl": f"https://127.0.0.1:{port}",
                "workerId": created["workerId"],
                "certFile": created["certFile"],
                "keyFile": created["keyFile"],
                "caFile": test_pki.ca_file,
                "credentialFile": created["credentialFile"],
                "journal": str(tmp / "journal"),
                "requestTimeoutS": 2,
                "cadence": {"idlePollMs": 200, "jitterMs": 0},
            }
        )
    )
    return path


def _events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def _run_until(
    config: Path, event: str, timeout_s: float = 40, **env: str
) -> tuple[int, list[dict[str, Any]]]:
    """Run the worker until it logs `event` (then SIGTERM) or dies by itself."""
    proc = subprocess.Popen(
        [*QL, "worker", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=os.environ | env,
    )
    assert proc.stderr is not None
    lines: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    try:
        for raw in proc.stderr:
            if raw.startswith("{"):
                lines.append(json.loads(raw))
            if lines and lines[-1].get("event") == event and not env:
                proc.send_signal(signal.SIGTERM)
            assert time.monotonic() < deadline, [e.get("event") for e in lines]
        return proc.wait(timeout=30), lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token[22:].encode("ascii")).digest()


def _auth(conn: psycopg.Connection, token: str, worker_id: str) -> str:
    answer = (
        api.authenticate_worker(
            credential_id=token[5:21],
            secret_digest=_digest(token),
            worker_id=worker_id,
            action="offer.pull",
        )
        .run(conn)
        .doc
    )
    return str(answer.get("reason", answer["status"]))


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_every_step_of_a_rotation_leaves_the_worker_able_to_authenticate(
    point: str,
    ingress: IngressThread,
    test_pki: PkiSet,
    db_dsn: str,
    tmp_path: Path,
    su_conn: psycopg.Connection,
) -> None:
    created = _create(db_dsn, test_pki, tmp_path / "w")
    credential_file = created["credentialFile"]
    old = Path(credential_file).read_text().strip()
    _make_due(credential_file)
    config = _config(tmp_path, created, test_pki, ingress.port)

    code, _ = _run_until(config, "never", QL_WORKER_CRASH_AT=point)
    assert code == -signal.SIGKILL
    on_disk = Path(credential_file).read_text().strip()
    written = point in ("after_rotate_write", "after_rotate_first_use")
    assert (on_disk != old) is written
    assert _auth(su_conn, old, created["workerId"]) == (
        "expired_credential" if point == "after_rotate_first_use" else "ok"
    )
    assert oct(os.stat(credential_file).st_mode & 0o777) == "0o600"

    # Restarted without a fault: it authenticates (a session), rotating first
    # when the crash left the rotation undone.
    code, lines = _run_until(config, "session.opened" if written else "credential.rotated")
    names = [e.get("event") for e in lines]
    assert code == 0 and "session.opened" in names, names
    assert ("credential.rotated" in names) is (not written), names
    assert not [e for e in lines if e.get("event") == "credential.rotation_failed"]
    final = Path(credential_file).read_text().strip()
    assert final != old
    assert _auth(su_conn, final, created["workerId"]) == "ok"
    # The new credential has been used, so the old one is refused.
    assert _auth(su_conn, old, created["workerId"]) == "expired_credential"
    lifetime = rotation.read_lifetime(credential_file)
    assert lifetime is not None and lifetime.credential_id == final[5:21]
    assert lifetime.expires_at_ms - lifetime.issued_at_ms == 3600_000  # the same lifetime
    assert old[22:] not in json.dumps(lines) and final[22:] not in json.dumps(lines)


def test_expired_credentials_are_refused_and_the_ttl_is_bounded(
    ingress: IngressThread,
    test_pki: PkiSet,
    db_dsn: str,
    tmp_path: Path,
    su_conn: psycopg.Connection,
) -> None:
    created = _create(db_dsn, test_pki, tmp_path / "w", ttl="10s")
    token = Path(created["credentialFile"]).read_text().strip()
    lifetime = rotation.read_lifetime(created["credentialFile"])
    assert lifetime is not None and lifetime.expires_at_ms - lifetime.issued_at_ms == 10_000
    cert = pki.CertFiles(Path(created["certFile"]), Path(created["keyFile"]))
    ctx = client_context(test_pki, cert)
    body = {
        "schema": "qinglong/session-open-request@v1",
        "workerId": created["workerId"],
        "capabilities": ingress_harness.CAPABILITIES,
    }
    assert post(ingress.port, "/v1/sessions", body, ctx=ctx, token=token).status == 201
    su_conn.execute(
        "UPDATE ql_private.worker_credentials SET expires_at = clock_timestamp()"
        " WHERE credential_id = %s",
        (token[5:21],),
    )
    refused = post(ingress.port, "/v1/sessions", body, ctx=ctx, token=token)
    assert (refused.status, refused.json["reason"]) == (401, "expired_credential")
    rotate = {"schema": "qinglong/credential-rotate-request@v1", "workerId": created["workerId"]}
    refused = post(ingress.port, "/v1/credentials/rotate", rotate, ctx=ctx, token=token)
    assert (refused.status, refused.json["reason"]) == (401, "expired_credential")

    for bad in ("9s", "3651d", "soon"):
        done = subprocess.run(
            [
                *QL,
                "admin",
                "worker",
                "create",
                "--dsn",
                db_dsn,
                "--name",
                "x",
                "--ca-dir",
                str(test_pki.ca_dir),
                "--out",
                str(tmp_path / bad),
                "--credential-ttl",
                bad,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (bad, done.stderr)
        assert json.loads(done.stderr)["field"] == "credentialTtlS"


def test_rotate_endpoint_answers_a_new_credential_never_echoing_the_presented_one(
    ingress: IngressThread, test_pki: PkiSet, db_dsn: str, tmp_path: Path
) -> None:
    created = _create(db_dsn, test_pki, tmp_path / "w")
    token = Path(created["credentialFile"]).read_text().strip()
    cert = pki.CertFiles(Path(created["certFile"]), Path(created["keyFile"]))
    ctx = client_context(test_pki, cert)
    rotate = {"schema": "qinglong/credential-rotate-request@v1", "workerId": created["workerId"]}
    reply = post(ingress.port, "/v1/credentials/rotate", rotate, ctx=ctx, token=token)
    assert reply.status == 200, reply.body
    assert reply.headers["Cache-Control"] == "no-store"
    doc = reply.json
    assert doc["schema"] == "qinglong/credential@v1"
    assert list(doc) == [
        "schema",
        "workerId",
        "credentialId",
        "credential",
        "issuedAtMs",
        "expiresAtMs",
        "previousCredentialId",
        "previousExpiresAtMs",
    ]
    assert doc["credential"].startswith(f"ql3w_{doc['credentialId']}_")
    assert doc["previousCredentialId"] == token[5:21] and token[22:] not in reply.body.decode()
    assert doc["previousExpiresAtMs"] <= int(time.time() * 1000) + 24 * 3600_000
    # Another worker's body is refused (the certificate names the worker).
    foreign = dict(rotate, workerId="00000000-0000-4000-8000-000000000000")
    refused = post(ingress.port, "/v1/credentials/rotate", foreign, ctx=ctx, token=token)
    assert (refused.status, refused.json["reason"]) == (403, "identity_mismatch")


# --------------------------------------------------------- the crash harness


def _record(base: str, tokens: list[tuple[str, rotation.Lifetime]]) -> list[crashsim.Call]:
    os.makedirs(base)
    fs = crashsim.RecordingFS(base)
    credential_file = os.path.join(base, "credential")
    for token, lifetime in tokens:
        rotation.write_credential(credential_file, token, lifetime, fs)
    return fs.calls


def test_the_credential_write_survives_every_power_loss_state(tmp_path: Path) -> None:
    old = "ql3w_" + "a" * 16 + "_" + "A" * 43
    new = "ql3w_" + "b" * 16 + "_" + "B" * 43
    old_life = rotation.Lifetime("a" * 16, 1, 10_000)
    new_life = rotation.Lifetime("b" * 16, 2, 20_000)
    first = _record(str(tmp_path / "first"), [(old, old_life)])
    both = _record(str(tmp_path / "both"), [(old, old_life), (new, new_life)])
    assert [c.kind for c in both[: len(first)]] == [c.kind for c in first]
    model = crashsim.DiskModel()
    for call in first:
        model.apply(call)
    states = 0
    for k, call in enumerate(both[len(first) :], start=1):
        model.apply(call)
        for view, label in model.power_views():
            files = dict(view.key())
            token = files.get("credential")
            assert token in (old.encode(), new.encode()), (k, label, token)
            if k == len(both) - len(first):
                assert token == new.encode(), (k, label)  # durable once written
            life = files.get("credential.lifetime.json")
            assert life in (
                json.dumps(old_life.as_json()).encode(),
                json.dumps(new_life.as_json()).encode(),
            ), (k, label)
            states += 1
    assert states > len(both) - len(first)


# ------------------------------------------------------------------ the decision (no sleeping)

DAY_MS = 86_400_000


def _token(credential_id: str) -> str:
    return f"ql3w_{credential_id}_" + "S" * 43


def _rotator(
    tmp_path: Path, token: str, lifetime: rotation.Lifetime | None
) -> rotation.CredentialRotator:
    """A rotator over real files (as `worker run` builds it); it must not post."""
    tmp_path.mkdir(exist_ok=True)
    credential_file = str(tmp_path / "credential")
    rotation.write_credential(credential_file, token, lifetime)

    def no_post(*_args: Any) -> Any:
        raise AssertionError("the decision never posts")

    return rotation.CredentialRotator(
        credential_file, "w", no_post, read_token=lambda: Path(credential_file).read_text()
    )


@pytest.mark.parametrize("ttl_ms", [10_000, 90 * DAY_MS, 3650 * DAY_MS])
def test_rotation_is_due_at_exactly_75_percent_of_the_lifetime(tmp_path: Path, ttl_ms: int) -> None:
    issued = 1_790_000_000_000
    life = rotation.Lifetime("a" * 16, issued, issued + ttl_ms)
    boundary = issued + ttl_ms * 3 // 4
    due = rotation.due_at_ms(life, _token("a" * 16))
    assert due == boundary
    assert not rotation.is_due(due, issued + ttl_ms * 749 // 1000)  # 74.9 %
    assert not rotation.is_due(due, boundary - 1)
    assert rotation.is_due(due, boundary)
    assert rotation.is_due(due, issued + ttl_ms)
    # The same through the files and the rotator the worker runs (clock injected).
    rotator = _rotator(tmp_path, _token("a" * 16), life)
    assert not rotator.due(issued + ttl_ms * 749 // 1000)
    assert not rotator.due(boundary - 1)
    assert rotator.due(boundary)


def test_a_lifetime_naming_another_credential_makes_it_rotate_at_once(tmp_path: Path) -> None:
    """A crash between the credential write and the lifetime write leaves a
    lifetime naming the previous credential: rotate now, not at its 75 %."""
    now = 1_790_000_000_000
    fresh = rotation.Lifetime("a" * 16, now, now + 90 * DAY_MS)
    assert rotation.due_at_ms(fresh, _token("b" * 16)) == 0
    assert rotation.is_due(rotation.due_at_ms(fresh, _token("b" * 16)), now)
    assert not rotation.is_due(rotation.due_at_ms(fresh, _token("a" * 16)), now)
    assert _rotator(tmp_path / "stale", _token("b" * 16), fresh).due(now)
    assert not _rotator(tmp_path / "same", _token("a" * 16), fresh).due(now)
    # Without a lifetime file the worker never rotates by itself.
    assert rotation.due_at_ms(None, _token("a" * 16)) is None
    assert not _rotator(tmp_path / "none", _token("a" * 16), None).due(now + 3650 * DAY_MS)
