"""Secrets (SPEC §14.1-14.3) over real mTLS against real PostgreSQL: stored only
encrypted (a dump of the database reveals neither a value nor a data key),
delivered by POST /v1/leases/secrets only to a live started lease of an active
session whose worker holds the run's pool, at the lease's version (unchanged);
409 with the category otherwise; 503 secrets_unavailable without a usable KEK.
No value reaches an audit line, a log line or an error answer.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.schemas.contract import validate
from qinglong.service import secret_store
from qinglong.service.secrets_crypto import (
    Kek,
    SecretsError,
    SecretsReason,
    WrappedKey,
    create_kek_file,
    load_kek,
    unwrap,
)
from qinglong.throwaway_postgres import PG_BIN
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressThread,
    Reply,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
    snapshot,
)
from tests.py.provision import command, new_token

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

SECRETS = "/v1/leases/secrets"
DB_PASSWORD = b"correct horse battery staple"
API_TOKEN = b"tok_4f9a1c2e7b3d5e6f"


@pytest.fixture
def kek(tmp_path: Path) -> tuple[Path, Kek]:
    path = tmp_path / "kek.key"
    return path, create_kek_file(path)


@pytest.fixture
def ingress(start_ingress_thread, test_pki, ingress_dsn, kek) -> IngressThread:
    return start_ingress_thread(ingress_config(test_pki, ingress_dsn, kek_file=str(kek[0])))


@pytest.fixture
def task(su_conn: psycopg.Connection, prov, kek) -> str:
    secret_store.set_secret(su_conn, kek[1], "p", "db.password", DB_PASSWORD)
    secret_store.set_secret(su_conn, kek[1], "p", "api-token", API_TOKEN)
    doc = dict(
        command(), env={"PLAIN": "x"}, secrets={"DB_PASSWORD": "db.password", "TOKEN": "api-token"}
    )
    return prov.task("t", doc)


class Lease:
    """One claimed lease of the secrets task, driven through the real ingress."""

    def __init__(self, server: IngressThread, agent: Agent, prov, task: str) -> None:
        self.server, self.agent = server, agent
        reply = self.post("/v1/sessions", open_body(agent))
        assert reply.status == 201, reply.body
        self.session = reply.json
        prov.enqueue(task, count=1)
        self.pull = pull_body(agent, self.session)
        reply = self.post("/v1/offers/pull", self.pull)
        assert reply.status == 200 and reply.json["status"] == "offered", reply.body
        self.offer = reply.json
        self.version: int = self.offer["lease"]["leaseVersion"]

    def post(self, path: str, body: dict[str, Any], agent: Agent | None = None) -> Reply:
        agent = agent or self.agent
        return post(self.server.port, path, body, ctx=agent.ctx, token=agent.token)

    def body(self, kind: str, **extra: Any) -> dict[str, Any]:
        return {
            "schema": f"qinglong/lease-{kind}-request@v1",
            "workerId": self.agent.worker_id,
            "sessionId": self.session["sessionId"],
            "generation": self.session["generation"],
            "offerId": self.pull["offerId"],
            "leaseToken": self.pull["leaseToken"],
            "leaseVersion": self.version,
            **extra,
        }

    def ack(self, phase: str) -> Reply:
        reply = self.post("/v1/leases/ack", self.body("ack", phase=phase))
        assert reply.status == 200, reply.body
        self.version = reply.json["leaseVersion"]
        return reply

    def secrets(self, agent: Agent | None = None, **extra: Any) -> Reply:
        return self.post(SECRETS, self.body("secrets", **extra), agent)


def _conflict(reply: Reply, reason: str) -> None:
    assert (reply.status, reply.json) == (
        409,
        {"schema": "qinglong/error@v1", "error": "conflict", "reason": reason},
    )


def _deliveries(su_conn: psycopg.Connection) -> list[Any]:
    return [
        row[0]
        for row in su_conn.execute(
            "SELECT detail FROM ql_private.security_audit"
            " WHERE action = 'lease.secrets' AND outcome = 'allowed' ORDER BY id"
        )
    ]


def _no_value_in(*texts: str) -> None:
    for value in (DB_PASSWORD, API_TOKEN):
        assert not [t for t in texts if value.decode() in t]


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record with its structured extras (the JSON log's fields)."""
    return "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)


