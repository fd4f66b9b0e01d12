"""Migration 0005: which committed changes notify `ql_dispatch`, and which never do.

A real LISTEN connection watches while each path runs through the public SQL API
(as the control plane and the ingress call it): enqueue, retry, requeue after
a lease expired unstarted, session replace/close, revocation notify; a claim, a
session heartbeat, an idle pull and the probe never do. Also: the probe writes
no WAL.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from qinglong.db import api
from tests.py.provision import Intent, Provisioner, new_token


@pytest.fixture
def su(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def listener(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("LISTEN ql_dispatch")
        yield conn


def _drain(conn: psycopg.Connection, wait: float = 0.3) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=wait)]


def _intent() -> Intent:
    return Intent(str(uuid.uuid4()), new_token())


def test_notifying_paths(su, listener):
    prov = Provisioner(su)
    worker = prov.worker("w")
    session = prov.session(worker)
    assert _drain(listener) == []  # a first session (nothing replaced) is not a fence change
    task = prov.task("t")
    _drain(listener)

    prov.enqueue(task, count=3)
    assert _drain(listener) == ["q"], "enqueue"

    # Claim: never notifies (NOTIFY would serialize claims at commit).
    offered = prov.pull(session, _intent())
    assert offered["status"] == "offered"
    assert _drain(listener) == [], "claim"

    # An idle pull and a session heartbeat: nothing.
    api.heartbeat_session(**session.fence()).run(su)
    assert _drain(listener) == [], "heartbeat"
    api.idle_probe().run(su)
    assert _drain(listener) == [], "probe"

    # Requeue after the offer expired unstarted (the sweeper path).
    su.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp() - interval '1 s'"
        " WHERE offer_id = %s",
        (offered["offer"]["offerId"],),
    )
    _drain(listener)
    api.sweep_leases().run(su)
    assert _drain(listener) == ["q"], "sweeper requeue"

    # Retry: start, then fail -> new attempt, run queued again.
    intent = _intent()
    offer = prov.pull(session, intent)["offer"]
    _drain(listener)
    lease = {**session.fence(), "offer_id": offer["offerId"], "token_digest": intent.token_digest}
    assert api.ack_lease(**lease, lease_version=1, phase="starting").run(su).doc["status"] == "ok"
    assert _drain(listener) == [], "starting ACK"
    api.complete_lease(**lease, lease_version=2, outcome="failed", exit_code=1).run(su)
    assert _drain(listener) == ["q"], "retry scheduled"

    # Session replaced (open again) and closed.
    newer = prov.session(worker)
    assert _drain(listener) == [f"s:{worker.worker_id}"], "session replaced"
    api.close_session(**newer.fence()).run(su)
    assert _drain(listener) == [f"s:{worker.worker_id}"], "session closed"

    # Revocation.
    api.revoke_credential(credential_id=worker.credential_id).run(su)
    assert _drain(listener) == [f"c:{worker.credential_id}"], "revocation"

    # Bulk state changes that do not requeue stay silent.
    su.execute("UPDATE ql_private.runs SET state = 'succeeded' WHERE state <> 'queued'")
    assert _drain(listener) == [], "bulk non-requeue update"


def test_payloads_never_carry_secrets(su, listener):
    prov = Provisioner(su)
    worker = prov.worker("w")
    prov.session(worker)
    prov.session(worker)
    api.revoke_credential(credential_id=worker.credential_id).run(su)
    payloads = _drain(listener)
    assert payloads and all(len(p) <= 40 for p in payloads)
    assert not any(worker.secret in p or worker.secret_digest.hex() in p for p in payloads)


def test_every_payload_the_database_sends_is_one_the_view_accepts(su, listener):
    """The idle view drops any payload that is not exactly one the database sends
    (service/idle_view.py `parse_notification`): every notifying path's payload
    must pass, with its kind and id; anything else must not."""
    from qinglong.service.idle_view import Notification, NotificationKind, parse_notification

    prov = Provisioner(su)
    worker = prov.worker("w")
    prov.session(worker)
    prov.session(worker)  # replaced: s:
    prov.enqueue(prov.task("t"))  # q
    api.disable_worker(worker_id=worker.worker_id).run(su)  # c: per credential (and s:)
    api.enable_worker(worker_id=worker.worker_id).run(su)
    api.revoke_credential(credential_id=worker.credential_id).run(su)
    su.execute(
        "DELETE FROM ql_private.worker_credentials WHERE credential_id = %s",
        (worker.credential_id,),
    )
    payloads = _drain(listener)
    assert {p[:2] for p in payloads} == {"q", "s:", "c:"}, payloads
    assert [parse_notification(p) for p in payloads] == [
        Notification(NotificationKind.QUEUE, "")
        if p == "q"
        else Notification(NotificationKind.CREDENTIAL, worker.credential_id)
        if p[0] == "c"
        else Notification(NotificationKind.SESSION, worker.worker_id)
        for p in payloads
    ]
    forged = [
        "",
        "Q",
        "q ",
        " q",
        "qq",
        "x",
        "control",
        "c:",
        "s:",
        "c:" + "a" * 15,
        "c:" + "a" * 17,
        "c:" + "A" * 16,
        "c:abcdefghijklmno-",
        "s:" + worker.worker_id.upper(),
        "s:" + worker.worker_id + "x",
        "s:" + worker.worker_id.replace("-", ""),
        "s:" + worker.worker_id + "\n",
        "c:" + worker.credential_id + "\n",
        "s:" + "x" * 7990,
        "q:" + worker.worker_id,
    ]
    assert [p for p in forged if parse_notification(p) is not None] == []


def test_probe_writes_no_wal(su):
    prov = Provisioner(su)
    task = prov.task("t")
    prov.enqueue(task, count=3)
    su.execute("UPDATE ql_private.runs SET state = 'succeeded'")
    su.execute("VACUUM ql_private.runs, ql_private.attempts, ql_private.run_leases")
    api.idle_probe().run(su)
    tries = []
    for _ in range(5):
        before = su.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        for _ in range(50):
            api.idle_probe().run(su)
        after = su.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        moved = su.execute("SELECT %s::pg_lsn - %s::pg_lsn", (after, before)).fetchone()[0]
        tries.append(int(moved))
        if moved == 0:
            break
        time.sleep(0.2)  # background WAL (autovacuum, checkpoint) landed in the window
    assert tries[-1] == 0, tries
