"""ql.pull_offer against a real PostgreSQL: claim, replay, idle-writes-nothing,
and truly concurrent connections (threads, each with its own connection)."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest

from qinglong.db import api
from tests.py.provision import (
    DEFAULT_CAPABILITIES,
    Intent,
    Provisioner,
    Session,
    command,
    dumps,
)


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def prov(conn: psycopg.Connection) -> Provisioner:
    return Provisioner(conn)


def _counts(conn: psycopg.Connection) -> tuple[int, int]:
    leases = conn.execute("SELECT count(*) FROM ql_private.run_leases").fetchone()[0]
    events = conn.execute(
        "SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched'"
    ).fetchone()[0]
    return leases, events


def test_offer_then_replay_is_identical_and_writes_once(conn, prov: Provisioner) -> None:
    task = prov.task()
    (run_id,) = prov.enqueue(task)
    session = prov.session(prov.worker())
    intent = Intent()
    first = prov.pull(session, intent)
    assert first["status"] == "offered"
    assert first["offer"]["candidate"]["runId"] == run_id
    assert first["offer"]["offerId"] == intent.offer_id
    state = conn.execute("SELECT state FROM ql_private.runs WHERE id = %s", (run_id,)).fetchone()
    assert state[0] == "dispatching"
    before = _counts(conn)
    replay = prov.pull(session, intent)
    assert replay["status"] == "idempotent"
    assert dumps(replay["offer"]) == dumps(first["offer"])
    assert _counts(conn) == before == (1, 1)


def test_offer_never_contains_token_or_digest(conn, prov: Provisioner) -> None:
    prov.enqueue(prov.task())
    session = prov.session(prov.worker())
    intent = Intent()
    text = dumps(prov.pull(session, intent))
    assert intent.token not in text
    assert intent.token_digest.hex() not in text
    stored = conn.execute("SELECT payload::text FROM ql_private.events").fetchall()
    for (payload,) in stored:
        assert intent.token not in payload and intent.token_digest.hex() not in payload


def test_idle_pull_reports_no_candidates(prov: Provisioner) -> None:
    session = prov.session(prov.worker())
    result = prov.pull(session, Intent())
    assert result["status"] == "idle"
    assert result["reason"] == "no_candidates"
    assert result["truncated"] is False
    assert result["stats"]["pages"] == 1
    assert result["stats"]["candidates"] == 0


def _wal_lsn(conn: psycopg.Connection) -> str:
    return str(conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0])


def test_idle_pulls_write_nothing(conn, prov: Provisioner) -> None:
    """100 idle pulls: no transaction id assigned, and the WAL insert position
    does not move on an otherwise quiet database."""
    task = prov.task(
        doc={
            "schema": "qinglong/command@v1",
            "argv": ["x"],
            "env": {},
            "timeoutS": 5,
            "placement": {"required": {"labels": {"gpu": "yes"}}},
        }
    )
    prov.enqueue(task, count=20)  # placement-blocked: the scan reads them, claims none
    session = prov.session(prov.worker())
    conn.execute("CHECKPOINT")
    for _attempt in range(3):  # background WAL (standby snapshots) can land in between
        before = _wal_lsn(conn)
        for _ in range(100):
            with conn.transaction():
                result = prov.pull(session, Intent())
                xid = conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]
            assert result["status"] == "idle"
            assert result["reason"] == "placement_mismatch"
            assert xid is None, "an idle pull assigned a transaction id (it wrote)"
        after = _wal_lsn(conn)
        if before == after:
            return
    pytest.fail(f"WAL moved during idle pulls on the last try: {before} -> {after}")


def _pull_until_idle(
    dsn: str, session: Session, offers: list[dict], errors: list[str], barrier: threading.Barrier
) -> None:
    try:
        with psycopg.connect(dsn, autocommit=True) as own:
            prov = Provisioner(own)
            barrier.wait()
            idle_in_a_row = 0
            while idle_in_a_row < 3:
                result = prov.pull(session, Intent())
                if result["status"] == "offered":
                    offers.append(result["offer"])
                    idle_in_a_row = 0
                else:
                    idle_in_a_row += 1
    except Exception as exc:  # surfaced by the main thread
        errors.append(repr(exc))


def test_concurrent_pulls_lease_every_attempt_exactly_once(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    task = prov.task()
    run_ids = prov.enqueue(task, count=500)
    caps = {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {},
        "runtimes": {},
        "slots": 256,
    }
    sessions = [prov.session(prov.worker(f"w{i}"), caps) for i in range(8)]
    offers: list[dict] = []
    errors: list[str] = []
    barrier = threading.Barrier(len(sessions))
    threads = [
        threading.Thread(target=_pull_until_idle, args=(db_dsn, s, offers, errors, barrier))
        for s in sessions
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, errors
    attempts = Counter(o["candidate"]["attemptId"] for o in offers)
    assert len(offers) == 500
    assert max(attempts.values()) == 1
    assert {o["candidate"]["runId"] for o in offers} == set(run_ids)
    per_attempt = conn.execute(
        "SELECT attempt_id, count(*) FROM ql_private.run_leases GROUP BY 1 HAVING count(*) > 1"
    ).fetchall()
    assert per_attempt == []
    events = conn.execute(
        "SELECT count(*), count(DISTINCT payload->>'offerId') FROM ql_private.events"
        " WHERE type = 'run.dispatched'"
    ).fetchone()
    assert events == (500, 500)
    workers_used = Counter(o["target"]["workerId"] for o in offers)
    assert len(workers_used) > 1, "expected the claims to be spread over the workers"


def test_same_offer_id_from_four_connections_gives_one_lease(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    task = prov.task()
    prov.enqueue(task, count=10)
    session = prov.session(prov.worker())
    intent = Intent()
    results: list[dict] = []
    errors: list[str] = []
    barrier = threading.Barrier(4)

    def fire() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                barrier.wait()
                results.append(Provisioner(own).pull(session, intent))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(r["status"] for r in results).count("offered") == 1
    assert {r["status"] for r in results} <= {"offered", "idempotent"}
    assert len({dumps(r["offer"]) for r in results}) == 1
    assert _counts(conn) == (1, 1)


def test_scan_skips_a_run_another_transaction_is_claiming(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    """A run locked by an in-flight claim (another connection's open transaction)
    is skipped by the scan — no race counted, no lock taken — and is a candidate
    again as soon as that transaction ends without claiming it."""
    task = prov.task()
    first, second = prov.enqueue(task, count=2)
    session = prov.session(prov.worker())
    with psycopg.connect(db_dsn) as other:  # not autocommit: holds the row lock
        other.execute("SELECT 1 FROM ql_private.runs WHERE id = %s FOR NO KEY UPDATE", (first,))
        page = conn.execute(
            "SELECT array_agg(run_id::text) FROM ql_private.candidate_page(NULL, NULL, NULL, 8)"
        ).fetchone()[0]
        assert page == [second]
        result = prov.pull(session, Intent())
        assert result["status"] == "offered"
        assert result["offer"]["candidate"]["runId"] == second
        other.rollback()
    again = prov.pull(session, Intent())
    assert again["status"] == "offered"
    assert again["offer"]["candidate"]["runId"] == first


def test_claim_passes_over_runs_claimed_since_the_scan(conn, prov: Provisioner) -> None:
    """claim_candidate given candidates that were claimed after the scan (now
    `dispatching` with a live offer) passes over them without a lock and claims
    the first one still free; the ones passed over are reported as consumed."""
    task = prov.task()
    runs = prov.enqueue(task, count=3)
    taker = prov.session(prov.worker("taker"))
    for _ in range(2):
        assert prov.pull(taker, Intent())["status"] == "offered"
    session = prov.session(prov.worker("late"))
    intent = Intent()
    row = conn.execute(
        "SELECT (c).offer IS NOT NULL, (c).consumed, (c).locked, (c).offer #>> '{candidate,runId}'"
        " FROM (SELECT ql_private.claim_candidate(ws, %s::uuid[], ARRAY[0, 0, 0],"
        "   %s::uuid, %s) AS c FROM ql_private.worker_sessions ws WHERE ws.session_id = %s) x",
        (runs, intent.offer_id, intent.token_digest, session.session_id),
    ).fetchone()
    assert row == (True, 3, True, runs[2])
    dispatched = conn.execute(
        "SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched'"
    ).fetchone()[0]
    assert dispatched == 3


def test_expired_offer_is_reclaimed_with_the_next_lease_generation(conn, prov: Provisioner) -> None:
    task = prov.task()
    (run_id,) = prov.enqueue(task)
    first_session = prov.session(prov.worker("first"))
    first = prov.pull(first_session, Intent())
    assert first["offer"]["lease"]["leaseGeneration"] == 1
    conn.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp()"
        " - interval '1 second' WHERE run_id = %s",
        (run_id,),
    )
    second = prov.pull(prov.session(prov.worker("second")), Intent())
    assert second["status"] == "offered"
    assert second["offer"]["candidate"]["runId"] == run_id
    assert second["offer"]["lease"]["leaseGeneration"] == 2
    released = conn.execute(
        "SELECT release_reason FROM ql_private.run_leases WHERE run_id = %s"
        " ORDER BY lease_generation",
        (run_id,),
    ).fetchall()
    assert released == [("expired",), (None,)]


def _gpu_task(prov: Provisioner) -> str:
    doc = command()
    doc["placement"] = {"required": {"labels": {"gpu": "yes"}}}
    return prov.task("gpu", doc)


def test_matching_run_behind_a_blocked_head_is_offered(conn, prov: Provisioner) -> None:
    """200 runs this worker cannot take (required label gpu=yes), queued ahead at a
    higher priority: the default-bounded pull still reaches the matching run
    behind them, through the placement-class pages, in one call."""
    prov.enqueue(_gpu_task(prov), count=200, priority=5)
    (plain_run,) = prov.enqueue(prov.task("plain"))
    session = prov.session(prov.worker())
    result = prov.pull(session, Intent())
    assert result["status"] == "offered", result
    assert result["offer"]["candidate"]["runId"] == plain_run
    gpu = prov.session(
        prov.worker("gpu-box"),
        {
            "schema": "qinglong/worker-capabilities@v1",
            "executors": ["remote-worker"],
            "labels": {"gpu": "yes"},
            "runtimes": {},
            "slots": 4,
        },
    )
    taken = prov.pull(gpu, Intent())
    assert taken["status"] == "offered"
    assert taken["offer"]["candidate"]["taskId"] != result["offer"]["candidate"]["taskId"]


def test_only_blocked_runs_answer_placement_mismatch_without_reading_them_all(
    prov: Provisioner,
) -> None:
    prov.enqueue(_gpu_task(prov), count=200, priority=5)
    session = prov.session(prov.worker())
    result = prov.pull(session, Intent())
    assert result["status"] == "idle"
    assert result["reason"] == "placement_mismatch"
    assert result["truncated"] is True
    assert result["stats"]["pages"] == 1  # no class matches: no second page
    assert result["stats"]["mismatches"]["label"] == 8


def _enqueue_due(
    conn: psycopg.Connection, prov: Provisioner, task_id: str, count: int, due_ago_s: int
) -> list[str]:
    """`count` runs scheduled for later, then aged so they came due `due_ago_s`
    seconds ago (due_at and the attempt's not_before), as a sweeper-less
    deployment would hold them: still in runs_due, never promoted."""
    result = prov.call(
        api.enqueue_runs(task_id=task_id, priority=0, count=count, delay_ms=3_600_000)
    ).doc
    run_ids = [str(run_id) for run_id in result["runIds"]]
    conn.execute(
        "UPDATE ql_private.runs SET due_at = clock_timestamp() - make_interval(secs => %s)"
        " WHERE id = ANY(%s::uuid[])",
        (due_ago_s, run_ids),
    )
    conn.execute(
        "UPDATE ql_private.attempts a SET not_before = r.due_at FROM ql_private.runs r"
        " WHERE a.id = r.current_attempt_id AND r.id = ANY(%s::uuid[])",
        (run_ids,),
    )
    return run_ids


@pytest.mark.parametrize("takeable_queued_first", [False, True])
def test_due_runs_behind_a_head_of_blocked_due_runs_are_offered_without_a_sweep(
    conn, prov: Provisioner, takeable_queued_first: bool
) -> None:
    """40 due runs this worker cannot take, due before 5 it can, and no sweeper
    ever promoted any of them: the default-bounded pull still offers the 5, one
    per pull, through the class pages (which read each matching class's due
    runs), and never a blocked one — also when the 5 were queued first, so their
    keys lie before the blocked first page's last one (the class pages start
    from the head of the key order again)."""
    gpu, plain = _gpu_task(prov), prov.task("plain")
    if takeable_queued_first:
        takeable = _enqueue_due(conn, prov, plain, 5, due_ago_s=60)
        _enqueue_due(conn, prov, gpu, 40, due_ago_s=120)
    else:
        _enqueue_due(conn, prov, gpu, 40, due_ago_s=120)
        takeable = _enqueue_due(conn, prov, plain, 5, due_ago_s=60)
    session = prov.session(prov.worker(), {**DEFAULT_CAPABILITIES, "slots": 8})
    offered = []
    for _ in takeable:
        result = prov.pull(session, Intent())
        assert result["status"] == "offered", result
        offered.append(result["offer"]["candidate"]["runId"])
    assert sorted(offered) == sorted(takeable)
    result = prov.pull(session, Intent())
    assert result["status"] == "idle" and result["reason"] == "placement_mismatch", result
    promoted = conn.execute(
        "SELECT count(*) FROM ql_private.runs WHERE state = 'queued' AND due_at IS NULL"
    ).fetchone()[0]
    assert promoted == 0  # nothing was promoted: the pull found them where they were


def test_enqueue_records_the_placement_class(conn, prov: Provisioner) -> None:
    gpu_runs = prov.enqueue(_gpu_task(prov), count=2)
    plain_runs = prov.enqueue(prov.task("plain"), count=2)
    rows = conn.execute(
        "SELECT r.id::text, pc.required FROM ql_private.runs r"
        " JOIN ql_private.placement_classes pc ON pc.id = r.placement_class"
    ).fetchall()
    classes = {run_id: required for run_id, required in rows}
    assert [classes[r]["labels"]["gpu"] for r in gpu_runs] == [["yes"]] * 2
    assert [classes[r]["labels"] for r in plain_runs] == [{}] * 2
    assert [classes[r]["executors"] for r in plain_runs] == [["remote-worker"]] * 2
    assert conn.execute("SELECT count(*) FROM ql_private.placement_classes").fetchone()[0] == 2


def test_claim_skips_a_run_another_transaction_has_locked(
    db_dsn: str, conn, prov: Provisioner
) -> None:
    """Inside the one claim statement, SKIP LOCKED passes over a candidate a
    competing transaction holds — never waiting for it — and locks the next."""
    first, second = prov.enqueue(prov.task(), count=2)
    session = prov.session(prov.worker())
    intent = Intent()
    with psycopg.connect(db_dsn) as other:  # holds the row lock until rollback
        other.execute("SELECT 1 FROM ql_private.runs WHERE id = %s FOR NO KEY UPDATE", (first,))
        row = conn.execute(
            "SELECT (c).consumed, (c).locked, (c).offer #>> '{candidate,runId}'"
            " FROM (SELECT ql_private.claim_candidate(ws, %s::uuid[], ARRAY[0, 0],"
            "   %s::uuid, %s) AS c FROM ql_private.worker_sessions ws"
            "  WHERE ws.session_id = %s) x",
            ([first, second], intent.offer_id, intent.token_digest, session.session_id),
        ).fetchone()
        other.rollback()
    assert row == (2, True, second)
