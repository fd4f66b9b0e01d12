"""ql.pull_offers (SPEC §18.1) against a real PostgreSQL: truly concurrent
batches from many sessions (threads, each with its own connection) never lease
one run twice and never exceed a session's slots."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest

from qinglong.db import api
from tests.py.provision import Intent, Provisioner, Session


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def prov(conn: psycopg.Connection) -> Provisioner:
    return Provisioner(conn)


def _batch(prov: Provisioner, session: Session, intents: list[Intent]) -> dict:
    return prov.call(
        api.pull_offers(
            **session.fence(),
            offer_ids=[i.offer_id for i in intents],
            token_digests=[i.token_digest for i in intents],
        )
    ).doc


def _caps(slots: int) -> dict:
    return {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {},
        "runtimes": {},
        "slots": slots,
    }


def _batches_until_idle(
    dsn: str, session: Session, offers: list[dict], errors: list[str], barrier: threading.Barrier
) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as own:
            prov = Provisioner(own)
            barrier.wait()
            idle_in_a_row = 0
            while idle_in_a_row < 3:
                result = _batch(prov, session, [Intent() for _ in range(10)])
                assert result["status"] == "batch", result
                assert result["conflicts"] == []
                offers.extend(result["offers"])
                idle_in_a_row = idle_in_a_row + 1 if not result["offers"] else 0
    except Exception as exc:  # surfaced by the main thread
        errors.append(repr(exc))


def test_concurrent_batches_lease_every_attempt_exactly_once(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    run_ids = prov.enqueue(prov.task(), count=400)
    sessions = [prov.session(prov.worker(f"w{i}"), _caps(256)) for i in range(8)]
    offers: list[dict] = []
    errors: list[str] = []
    barrier = threading.Barrier(len(sessions))
    threads = [
        threading.Thread(target=_batches_until_idle, args=(db_dsn, s, offers, errors, barrier))
        for s in sessions
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, errors
    attempts = Counter(o["candidate"]["attemptId"] for o in offers)
    assert len(offers) == 400
    assert max(attempts.values()) == 1
    assert {o["candidate"]["runId"] for o in offers} == set(run_ids)
    assert (
        conn.execute(
            "SELECT attempt_id FROM ql_private.run_leases GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        == []
    )
    events = conn.execute(
        "SELECT count(*), count(DISTINCT payload->>'offerId')"
        " FROM ql_private.events WHERE type = 'run.dispatched'"
    ).fetchone()
    assert events == (400, 400)
    assert len(Counter(o["target"]["workerId"] for o in offers)) > 1


def test_concurrent_batches_of_one_session_never_exceed_its_slots(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    """Four connections pull 16-id batches for one 5-slot session at once: the
    session row is locked and its slots re-counted before every claim."""
    prov.enqueue(prov.task(), count=100)
    session = prov.session(prov.worker(), _caps(5))
    results: list[dict] = []
    errors: list[str] = []
    barrier = threading.Barrier(4)

    def fire() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                barrier.wait()
                results.append(_batch(Provisioner(own), session, [Intent() for _ in range(16)]))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sum(len(r["offers"]) for r in results) == 5
    assert {r["idle"]["reason"] for r in results} == {"capacity_full"}
    leases = conn.execute(
        "SELECT count(*) FROM ql_private.run_leases WHERE session_id = %s", (session.session_id,)
    ).fetchone()[0]
    assert leases == 5


def test_idle_batches_write_nothing(conn, prov: Provisioner) -> None:
    """An idle batch of 16 ids: no transaction id, no WAL on a quiet database."""
    prov.enqueue(
        prov.task(
            doc={
                "schema": "qinglong/command@v1",
                "argv": ["x"],
                "env": {},
                "timeoutS": 5,
                "placement": {"required": {"labels": {"gpu": "yes"}}},
            }
        ),
        count=20,
    )
    session = prov.session(prov.worker())
    conn.execute("CHECKPOINT")
    for _attempt in range(3):
        before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        for _ in range(30):
            with conn.transaction():
                result = _batch(prov, session, [Intent() for _ in range(16)])
                xid = conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]
            assert result["offers"] == [] and result["idle"]["reason"] == "placement_mismatch"
            assert xid is None, "an idle batch assigned a transaction id (it wrote)"
        if conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0] == before:
            return
    pytest.fail("WAL moved during idle batches on every try")