@pytest.fixture
def lease(ingress, prov, test_pki, task) -> Lease:
    return Lease(ingress, make_agent(prov, test_pki, "worker-a"), prov, task)


def test_values_only_after_the_starting_ack(lease, su_conn, caplog):
    caplog.set_level(logging.DEBUG)
    before = snapshot(su_conn)
    _conflict(lease.secrets(), "not_started")
    assert snapshot(su_conn) == before, "a refused delivery writes nothing"

    lease.ack("starting")
    version = lease.version
    reply = lease.secrets()
    assert reply.status == 200, reply.body
    validate("qinglong/lease-secrets@v1", reply.json)
    assert reply.json == {
        "schema": "qinglong/lease-secrets@v1",
        "values": {"DB_PASSWORD": DB_PASSWORD.decode(), "TOKEN": API_TOKEN.decode()},
    }
    # The lease version is not changed: the next call at the same version works.
    row = su_conn.execute("SELECT lease_version FROM ql_private.run_leases").fetchone()
    assert row == (version,)
    assert lease.ack("running").json["leaseVersion"] == version + 1
    assert lease.secrets().status == 200
    # Audited by name, twice; never a value anywhere but the answer.
    run_id = lease.offer["candidate"]["runId"]
    assert (
        _deliveries(su_conn)
        == [
            {
                "runId": run_id,
                "offerId": lease.pull["offerId"],
                "names": ["api-token", "db.password"],
            }
        ]
        * 2
    )
    audit = "\n".join(lease.server.audit_lines)
    assert '"action": "lease.secrets"' in audit or '"action":"lease.secrets"' in audit
    events = su_conn.execute(
        "SELECT coalesce(string_agg(payload::text, ' '), '') FROM ql_private.events"
    ).fetchone()
    _no_value_in(
        audit,
        _log_text(caplog),
        str(events),
        str(
            su_conn.execute(
                "SELECT array_agg(detail::text) FROM ql_private.security_audit"
            ).fetchone()
        ),
    )


def test_fences_answer_409_and_change_nothing(lease, ingress, prov, test_pki, su_conn):
    lease.ack("starting")
    other = make_agent(prov, test_pki, "worker-b")
    reply = post(ingress.port, "/v1/sessions", open_body(other), ctx=other.ctx, token=other.token)
    assert reply.status == 201
    other_body = dict(
        lease.body("secrets"), workerId=other.worker_id, sessionId=reply.json["sessionId"]
    )
    before = snapshot(su_conn)
    _conflict(
        post(ingress.port, SECRETS, other_body, ctx=other.ctx, token=other.token), "offer_foreign"
    )
    _conflict(lease.secrets(leaseVersion=lease.version - 1), "stale_lease_version")
    _conflict(lease.secrets(leaseToken=new_token()), "token_mismatch")
    assert snapshot(su_conn) == before

    # The worker no longer holds the run's pool: a started lease may finish, but
    # gets no secret.
    prov.call(api.revoke_pool(worker_id=lease.agent.worker_id, pool="*"))
    _conflict(lease.secrets(), "pool_revoked")
    prov.call(api.grant_pool(worker_id=lease.agent.worker_id, pool="p/default"))
    assert lease.secrets().status == 200

    su_conn.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 second'"
    )
    _conflict(lease.secrets(), "lease_expired")
    assert len(_deliveries(su_conn)) == 1


def test_released_lease_and_ended_session(ingress, prov, test_pki, task, su_conn):
    done = Lease(ingress, make_agent(prov, test_pki, "worker-a"), prov, task)
    done.ack("starting")
    done.ack("running")
    reply = done.post("/v1/leases/complete", done.body("complete", outcome="succeeded", exitCode=0))
    assert reply.status == 200, reply.body
    done.version = reply.json["leaseVersion"]
    _conflict(done.secrets(), "lease_terminal")

    ended = Lease(ingress, make_agent(prov, test_pki, "worker-b"), prov, task)
    ended.ack("starting")
    prov.call(api.end_session(session_id=ended.session["sessionId"]))
    _conflict(ended.secrets(), "session_replaced")
    assert _deliveries(su_conn) == []


