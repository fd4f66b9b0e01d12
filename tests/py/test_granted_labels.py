"""Granted labels (SPEC §13.2) through the real ingress (TLS, mTLS, the database)
and the real `qinglong admin` CLI: a session may declare only the labels an
operator granted its worker (same key, same value, byte for byte), else 403
`label_not_granted` naming the key, with nothing written but the denial's
security_audit row; a self-labels worker declares what it likes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.schemas.contract import validate
from qinglong.service import control_plane
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    CAPABILITIES,
    Agent,
    client_context,
    post,
    snapshot,
)
from tests.py.provision import Provisioner, Worker
from tests.py.test_admin_cli import admin, fails, ok

# Shared fixtures (pytest collects them through these module names).
ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _agent(
    prov: Provisioner, test_pki: ingress_harness.PkiSet, name: str, self_labels: bool
) -> Agent:
    worker = prov.worker(name, self_labels=self_labels)
    cert = test_pki.worker_cert(worker.worker_id, name=name)
    return Agent(worker, cert, client_context(test_pki, cert))


@pytest.fixture
def banker(
    prov: Provisioner, test_pki: ingress_harness.PkiSet, su_conn: psycopg.Connection
) -> Agent:
    """A worker granted tenant=bank and zone=z1, without self-labels."""
    agent = _agent(prov, test_pki, "banker", self_labels=False)
    control_plane.run(
        su_conn,
        api.label_worker(worker_id=agent.worker_id, labels={"tenant": "bank", "zone": "z1"}),
    )
    return agent


def _open(ingress: Any, agent: Agent, labels: dict[str, str]) -> Any:
    body = {
        "schema": "qinglong/session-open-request@v1",
        "workerId": agent.worker_id,
        "capabilities": {**CAPABILITIES, "labels": labels},
    }
    return post(ingress.port, "/v1/sessions", body, ctx=agent.ctx, token=agent.token)


def _sessions(conn: psycopg.Connection, worker_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM ql_private.worker_sessions WHERE worker_id = %s", (worker_id,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _denials(conn: psycopg.Connection, worker_id: str) -> list[tuple[str, str, str]]:
    return [
        tuple(r)
        for r in conn.execute(
            "SELECT action, outcome, reason FROM ql_private.security_audit"
            " WHERE worker_id = %s ORDER BY id",
            (worker_id,),
        ).fetchall()
    ]


def _refused(reply: Any, key: str) -> None:
    assert reply.status == 403, reply.body
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "forbidden",
        "reason": "label_not_granted",
        "detail": {"key": key},
    }
    validate("qinglong/error@v1", reply.json)


@pytest.mark.parametrize(
    "labels, key",
    [
        ({"tenant": "corp"}, "tenant"),  # another value
        ({"tenant": "Bank"}, "tenant"),  # a case variant of the value
        ({"tenant": "bank "}, "tenant"),  # a whitespace variant of the value
        ({"tenant.": "bank"}, "tenant."),  # a variant of the key
        ({"gpu": "yes", "tenant": "bank"}, "gpu"),  # one ungranted label among granted
    ],
)
def test_an_ungranted_label_is_403_naming_the_key_and_writes_nothing(
    ingress: Any, banker: Agent, su_conn: psycopg.Connection, labels: dict[str, str], key: str
) -> None:
    before = snapshot(su_conn)
    _refused(_open(ingress, banker, labels), key)
    after = snapshot(su_conn)
    assert after.tables == before.tables  # no session row, nothing else either
    assert _sessions(su_conn, banker.worker_id) == 0
    # The denial itself is stored like every denial (no label value in it).
    assert after.audit_rows == before.audit_rows + 1
    assert _denials(su_conn, banker.worker_id) == [("session.open", "denied", "label_not_granted")]


def test_a_granted_subset_opens(ingress: Any, banker: Agent, su_conn: psycopg.Connection) -> None:
    for labels in ({"tenant": "bank"}, {"tenant": "bank", "zone": "z1"}, {}):
        reply = _open(ingress, banker, labels)
        assert reply.status == 201, (labels, reply.body)
    assert _sessions(su_conn, banker.worker_id) == 3


def test_a_refused_open_leaves_the_open_session_alone(
    ingress: Any, banker: Agent, su_conn: psycopg.Connection
) -> None:
    first = _open(ingress, banker, {"tenant": "bank"})
    assert first.status == 201
    _refused(_open(ingress, banker, {"tenant": "corp"}), "tenant")
    state = su_conn.execute(
        "SELECT state FROM ql_private.worker_sessions WHERE session_id = %s",
        (first.json["sessionId"],),
    ).fetchone()
    assert state == ("active",)


def test_a_self_labels_worker_declares_what_it_likes(
    ingress: Any, prov: Provisioner, test_pki: ingress_harness.PkiSet
) -> None:
    agent = _agent(prov, test_pki, "trusted", self_labels=True)
    assert _open(ingress, agent, {"tenant": "bank", "gpu": "yes"}).status == 201


def test_a_worker_without_grants_opens_only_without_labels(
    ingress: Any, prov: Provisioner, test_pki: ingress_harness.PkiSet
) -> None:
    agent = _agent(prov, test_pki, "plain", self_labels=False)
    _refused(_open(ingress, agent, {"tenant": "bank"}), "tenant")
    assert _open(ingress, agent, {}).status == 201


# ------------------------------------------------------------------ the CLI


def _cli_agent(created: dict[str, Any], test_pki: ingress_harness.PkiSet) -> Agent:
    from qinglong.service import pki

    token = Path(created["credentialFile"]).read_text().strip()
    _, credential_id, secret = token.split("_", 2)
    cert = pki.CertFiles(Path(created["certFile"]), Path(created["keyFile"]))
    worker = Worker(created["workerId"], credential_id, secret)
    return Agent(worker, cert, client_context(test_pki, cert))


def _create(dsn: str, test_pki: ingress_harness.PkiSet, out: Path, *flags: str) -> Agent:
    created = ok(
        "worker",
        "create",
        "--dsn",
        dsn,
        "--name",
        out.name,
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(out),
        *flags,
    )
    return _cli_agent(created, test_pki)


def test_admin_worker_create_label(
    ingress: Any,
    db_dsn: str,
    tmp_path: Path,
    test_pki: ingress_harness.PkiSet,
    su_conn: psycopg.Connection,
) -> None:
    agent = _create(db_dsn, test_pki, tmp_path / "bank-1", "--label", "tenant=bank")
    assert _open(ingress, agent, {"tenant": "bank"}).status == 201
    _refused(_open(ingress, agent, {"tenant": "Bank"}), "tenant")
    _refused(_open(ingress, agent, {"tenant": "corp"}), "tenant")
    listed = {w["workerId"]: w for w in ok("worker", "list", "--dsn", db_dsn)["workers"]}
    assert (listed[agent.worker_id]["grantedLabels"], listed[agent.worker_id]["selfLabels"]) == (
        {"tenant": "bank"},
        False,
    )


def test_admin_worker_create_self_labels(
    ingress: Any, db_dsn: str, tmp_path: Path, test_pki: ingress_harness.PkiSet
) -> None:
    agent = _create(db_dsn, test_pki, tmp_path / "dev-1", "--self-labels")
    assert _open(ingress, agent, {"tenant": "anything"}).status == 201
    listed = {w["workerId"]: w for w in ok("worker", "list", "--dsn", db_dsn)["workers"]}
    assert (listed[agent.worker_id]["grantedLabels"], listed[agent.worker_id]["selfLabels"]) == (
        {},
        True,
    )


@pytest.mark.parametrize(
    "label, field, reason",
    [
        ("Tenant=bank", "labels", "invalid_input"),  # upper-case key
        ("tenant", "labels", "invalid_input"),  # no '='
        ("tenant=", "labels", "invalid_input"),  # empty value
        ("tenant=a\u200bb", "labels", "invalid_input"),  # invisible character
        ("tenant=" + "x" * 129, "labels", "limit_exceeded"),
    ],
)
def test_admin_worker_create_refuses_a_bad_label(
    db_dsn: str,
    tmp_path: Path,
    test_pki: ingress_harness.PkiSet,
    su_conn: psycopg.Connection,
    label: str,
    field: str,
    reason: str,
) -> None:
    out = tmp_path / "bad"
    doc = fails(
        "worker",
        "create",
        "--dsn",
        db_dsn,
        "--name",
        "bad",
        "--ca-dir",
        str(test_pki.ca_dir),
        "--out",
        str(out),
        "--label",
        label,
    )
    assert (doc["field"], doc["reason"]) == (field, reason)
    assert su_conn.execute("SELECT count(*) FROM ql_private.workers").fetchone() == (0,)
    assert not out.exists()


def test_admin_worker_label_grants_removes_and_drains(
    ingress: Any,
    db_dsn: str,
    tmp_path: Path,
    test_pki: ingress_harness.PkiSet,
    su_conn: psycopg.Connection,
) -> None:
    agent = _create(db_dsn, test_pki, tmp_path / "edge", "--label", "tenant=bank")
    worker = agent.worker_id
    assert ok("worker", "label", "--dsn", db_dsn, "--worker", worker)["labels"] == {
        "tenant": "bank"
    }  # no flags: prints the grants
    granted = ok(
        "worker",
        "label",
        "--dsn",
        db_dsn,
        "--worker",
        worker,
        "--label",
        "zone=z1",
        "--label",
        "tenant=bank",
    )
    assert granted == {
        "workerId": worker,
        "labels": {"tenant": "bank", "zone": "z1"},
        "selfLabels": False,
        "sessionsDraining": 0,
        "leasesReleased": 0,
    }
    session = _open(ingress, agent, {"tenant": "bank", "zone": "z1"})
    assert session.status == 201

    before = snapshot(su_conn)
    for args, field in (
        (("--remove", "Zone"), "remove"),
        (("--label", "zone=z2", "--remove", "zone"), "remove"),
        (("--label", "a=b", "--label", "a=c"), "labels"),
        (("--self-labels", "yes"), "selfLabels"),
    ):
        assert (
            fails("worker", "label", "--dsn", db_dsn, "--worker", worker, *args)["field"] == field
        )
    assert fails("worker", "label", "--dsn", db_dsn, "--worker", "nope")["field"] == "workerId"
    assert snapshot(su_conn) == before

    removed = ok("worker", "label", "--dsn", db_dsn, "--worker", worker, "--remove", "zone")
    assert (removed["labels"], removed["sessionsDraining"]) == ({"tenant": "bank"}, 1)
    state = su_conn.execute(
        "SELECT state FROM ql_private.worker_sessions WHERE session_id = %s",
        (session.json["sessionId"],),
    ).fetchone()
    assert state == ("closed",)  # drained; running nothing, it closed at once
    _refused(_open(ingress, agent, {"tenant": "bank", "zone": "z1"}), "zone")
    assert _open(ingress, agent, {"tenant": "bank"}).status == 201

    on = ok("worker", "label", "--dsn", db_dsn, "--worker", worker, "--self-labels", "true")
    assert on["selfLabels"] is True
    assert _open(ingress, agent, {"zone": "anything"}).status == 201
    events = [
        row[0]
        for row in su_conn.execute(
            "SELECT payload FROM ql_private.events"
            " WHERE type = 'worker.labels_changed' AND worker_id = %s ORDER BY id",
            (worker,),
        )
    ]
    assert [(e["granted"], e["removed"], e["selfLabels"]) for e in events] == [
        (["tenant"], [], False),
        (["zone"], [], False),
        ([], ["zone"], False),
        ([], [], True),
    ]
    assert "bank" not in json.dumps(events) and "z1" not in json.dumps(events)  # keys only


def test_admin_worker_label_help_names_the_flags() -> None:
    result = admin("worker", "label", "--help")
    assert result.returncode == 0
    for flag in ("--worker", "--label", "--remove", "--self-labels"):
        assert flag in result.stdout