def test_without_a_kek_the_endpoint_answers_503(
    start_ingress_thread, test_pki, ingress_dsn, prov, task, su_conn
):
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn))
    lease = Lease(server, make_agent(prov, test_pki, "worker-a"), prov, task)
    lease.ack("starting")
    reply = lease.secrets()
    assert reply.status == 503 and reply.json["reason"] == "secrets_unavailable", reply.body
    assert reply.headers["Retry-After"]
    assert _deliveries(su_conn) == []


def test_a_wrong_kek_answers_503_without_a_value(
    start_ingress_thread, test_pki, ingress_dsn, prov, task, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    create_kek_file(tmp_path / "other.key")
    server = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, kek_file=str(tmp_path / "other.key"))
    )
    lease = Lease(server, make_agent(prov, test_pki, "worker-a"), prov, task)
    lease.ack("starting")
    reply = lease.secrets()
    assert reply.status == 503 and reply.json["reason"] == "secrets_unavailable", reply.body
    logged = _log_text(caplog)
    assert "kek_mismatch" in logged
    _no_value_in(reply.body.decode(), logged, "\n".join(server.audit_lines))


def test_the_ingress_refuses_a_kek_file_others_can_read(test_pki, ingress_dsn, kek):
    from qinglong.service.app import build_state
    from qinglong.service.audit import AuditLog

    os.chmod(kek[0], 0o640)
    config = ingress_config(test_pki, ingress_dsn, kek_file=str(kek[0]))
    with pytest.raises(SecretsError) as caught:
        build_state(config, AuditLog(lambda line: None))
    assert caught.value.reason is SecretsReason.KEK_PERMISSIONS
    assert "chmod 600" in str(caught.value)


def test_the_ingress_follows_a_symlinked_kek_file_and_refuses_an_unreadable_one(
        test_pki, ingress_dsn, kek, tmp_path):  # fmt: skip
    """The target's mode is checked (a link to a 0644 file is refused); a directory
    or a dangling link is `kek_unreadable`: the ingress does not start."""
    from qinglong.service.app import build_state
    from qinglong.service.audit import AuditLog

    def refused(path: Path) -> SecretsReason:
        config = ingress_config(test_pki, ingress_dsn, kek_file=str(path))
        with pytest.raises(SecretsError) as caught:
            build_state(config, AuditLog(lambda line: None))
        return caught.value.reason

    link = tmp_path / "kek-link.key"
    link.symlink_to(kek[0])
    os.chmod(kek[0], 0o644)
    assert refused(link) is SecretsReason.KEK_PERMISSIONS
    directory = tmp_path / "kek-dir"
    directory.mkdir(mode=0o700)
    dangling = tmp_path / "dangling.key"
    dangling.symlink_to(tmp_path / "missing.key")
    assert refused(directory) is SecretsReason.KEK_UNREADABLE
    assert refused(dangling) is SecretsReason.KEK_UNREADABLE


def test_a_database_dump_reveals_no_value_and_no_data_key(db_dsn, su_conn, task, kek):
    stored = su_conn.execute(
        "SELECT key_id, kek_id, nonce, wrapped_key FROM ql_private.project_data_keys"
    ).fetchone()
    assert stored is not None
    data_key = unwrap(kek[1], WrappedKey(stored[0], stored[1], bytes(stored[2]), bytes(stored[3])))
    dump = subprocess.run(
        [str(PG_BIN / "pg_dump"), "-d", db_dsn], capture_output=True, check=True, timeout=60
    ).stdout
    assert b"project_data_keys" in dump and bytes(stored[3]).hex().encode() in dump
    for plain in (DB_PASSWORD, API_TOKEN, data_key.key, kek[1].key):
        for form in (plain, plain.hex().encode()):
            assert form not in dump
    assert load_kek(kek[0]).key not in dump


# ------------------------------------------------------------------ ciphertext binding


def _integrity_refused(lease: Lease, caplog: pytest.LogCaptureFixture) -> None:
    """503 secrets_unavailable, logged as `secret_integrity`, and no value anywhere."""
    caplog.clear()
    reply = lease.secrets()
    assert (reply.status, reply.json.get("reason")) == (503, "secrets_unavailable"), reply.body
    assert reply.headers["Retry-After"]
    reasons = [r.__dict__.get("reason") for r in caplog.records
               if r.__dict__.get("event") == "secrets.unavailable"]  # fmt: skip
    assert reasons == ["secret_integrity"]
    _no_value_in(reply.body.decode(), _log_text(caplog), "\n".join(lease.server.audit_lines))


def _flip_first_byte(data: bytes) -> bytes:
    return bytes([data[0] ^ 0x01]) + data[1:]


def test_an_edited_or_moved_ciphertext_or_wrap_is_refused(lease, su_conn, caplog):
    """A superuser's edit of the stored bytes never yields a wrong value: a flipped
    ciphertext byte, two secrets' (nonce, ciphertext) swapped between their rows,
    and a flipped byte of the wrapped data key each answer 503 `secret_integrity`;
    the untouched rows deliver again once restored."""
    caplog.set_level(logging.DEBUG)
    lease.ack("starting")
    good = lease.secrets()
    assert good.status == 200, good.body
    rows = {
        name: (bytes(nonce), bytes(ciphertext))
        for name, nonce, ciphertext in su_conn.execute(
            "SELECT name, nonce, ciphertext FROM ql_private.secrets"
        )
    }
    wrap = bytes(su_conn.execute("SELECT wrapped_key FROM ql_private.project_data_keys")
                 .fetchone()[0])  # fmt: skip

    def store(name: str, nonce: bytes, ciphertext: bytes) -> None:
        su_conn.execute("UPDATE ql_private.secrets SET nonce = %s, ciphertext = %s"
                        " WHERE name = %s", (nonce, ciphertext, name))  # fmt: skip

    def restore() -> None:
        for name, (nonce, ciphertext) in rows.items():
            store(name, nonce, ciphertext)
        su_conn.execute("UPDATE ql_private.project_data_keys SET wrapped_key = %s", (wrap,))
        assert lease.secrets().json == good.json

    nonce, ciphertext = rows["db.password"]
    store("db.password", nonce, _flip_first_byte(ciphertext))
    _integrity_refused(lease, caplog)
    restore()

    # Moved between names: each row now holds the other's valid (nonce, ciphertext).
    store("db.password", *rows["api-token"])
    store("api-token", *rows["db.password"])
    _integrity_refused(lease, caplog)
    restore()

    su_conn.execute("UPDATE ql_private.project_data_keys SET wrapped_key = %s",
                    (_flip_first_byte(wrap),))  # fmt: skip
    _integrity_refused(lease, caplog)
    restore()


# ------------------------------------------------------------------ KEK rotation, live


def test_a_running_ingress_reads_its_kek_file_again_after_rotate_kek(
    lease, db_dsn, kek, tmp_path, caplog
):
    """OPERATIONS.md: `admin secret rotate-kek`, then the ingress's kekFile replaced
    at the same path: the next delivery succeeds without restarting the ingress
    (before the file is replaced it answers 503 `kek_mismatch`)."""
    caplog.set_level(logging.DEBUG)
    lease.ack("starting")
    before = lease.secrets()
    assert before.status == 200, before.body
    new_file = tmp_path / "new-kek.key"
    rotated = subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", "secret", "rotate-kek", "--dsn", db_dsn,
         "--kek-file", str(kek[0]), "--new-kek-file", str(new_file)],
        capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert rotated.returncode == 0, rotated.stderr
    doc = json.loads(rotated.stdout)
    assert (doc["oldKekId"], doc["rewrapped"]) == (kek[1].kek_id, 1)

    stale = lease.secrets()  # the ingress still holds the old file: it cannot unwrap
    assert (stale.status, stale.json["reason"]) == (503, "secrets_unavailable")
    assert "kek_mismatch" in _log_text(caplog)

    os.replace(new_file, kek[0])  # the file at the configured path now holds the new KEK
    after = lease.secrets()
    assert after.status == 200, after.body
    assert after.json == before.json
