"""The offline chaos checker (qinglong/chaos/checker.py): clean on a consistent
history, and each anomaly class fires when one anomaly of its kind is planted.

The baseline is built through the real SQL API (ql.open_session / ql.pull_offer)
and the real worker journal (worker.journal.Journal.accept), exactly as a soak
would leave it: two workers, four runs, one run re-claimed after its first
lease expired unstarted (so one attempt has two disjoint leases and one inbox
holds a stale offer), a history of invoke + ok per intent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.worker.faults import JOURNAL_POINTS, FaultPlan
from qinglong.worker.journal import InboxEntry, Journal, PendingClaim
from tests.py.provision import Intent, Provisioner, Session
from tools.chaos.checker import HEAL_FILE, MANIFEST_FILE, check_dir
from tools.chaos.history import (
    HISTORY_FILE,
    INVOKE,
    OK,
    Op,
    build_history,
    normalize,
    read_history,
    worker_log_ops,
)
from tools.chaos.snapshot import SNAPSHOT_FILE, read_journal, take_db_snapshot, write_json

OFFER_SCHEMA = "qinglong/remote-execution-offer@v1"
WORKERS = ("w01", "w02")


@dataclass
class Accepted:
    process: str
    offer_id: str
    run_id: str
    lease: dict[str, Any]


@dataclass
class Scenario:
    dsn: str
    root: Path
    workers: dict[str, str] = field(default_factory=dict)  # name -> workerId
    sessions: dict[str, Session] = field(default_factory=dict)
    accepted: list[Accepted] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def journal_root(self, name: str) -> Path:
        return self.root / "journals" / name

    def inbox_file(self, item: Accepted) -> Path:
        return self.journal_root(item.process) / "inbox" / f"{item.offer_id}.json"

    def write_history(self) -> None:
        with open(self.root / "recorded.jsonl", "w", encoding="utf-8") as handle:
            for op in self.ops:
                handle.write(json.dumps(op.to_doc()) + "\n")
        build_history(self.root, {}, [self.root / "recorded.jsonl"])

    def snapshot(self) -> None:
        """Final snapshot + the heal cut (here: the same moment)."""
        snapshot = take_db_snapshot(self.dsn)
        write_json(self.root / SNAPSHOT_FILE, snapshot)
        journals = {n: read_journal(self.journal_root(n)).ids() for n in WORKERS}
        write_json(self.root / HEAL_FILE, {"snapshot": snapshot, "journals": journals})

    def check(self) -> set[str]:
        return {a.name for a in check_dir(self.root).anomalies}


def _accept(scenario: Scenario, name: str, result: dict[str, Any], intent: Intent) -> None:
    assert result["status"] == "offered", result
    offer = {"schema": OFFER_SCHEMA, "status": "offered", **result["offer"]}
    entry = InboxEntry(offer=offer, lease=dict(offer["lease"], leaseToken=intent.token),
                       accepted_at_ms=int(time.time() * 1000))  # fmt: skip
    with Journal.open(str(scenario.journal_root(name)), refresher=False) as journal:
        journal.accept(entry)
    run_id = offer["candidate"]["runId"]
    now = int(time.time() * 1000)
    scenario.ops += [
        Op(now, name, INVOKE, "claim", offer_id=intent.offer_id),
        Op(now, name, OK, "claim", offer_id=intent.offer_id, run_id=run_id, value="accepted"),
    ]
    scenario.accepted.append(Accepted(name, intent.offer_id, run_id, offer["lease"]))


def _pull(scenario: Scenario, prov: Provisioner, name: str) -> None:
    intent = Intent()
    _accept(scenario, name, prov.pull(scenario.sessions[name], intent), intent)


def _age_lease(scenario: Scenario, offer_id: str) -> None:
    """Let a lease expire unstarted (tests age rows instead of moving the clock)."""
    scenario.sql(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp() WHERE offer_id = %s",
        offer_id,
    )


@pytest.fixture
def scenario(db_dsn: str, tmp_path: Path) -> Scenario:
    scene = Scenario(db_dsn, tmp_path)
    (tmp_path / "journals").mkdir(mode=0o700)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        for name in WORKERS:
            worker = prov.worker(name)
            scene.workers[name] = worker.worker_id
            scene.sessions[name] = prov.session(worker)
        task = prov.task("chaos")
        prov.enqueue(task, 4)
        _pull(scene, prov, "w01")  # run 1
        _age_lease(scene, scene.accepted[0].offer_id)
        _pull(scene, prov, "w02")  # run 1 again: lease generation 2, w01's entry is stale
        _pull(scene, prov, "w02")  # run 2
        _pull(scene, prov, "w01")  # run 3
    scene.ops.append(Op(int(time.time() * 1000), "client", OK, "enqueue",
                        extra={"runIds": []}))  # fmt: skip
    workers = {n: {"workerId": w, "journal": f"journals/{n}"} for n, w in scene.workers.items()}
    write_json(tmp_path / MANIFEST_FILE, {"workers": workers})
    assert scene.accepted[0].run_id == scene.accepted[1].run_id
    return scene


def _finish(scene: Scenario) -> set[str]:
    scene.write_history()
    scene.snapshot()
    return scene.check()


# ------------------------------------------------------------------ baseline


def test_consistent_history_has_no_anomalies(scenario: Scenario) -> None:
    assert _finish(scenario) == set()
    report = check_dir(scenario.root)
    assert report.counts["leases"] == 4 and report.counts["inboxEntries"] == 4
    assert report.counts["runsHeldAtHeal"] == 3 and report.counts["runsClaimableAtHeal"] == 1


def test_pending_intent_with_a_committed_lease_is_open_not_an_anomaly(
    scenario: Scenario,
) -> None:
    """A response lost at the very end: the lease exists, the intent is still on disk."""
    item = scenario.accepted[-1]
    token = json.loads(scenario.inbox_file(item).read_text())["lease"]["leaseToken"]
    scenario.inbox_file(item).unlink()
    scenario.ops = [op for op in scenario.ops if not (op.offer_id == item.offer_id
                                                       and op.type == OK)]  # fmt: skip
    session = scenario.sessions[item.process]
    doc = {"schema": "qinglong/pending-claim@v1", "offerId": item.offer_id,
           "leaseToken": token, "workerId": scenario.workers[item.process],
           "sessionId": session.session_id, "generation": session.generation,
           "capabilitiesDigest": "sha256:" + "0" * 64, "attempts": 1,
           "nextAttemptAtMs": 0, "createdAtMs": 0, "lastOutcome": "sent"}  # fmt: skip
    path = scenario.journal_root(item.process) / "pending-claim.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(doc, handle)
    assert _finish(scenario) == set()
    assert check_dir(scenario.root).counts["pendingAtEnd"] == 1


# ------------------------------------------------------------------ plants


def plant_overlap(scene: Scenario) -> set[str]:
    """(a) the expired first lease of run 1 'ends' after its successor was claimed."""
    first, second = scene.accepted[0], scene.accepted[1]
    scene.sql(
        "UPDATE ql_private.run_leases SET expires_at = s.claimed_at + interval '1 s',"
        " released_at = s.claimed_at + interval '1 s' FROM ql_private.run_leases s"
        " WHERE run_leases.offer_id = %s AND s.offer_id = %s",
        first.offer_id,
        second.offer_id,
    )
    return {"a_lease_overlap"}


def plant_early_release(scene: Scenario) -> set[str]:
    """(a) a lease released as `expired` while it still had time: its holder overlaps."""
    scene.sql(
        "UPDATE ql_private.run_leases SET expires_at = released_at + interval '1 h'"
        " WHERE offer_id = %s",
        scene.accepted[0].offer_id,
    )
    return {"a_lease_overlap"}


def plant_second_live_lease(scene: Scenario) -> set[str]:
    """(a) a second live lease of one attempt, inserted as owner past the unique index."""
    item = scene.accepted[2]
    scene.sql("DROP INDEX ql_private.run_leases_one_live")
    scene.sql(
        "INSERT INTO ql_private.run_leases (attempt_id, run_id, worker_id, session_id,"
        " session_generation, lease_generation, lease_version, offer_id, token_digest,"
        " execution_revision_id, content_digest, placement_score, claimed_at, expires_at,"
        " lease_ttl_seconds, updated_at) SELECT attempt_id, run_id, worker_id, session_id,"
        " session_generation, lease_generation + 1, 1, %s, token_digest,"
        " execution_revision_id, content_digest, placement_score,"
        " claimed_at + interval '1 ms', expires_at, lease_ttl_seconds, updated_at"
        " FROM ql_private.run_leases WHERE offer_id = %s",
        str(uuid.uuid4()),
        item.offer_id,
    )
    # Also: no run.dispatched for it (b), and nobody holds it (f); (d) may see it.
    return {"a_lease_overlap", "b_duplicate_claim", "f_journal_invalid"}


def plant_duplicate_dispatch(scene: Scenario) -> set[str]:
    """(b) a second run.dispatched event for one offer."""
    scene.sql(
        "INSERT INTO ql_private.events (type, run_id, attempt_id, payload)"
        " SELECT type, run_id, attempt_id, payload FROM ql_private.events"
        " WHERE type = 'run.dispatched' AND payload->>'offerId' = %s",
        scene.accepted[2].offer_id,
    )
    return {"b_duplicate_claim"}


def plant_lost_run(scene: Scenario) -> set[str]:
    """(d) a run marked running with no lease at all: neither done, held nor claimable."""
    scene.sql(
        "UPDATE ql_private.runs SET state = 'running' WHERE id NOT IN"
        " (SELECT run_id FROM ql_private.run_leases)"
    )
    return {"d_lost_run"}


def plant_started_unacknowledged(scene: Scenario) -> set[str]:
    """(g) a started lease whose attempt is still `claimed`."""
    scene.sql(
        "UPDATE ql_private.run_leases SET started_at = claimed_at WHERE offer_id = %s",
        scene.accepted[2].offer_id,
    )
    return {"g_state_invariant"}


DB_PLANTS: list[Callable[[Scenario], set[str]]] = [
    plant_overlap,
    plant_early_release,
    plant_second_live_lease,
    plant_duplicate_dispatch,
    plant_lost_run,
    plant_started_unacknowledged,
]


@pytest.mark.parametrize("plant", DB_PLANTS, ids=lambda p: p.__name__)
def test_database_plant_is_caught(scenario: Scenario, plant: Callable[[Scenario], set[str]]):
    expected = plant(scenario)
    found = _finish(scenario)
    assert expected <= found, found
    if plant is not plant_second_live_lease:
        assert found == expected


def _edit_entry(scene: Scenario, item: Accepted, change: Callable[[dict], None]) -> None:
    path = scene.inbox_file(item)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, sort_keys=True))  # mode stays 0600


def plant_replay_digest(scene: Scenario) -> set[str]:
    """(c) the stored offer is not what the database replays (placement score)."""

    def change(doc: dict) -> None:
        doc["offer"]["placementScore"] += 1

    _edit_entry(scene, scene.accepted[2], change)
    return {"c_replay_mismatch"}


def plant_wrong_token(scene: Scenario) -> set[str]:
    """(c) the stored lease token does not hash to the lease's token digest."""

    def change(doc: dict) -> None:
        token = doc["lease"]["leaseToken"]
        doc["lease"]["leaseToken"] = ("B" if token[0] == "A" else "A") + token[1:]

    _edit_entry(scene, scene.accepted[3], change)
    return {"c_replay_mismatch"}


def plant_refused_replay(scene: Scenario) -> set[str]:
    """(c) a worker refused a replay of its own intent as a different offer."""
    item = scene.accepted[3]
    scene.ops.append(
        Op(
            int(time.time() * 1000),
            item.process,
            "fail",
            "claim",
            offer_id=item.offer_id,
            value="rejected",
            reason="OfferConflict",
        )
    )
    return {"c_replay_mismatch"}


def plant_orphaned_at_heal(scene: Scenario) -> set[str]:
    """(d) at the heal cut, a live lease that no inbox holds (heal cut edited after)."""
    heal = json.loads((scene.root / HEAL_FILE).read_text())
    heal["journals"]["w01"]["inbox"].remove(scene.accepted[3].offer_id)
    write_json(scene.root / HEAL_FILE, heal)
    return {"d_lost_run"}


def plant_enqueued_missing(scene: Scenario) -> set[str]:
    """(d) the client was told a run was enqueued, the database has no such run."""
    scene.ops.append(Op(int(time.time() * 1000), "client", OK, "enqueue",
                        extra={"runIds": [str(uuid.uuid4())]}))  # fmt: skip
    return {"d_lost_run"}


def plant_unresolved(scene: Scenario) -> set[str]:
    """(e) an intent with no outcome whose lease exists but whose inbox entry does not."""
    item = scene.accepted[3]
    scene.ops = [op for op in scene.ops if not (op.offer_id == item.offer_id and op.type == OK)]
    scene.inbox_file(item).unlink()
    return {"e_unresolved_intent"}


def plant_idle_with_lease(scene: Scenario) -> set[str]:
    """(e) the recorded outcome (idle) contradicts the final state (a lease exists)."""
    item = scene.accepted[3]
    scene.ops = [op for op in scene.ops if not (op.offer_id == item.offer_id and op.type == OK)]
    scene.ops.append(Op(int(time.time() * 1000), item.process, OK, "claim",
                        offer_id=item.offer_id, value="idle"))  # fmt: skip
    return {"e_unresolved_intent"}


def plant_deleted_inbox(scene: Scenario) -> set[str]:
    """(f) an accepted offer whose inbox entry is gone while its lease exists."""
    scene.inbox_file(scene.accepted[3]).unlink()
    return {"f_journal_invalid"}


def plant_loose_mode(scene: Scenario) -> set[str]:
    """(f) a 0644 inbox file."""
    scene.inbox_file(scene.accepted[2]).chmod(0o644)
    return {"f_journal_invalid"}


def plant_temp_file(scene: Scenario) -> set[str]:
    """(f) a leftover `.tmp-*` file."""
    path = scene.journal_root("w02") / "inbox" / ".tmp-0123456789abcdef"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    return {"f_journal_invalid"}


def plant_loose_root(scene: Scenario) -> set[str]:
    """(f) a journal root readable by others."""
    scene.journal_root("w01").chmod(0o755)
    return {"f_journal_invalid"}


JOURNAL_PLANTS: list[Callable[[Scenario], set[str]]] = [
    plant_replay_digest,
    plant_wrong_token,
    plant_refused_replay,
    plant_orphaned_at_heal,
    plant_enqueued_missing,
    plant_unresolved,
    plant_idle_with_lease,
    plant_deleted_inbox,
    plant_loose_mode,
    plant_temp_file,
    plant_loose_root,
]


@pytest.mark.parametrize("plant", JOURNAL_PLANTS, ids=lambda p: p.__name__)
def test_journal_or_history_plant_is_caught(scenario: Scenario,
                                            plant: Callable[[Scenario], set[str]]):  # fmt: skip
    assert _finish(scenario) == set()  # clean before the plant
    expected = plant(scenario)
    scenario.write_history()
    assert scenario.check() == expected


def test_fixed_duplicate_pull_race_is_an_anomaly_again(scenario: Scenario) -> None:
    """The signature of the duplicate-pull race found by the soak (an intent sent
    twice, answered idle, while a lease with its offer id exists). It was fixed in
    ql.pull_offer, so the checker no longer excuses it: unresolved intent."""
    assert _finish(scenario) == set()
    item = scenario.accepted[3]
    scenario.ops = [op for op in scenario.ops if not (op.offer_id == item.offer_id
                                                       and op.type == OK)]  # fmt: skip
    now = int(time.time() * 1000)
    scenario.ops += [
        Op(
            now,
            item.process,
            "info",
            "claim",
            offer_id=item.offer_id,
            value="retry",
            reason="NetworkError",
        ),
        Op(
            now + 1,
            item.process,
            OK,
            "claim",
            offer_id=item.offer_id,
            value="idle",
            reason="capacity_full",
        ),
    ]
    scenario.write_history()
    report = check_dir(scenario.root)
    assert report.known == []
    assert {a.name for a in report.anomalies} == {"e_unresolved_intent"}


def test_every_class_has_a_plant() -> None:
    caught: set[str] = set()
    for plant_set in (DB_PLANTS, JOURNAL_PLANTS):
        for plant in plant_set:
            doc = plant.__doc__ or ""
            caught.add(doc.strip()[1])
    assert caught == set("abcdefg")
    # h, i and j have their own positive/negative tests below (executing workers,
    # slots and placement, the hostile worker): every class of CLASSES is covered
    # by one or the other.
    from tools.chaos.facts import CLASSES

    assert set(CLASSES) == set("abcdefghij")


# ------------------------------------------------------------------ history


def test_worker_log_maps_onto_ops(tmp_path: Path) -> None:
    offer, other = str(uuid.uuid4()), str(uuid.uuid4())
    lines = [
        {"ts": 1, "event": "worker.starting", "pid": 7},
        {"ts": 2, "event": "claim.retry", "offerId": offer, "reason": "NetworkError"},
        {"ts": 3, "event": "claim.accepted", "offerId": offer, "runId": "r1", "attemptId": "a1"},
        {"ts": 4, "event": "claim.idle", "offerId": other, "reason": "capacity_full"},
        {"ts": 5, "event": "claim.conflict", "offerId": other, "reason": "lease_expired"},
    ]
    log = tmp_path / "w01.log"
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n{torn")
    ops = normalize(worker_log_ops("w01", log))
    assert [(op.type, op.value) for op in ops if op.offer_id == offer] == [
        ("invoke", None),
        ("info", "retry"),
        ("ok", "accepted"),
    ]
    assert [(op.type, op.value) for op in ops if op.offer_id == other] == [
        ("invoke", None),
        ("ok", "idle"),
        ("fail", "conflict"),
    ]
    assert [op.index for op in ops] == list(range(len(ops)))
    build_history(tmp_path, {"w01": log}, [])
    assert read_history(tmp_path) == ops and (tmp_path / HISTORY_FILE).exists()


# ------------------------------------------------------------------ failures judged


def _fail_op(scene: Scenario, item: Accepted, value: str, reason: str,
             **extra: Any) -> None:  # fmt: skip
    scene.ops.append(
        Op(
            int(time.time() * 1000),
            item.process,
            "fail",
            "claim",
            offer_id=item.offer_id,
            value=value,
            reason=reason,
            extra=extra,
        )
    )


def _close_session(scene: Scenario, name: str) -> None:
    scene.sql(
        "UPDATE ql_private.worker_sessions SET state = 'closed',"
        " closed_at = clock_timestamp() - interval '1 s' WHERE worker_id = %s",
        scene.workers[name],
    )


def _operator_close(scene: Scenario, name: str) -> None:
    """`admin session close` (ql.end_session), as the soak's nemesis does before it
    restarts a worker armed with `aside_replace`: its unstarted leases released."""
    from qinglong.db import api
    from qinglong.service import control_plane

    with control_plane.connect(scene.dsn) as conn:
        control_plane.run(conn, api.end_session(session_id=scene.sessions[name].session_id))


def _release(scene: Scenario, item: Accepted, reason: str) -> None:
    scene.sql(
        "UPDATE ql_private.run_leases SET released_at = clock_timestamp() - interval"
        " '1 s', release_reason = %s, expires_at = greatest(expires_at, clock_timestamp()"
        " - interval '1 s') WHERE offer_id = %s",
        reason,
        item.offer_id,
    )


@dataclass(frozen=True)
class Judged:
    """A failure of run 3's intent (w01's live lease), with or without its cause."""

    name: str
    value: str
    reason: str
    cause: Callable[[Scenario, Accepted], None] | None  # plants the fact that explains it
    anomaly: str  # the class when the cause is missing
    excuse: str  # the audit key when it is there
    extra: dict[str, Any] = field(default_factory=dict)


JUDGED = [
    Judged(
        "lease_expired",
        "conflict",
        "lease_expired",
        lambda s, i: _age_lease(s, i.offer_id),
        "c_replay_mismatch",
        "conflict lease_expired: lease past expires_at at the answer",
    ),
    Judged(
        "session_replaced",
        "conflict",
        "session_replaced",
        lambda s, i: _close_session(s, i.process),
        "c_replay_mismatch",
        "conflict session_replaced: session closed before the answer",
    ),
    Judged(
        "session_closed",
        "conflict",
        "session_closed",
        lambda s, i: _close_session(s, i.process),
        "c_replay_mismatch",
        "conflict session_closed: session closed before the answer",
    ),
    Judged(
        "lease_terminal",
        "conflict",
        "lease_terminal",
        lambda s, i: _release(s, i, "cancelled"),
        "c_replay_mismatch",
        "conflict lease_terminal: lease released cancelled before the answer",
    ),
    Judged(
        "attempt_changed",
        "conflict",
        "attempt_changed",
        lambda s, i: s.sql(
            "UPDATE ql_private.attempts SET state = 'cancelled' WHERE id ="
            " (SELECT attempt_id FROM ql_private.run_leases"
            " WHERE offer_id = %s)",
            i.offer_id,
        ),
        "c_replay_mismatch",
        "conflict attempt_changed: the attempt left claimed",
    ),
    Judged(
        "abandoned",
        "abandoned",
        "session_lost",
        lambda s, i: _close_session(s, i.process),
        "e_unresolved_intent",
        "abandoned session_lost: session closed before the answer",
    ),
    Judged(
        "moved_aside",
        "moved_aside",
        "session_changed",
        lambda s, i: _close_session(s, i.process),
        "e_unresolved_intent",
        "abandoned session_changed: session closed before the answer",
    ),
    Judged(
        "operator_close",
        "moved_aside",
        "session_lost",
        lambda s, i: _operator_close(s, i.process),
        "e_unresolved_intent",
        "abandoned session_lost: lease released session_closed",
    ),
    Judged(
        "exhausted",
        "exhausted",
        "NetworkError",
        None,
        "e_unresolved_intent",
        "exhausted: 16+ attempts recorded with the intent",
        {"attempts": 3},
    ),
]


@pytest.mark.parametrize("case", JUDGED, ids=lambda c: c.name)
def test_failure_without_its_cause_is_an_anomaly(scenario: Scenario, case: Judged) -> None:
    assert _finish(scenario) == set()
    item = scenario.accepted[3]
    _fail_op(scenario, item, case.value, case.reason, **case.extra)
    scenario.write_history()
    report = check_dir(scenario.root)
    assert {a.name for a in report.anomalies} == {case.anomaly}, report.to_doc()
    assert report.excused == []


@pytest.mark.parametrize("case", JUDGED, ids=lambda c: c.name)
def test_failure_with_its_cause_is_excused_and_audited(scenario: Scenario,
                                                       case: Judged) -> None:  # fmt: skip
    item = scenario.accepted[3]
    if case.cause is not None:
        case.cause(scenario, item)
    extra = {"attempts": 16} if case.value == "exhausted" else {}
    _fail_op(scenario, item, case.value, case.reason, **extra)
    _finish(scenario)
    report = check_dir(scenario.root)
    # (Planting a cause may break a state invariant, class g; c and e must be quiet.)
    assert [a for a in report.anomalies if a.cls in "ce"] == [], report.to_doc()
    assert report.excused_counts() == {case.excuse: 1}
    assert report.to_doc()["excused"] == {case.excuse: 1}


def test_conflict_audit_is_printed_by_the_summary(scenario: Scenario) -> None:
    from tools.chaos.cli import summary

    item = scenario.accepted[3]
    _age_lease(scenario, item.offer_id)
    _fail_op(scenario, item, "conflict", "lease_expired")
    _finish(scenario)
    lines = summary(check_dir(scenario.root))
    assert "  1 x conflict lease_expired: lease past expires_at at the answer" in lines


# ------------------------------------------------------------------ invariants (g)


def test_dispatching_without_a_live_lease_is_an_anomaly(scenario: Scenario) -> None:
    """What a sweeper that releases expired leases without re-queuing leaves."""
    item = scenario.accepted[3]
    _age_lease(scenario, item.offer_id)
    scenario.sql(
        "UPDATE ql_private.run_leases SET released_at = expires_at,"
        " release_reason = 'expired' WHERE offer_id = %s",
        item.offer_id,
    )
    found = _finish(scenario)
    assert found == {"g_state_invariant"}
    details = check_dir(scenario.root).to_doc()["details"]["g_state_invariant"]
    assert any("dispatching without a live unstarted lease" in d for d in details)
    assert any("released expired, run left dispatching" in d for d in details)


def test_released_and_requeued_is_no_anomaly(scenario: Scenario) -> None:
    item = scenario.accepted[3]
    _age_lease(scenario, item.offer_id)
    scenario.sql(
        "UPDATE ql_private.run_leases SET released_at = expires_at,"
        " release_reason = 'expired' WHERE offer_id = %s",
        item.offer_id,
    )
    scenario.sql("UPDATE ql_private.runs SET state = 'queued' WHERE id = %s", item.run_id)
    assert _finish(scenario) == set()


def test_started_lease_on_a_claimed_attempt_is_an_anomaly(scenario: Scenario) -> None:
    item = scenario.accepted[3]
    scenario.sql(
        "UPDATE ql_private.run_leases SET started_at = claimed_at WHERE offer_id = %s",
        item.offer_id,
    )
    assert _finish(scenario) == {"g_state_invariant"}
    scenario.sql(
        "UPDATE ql_private.attempts SET state = 'starting' WHERE id ="
        " (SELECT attempt_id FROM ql_private.run_leases WHERE offer_id = %s)",
        item.offer_id,
    )
    scenario.sql("UPDATE ql_private.runs SET state = 'starting' WHERE id = %s", item.run_id)
    assert _finish(scenario) == set()


def _unleased_run(scene: Scenario) -> str:
    leased = {item.run_id for item in scene.accepted}
    rows = scene.sql("SELECT id::text FROM ql_private.runs")
    return next(r[0] for r in rows if r[0] not in leased)


def test_terminal_run_without_its_event_is_an_anomaly(scenario: Scenario) -> None:
    run_id = _unleased_run(scenario)
    scenario.sql("UPDATE ql_private.runs SET state = 'cancelled' WHERE id = %s", run_id)
    found = _finish(scenario)
    assert found == {"g_state_invariant"}
    scenario.sql(
        "INSERT INTO ql_private.events (type, run_id, payload) VALUES ('run.cancelled', %s, '{}')",
        run_id,
    )
    assert _finish(scenario) == set()


# ------------------------------------------------------------------ independent evidence


def _edit_revisions(scene: Scenario, assignment: str) -> None:
    """Revisions are immutable (a trigger refuses UPDATE): plant past it, as superuser."""
    scene.sql(
        "SET session_replication_role = replica;"
        f" UPDATE ql_private.execution_revisions SET {assignment}"
    )


def test_revision_bytes_that_do_not_hash_to_the_digest_are_caught(scenario: Scenario) -> None:
    """The stored offer and the database's replay agree (both from offer_json); only
    the checker's own hash of the revision's canonical bytes can see this."""
    assert _finish(scenario) == set()
    _edit_revisions(scenario, "canonical = canonical || '\\x20'")
    found = _finish(scenario)
    assert found == {"c_replay_mismatch"}
    details = check_dir(scenario.root).to_doc()["details"]["c_replay_mismatch"]
    assert all("canonical bytes" in d for d in details), details


def test_stored_revision_content_is_recomputed_with_rfc8785(scenario: Scenario) -> None:
    """A stored revision whose content is not the canonical bytes (spec edited and the
    database's projection edited alike, so the view digests still agree)."""
    assert _finish(scenario) == set()
    item = scenario.accepted[3]

    def change(doc: dict) -> None:
        doc["offer"]["executionRevision"]["spec"]["planted"] = True

    _edit_entry(scenario, item, change)
    _edit_revisions(scenario, "spec = spec || '{\"planted\": true}'")
    found = _finish(scenario)
    assert "c_replay_mismatch" in found
    details = check_dir(scenario.root).to_doc()["details"]["c_replay_mismatch"]
    assert any("not the revision's canonical bytes" in d for d in details), details


# ------------------------------------------------------------------ crash windows


def _intent(attempts: int = 1) -> PendingClaim:
    return PendingClaim(offer_id=str(uuid.uuid4()), lease_token="A" * 43,
                        worker_id=str(uuid.uuid4()), session_id=str(uuid.uuid4()), generation=1,
                        capabilities_digest="sha256:" + "0" * 64, attempts=attempts,
                        next_attempt_at_ms=0, created_at_ms=0)  # fmt: skip


def test_journal_points_fire_at_their_steps_of_the_claim_protocol(scenario: Scenario) -> None:
    """Each journal point (worker/faults.py) is met once per step it names, in order."""
    hits: list[str] = []
    plan = FaultPlan(pause_at=JOURNAL_POINTS)
    fs = plan.journal_fs(announce=lambda _action, point: hits.append(point),
                         pause=lambda _s: None)  # fmt: skip
    assert fs is not None and FaultPlan().journal_fs(announce=print, pause=print) is None
    stored = json.loads(scenario.inbox_file(scenario.accepted[3]).read_text())
    with Journal.open(str(scenario.root / "faulty"), fs=fs, refresher=False) as journal:
        assert hits == []  # opening (directories, temp sweep) meets no point
        journal.save_pending(_intent())
        journal.accept(InboxEntry.from_doc(stored))
        journal.clear_pending()
        journal.save_pending(_intent())
        journal.move_pending_aside("conflict_lease_expired")
    assert hits == [
        "intent_replace",
        "inbox_link",
        "pending_unlink",
        "intent_replace",
        "aside_replace",
        "pending_unlink",
    ]


_CRASH_SCRIPT = """
import os
import sys
from qinglong.worker.faults import FaultPlan
from qinglong.worker.journal import Journal
from tests.py.test_chaos_checker import _intent

fs = FaultPlan.from_env(os.environ).journal_fs(announce=lambda *a: None, pause=lambda s: None)
with Journal.open(sys.argv[1], fs=fs, refresher=False) as journal:
    if sys.argv[2] == "aside":
        journal.move_pending_aside("conflict_lease_expired")
    else:
        journal.save_pending(_intent(attempts=2))
print("survived")
"""


@pytest.mark.parametrize("point", ["intent_replace", "aside_replace"])
def test_a_crash_in_a_journal_window_is_a_real_sigkill_that_converges(
    tmp_path: Path, point: str
) -> None:
    root = tmp_path / "journal"
    with Journal.open(str(root), refresher=False) as journal:
        journal.save_pending(_intent(attempts=1))
    env = dict(os.environ, QL_WORKER_CRASH_AT=point)
    action = "aside" if point == "aside_replace" else "save"
    done = subprocess.run([sys.executable, "-c", _CRASH_SCRIPT, str(root), action], env=env,
                          cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    assert "survived" not in done.stdout
    view = read_journal(root)
    assert any(".tmp-" in problem for problem in view.problems)  # killed mid-protocol
    with Journal.open(str(root), refresher=False) as journal:  # temp files swept on open
        pending = journal.load_pending()
        assert pending is not None and pending.attempts == 1  # the old intent, whole
        assert journal.failed_claim_ids() == []
    assert read_journal(root).problems == []


# ------------------------------------------------------------------ mutants


def test_every_mutant_has_its_header_and_applies_to_the_checkout() -> None:
    from tools.chaos.checker import CLASSES
    from tools.chaos.mutate import check_applies, load_mutants

    mutants = load_mutants()
    names = {f"{k}_{v}" for k, v in CLASSES.items()}
    for mutant in mutants:
        check_applies(mutant)  # raises MutantError when it no longer applies
        assert set(mutant.expected_classes) <= names, mutant
        assert mutant.rationale and mutant.guarantee
    assert len({m.guarantee for m in mutants}) == len(mutants)  # one guarantee each
    assert len(mutants) >= 10


def test_a_mutant_that_no_longer_applies_fails_the_command(tmp_path: Path) -> None:
    from tools.chaos.mutate import MutantError, check_applies, load_mutants

    patch = tmp_path / "99-stale.patch"
    patch.write_text("Rationale: a patch of lines that are not there.\nGuarantee: none\n"
                     "Expect: c_replay_mismatch\n\ndiff --git a/worker/faults.py b/worker/faults."
                     "py\n--- a/worker/faults.py\n+++ b/worker/faults.py\n@@ -1,1 +1,1 @@\n"
                     "-no such line\n+a mutant\n")  # fmt: skip
    [mutant] = load_mutants(tmp_path)
    with pytest.raises(MutantError, match="no longer applies"):
        check_applies(mutant)
    (tmp_path / "98-headless.patch").write_text("diff --git a/x b/x\n")
    with pytest.raises(MutantError, match="header needs"):
        load_mutants(tmp_path)
    done = subprocess.run([sys.executable, "-m", "tools.chaos", "mutate", "--only", "nope",
                           "--check"], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 2 and "no such mutant: nope" in done.stderr


def test_a_mutant_copy_is_what_its_soak_imports(tmp_path: Path) -> None:
    """The copy (patched) shadows the editable install for every process of its soak."""
    from tools.chaos.mutate import _git, copy_checkout, isolated_env, load_mutants, package_root

    tree = tmp_path / "tree"
    copy_checkout(tree)
    mutant = next(m for m in load_mutants() if m.path.read_text().count("sweep_leases.sql"))
    assert _git(["apply", str(mutant.path)], tree).returncode == 0
    package_root(tree)
    env = isolated_env(tree)
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.resources as r; print(r.files('qinglong.db')"
         ".joinpath('functions/sweep_leases.sql').read_text())"],
        cwd="/", env=env, capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert probe.stdout == (tree / "db/functions/sweep_leases.sql").read_text() + "\n"
    assert (
        probe.stdout
        != (Path(__file__).resolve().parents[2] / "db/functions/sweep_leases.sql").read_text()
        + "\n"
    )


# ------------------------------------------------------------------ executing workers (h)

EXEC_TASK = {"expect": "succeeded", "exitCode": 0, "execOnly": False, "maxAttempts": 3,
             "retryBaseMs": 200, "retryCapMs": 1000, "leaseTtlS": 5}  # fmt: skip


def _with_task(scene: Scenario, **settings: Any) -> None:
    """The manifest names the scenario's task with a policy (what the soak writes)."""
    task_id = scene.sql("SELECT id::text FROM ql_private.tasks")[0][0]
    path = scene.root / MANIFEST_FILE
    doc = json.loads(path.read_text())
    doc["tasks"] = {"chaos": dict(EXEC_TASK, taskId=task_id, **settings)}
    path.write_text(json.dumps(doc))


def _set_manifest_worker(scene: Scenario, name: str, **fields: Any) -> None:
    path = scene.root / MANIFEST_FILE
    doc = json.loads(path.read_text())
    doc["workers"][name].update(fields)
    path.write_text(json.dumps(doc))


def _attempt(scene: Scenario, run_id: str) -> str:
    return scene.sql("SELECT current_attempt_id::text FROM ql_private.runs WHERE id = %s", run_id)[
        0
    ][0]


def _event(scene: Scenario, kind: str, run_id: str, attempt_id: str | None) -> None:
    scene.sql(
        "INSERT INTO ql_private.events (type, run_id, attempt_id, payload)"
        " VALUES (%s, %s, %s, '{}')",
        kind,
        run_id,
        attempt_id,
    )


def _end_run(scene: Scenario, run_id: str, state: str, *, attempt_state: str | None = None,
             exit_code: int | None = None, reason: str | None = None,
             events: tuple[str, ...] | None = None) -> str:  # fmt: skip
    """End the run's current attempt and the run itself, with the events the
    product writes for it (pass `events` to plant others)."""
    attempt_id = _attempt(scene, run_id)
    attempt_state = attempt_state or state
    scene.sql(
        "UPDATE ql_private.attempts SET state = %s, exit_code = %s, reason = %s,"
        " finished_at = clock_timestamp() WHERE id = %s",
        attempt_state,
        exit_code,
        reason,
        attempt_id,
    )
    scene.sql(
        "UPDATE ql_private.runs SET state = %s, finished_at = clock_timestamp() WHERE id = %s",
        state,
        run_id,
    )
    ending = {"succeeded": "run.succeeded", "failed": "attempt.failed",
              "cancelled": "run.cancelled"}[attempt_state]  # fmt: skip
    default = (ending,) if ending == f"run.{state}" else (ending, f"run.{state}")
    for kind in default if events is None else events:
        _event(scene, kind, run_id, attempt_id)
    return attempt_id


def _exec_op(scene: Scenario, name: str, value: str, offer_id: str, attempt_id: str,
             **extra: Any) -> None:  # fmt: skip
    scene.ops.append(
        Op(
            int(time.time() * 1000),
            name,
            "info",
            "exec",
            offer_id=offer_id,
            value=value,
            extra={"attemptId": attempt_id, **extra},
        )
    )


def _h_details(scene: Scenario) -> list[str]:
    return check_dir(scene.root).to_doc()["details"].get("h_execution", [])


def test_an_attempt_started_twice_is_an_anomaly(scenario: Scenario) -> None:
    first, second = scenario.accepted[0], scenario.accepted[1]  # one attempt, two leases
    attempt_id = _attempt(scenario, first.run_id)
    _exec_op(scenario, "w01", "started", first.offer_id, attempt_id)
    assert _finish(scenario) == set()
    _exec_op(scenario, "w02", "started", second.offer_id, attempt_id)
    assert _finish(scenario) == {"h_execution"}
    assert any("a command was started 2 times" in d for d in _h_details(scenario))


def test_two_started_leases_of_one_attempt_are_an_anomaly(scenario: Scenario) -> None:
    for item in scenario.accepted[:2]:
        scenario.sql(
            "UPDATE ql_private.run_leases SET started_at = claimed_at WHERE offer_id = %s",
            item.offer_id,
        )
    scenario.sql(
        "UPDATE ql_private.attempts SET state = 'running' WHERE id = %s",
        _attempt(scenario, scenario.accepted[0].run_id),
    )
    scenario.sql(
        "UPDATE ql_private.runs SET state = 'running' WHERE id = %s", scenario.accepted[0].run_id
    )
    assert "h_execution" in _finish(scenario)
    assert any("2 leases started" in d for d in _h_details(scenario))


def test_an_attempt_ends_with_exactly_one_event(scenario: Scenario) -> None:
    run_id = _unleased_run(scenario)
    attempt_id = _end_run(scenario, run_id, "succeeded")
    assert _finish(scenario) == set()
    _event(scenario, "run.succeeded", run_id, attempt_id)  # a second completion
    assert _finish(scenario) == {"h_execution"}
    assert any("2 run.succeeded events" in d for d in _h_details(scenario))


def test_an_unended_attempt_with_an_ending_event_is_an_anomaly(scenario: Scenario) -> None:
    run_id = _unleased_run(scenario)
    _event(scenario, "attempt.failed", run_id, _attempt(scenario, run_id))
    assert _finish(scenario) == {"h_execution"}
    assert any("still claimed after attempt.failed" in d for d in _h_details(scenario))


def test_a_completion_the_database_does_not_show_is_an_anomaly(scenario: Scenario) -> None:
    run_id = _unleased_run(scenario)
    attempt_id = _attempt(scenario, run_id)
    _exec_op(scenario, "w01", "completed", str(uuid.uuid4()), attempt_id, outcome="succeeded")
    assert _finish(scenario) == {"h_execution"}
    assert any("attempt" in d and "is claimed" in d for d in _h_details(scenario))
    _end_run(scenario, run_id, "succeeded")
    assert _finish(scenario) == set()


@pytest.mark.parametrize(("expect", "exit_code", "anomaly"), [
    ("failed", 3, False), ("failed", 2, True), ("succeeded", 3, True),
])  # fmt: skip
def test_a_failure_the_command_cannot_have_had_is_an_anomaly(
        scenario: Scenario, expect: str, exit_code: int, anomaly: bool) -> None:  # fmt: skip
    _with_task(scenario, expect=expect, exitCode=3, maxAttempts=1)
    _end_run(
        scenario, _unleased_run(scenario), "failed", exit_code=exit_code, reason="exit_nonzero"
    )
    assert _finish(scenario) == ({"h_execution"} if anomaly else set())


def test_a_success_of_a_command_that_always_fails_is_an_anomaly(scenario: Scenario) -> None:
    _with_task(scenario)
    run_id = _unleased_run(scenario)
    _end_run(scenario, run_id, "succeeded")
    assert _finish(scenario) == set()
    _with_task(scenario, expect="failed", exitCode=3)
    assert _finish(scenario) == {"h_execution"}
    assert any("always failed: succeeded" in d for d in _h_details(scenario))


def _retried(scene: Scenario, run_id: str, due_in_s: float) -> None:
    """Attempt 1 failed, attempt 2 scheduled `due_in_s` later (apply_retry's writes)."""
    _end_run(
        scene,
        run_id,
        "queued",
        attempt_state="failed",
        exit_code=3,
        reason="exit_nonzero",
        events=("attempt.failed",),
    )
    row = scene.sql(
        "INSERT INTO ql_private.attempts (run_id, attempt_no, executor, state, not_before,"
        " created_at, max_attempts, retry_base_ms, retry_cap_ms)"
        " SELECT %s::uuid, 2, 'remote_worker', 'claimed',"
        " clock_timestamp() + make_interval(secs => %s), clock_timestamp(),"
        " a.max_attempts, a.retry_base_ms, a.retry_cap_ms FROM ql_private.attempts a"
        " WHERE a.run_id = %s AND a.attempt_no = 1 RETURNING id::text",
        run_id,
        due_in_s,
        run_id,
    )
    scene.sql(
        "UPDATE ql_private.runs SET current_attempt_id = %s, finished_at = NULL WHERE id = %s",
        row[0][0],
        run_id,
    )
    _event(scene, "run.retry_scheduled", run_id, row[0][0])


def test_a_retry_within_the_policy_is_no_anomaly(scenario: Scenario) -> None:
    _with_task(scenario, expect="failed", exitCode=3, maxAttempts=3)
    _retried(scenario, _unleased_run(scenario), 0.1)
    assert _finish(scenario) == set()


def test_a_retry_due_later_than_the_backoff_cap_is_an_anomaly(scenario: Scenario) -> None:
    _with_task(scenario, expect="failed", exitCode=3, maxAttempts=3)
    _retried(scenario, _unleased_run(scenario), 5.0)  # attempt 1's cap: 200 ms
    assert _finish(scenario) == {"h_execution"}
    assert any("policy allows 0..0.200s" in d for d in _h_details(scenario))


def test_more_attempts_than_the_policy_allows_is_an_anomaly(scenario: Scenario) -> None:
    _with_task(scenario, expect="failed", exitCode=3, maxAttempts=1)
    _retried(scenario, _unleased_run(scenario), 0.1)
    assert _finish(scenario) == {"h_execution"}
    assert any("2 attempts, policy allows 1" in d for d in _h_details(scenario))


def test_a_run_failed_with_attempts_left_is_an_anomaly(scenario: Scenario) -> None:
    _with_task(scenario, expect="failed", exitCode=3, maxAttempts=3)
    _end_run(scenario, _unleased_run(scenario), "failed", exit_code=3, reason="exit_nonzero")
    assert _finish(scenario) == {"h_execution"}
    assert any("failed after 1 of 3 attempts" in d for d in _h_details(scenario))
    _with_task(scenario, expect="failed", exitCode=3, maxAttempts=1)
    assert _finish(scenario) == set()


def _cancel_op(scene: Scenario, run_id: str, state: str, ts_ms: int | None = None) -> None:
    ts = ts_ms if ts_ms is not None else int(time.time() * 1000)
    scene.ops.append(Op(ts, "client", OK, "cancel", run_id=run_id, value=state))


def test_a_cancelled_answer_for_a_run_that_did_not_end_cancelled(scenario: Scenario) -> None:
    run_id = _unleased_run(scenario)
    _cancel_op(scenario, run_id, "cancelled")
    assert _finish(scenario) == {"h_execution"}
    assert any("the run ended queued" in d for d in _h_details(scenario))
    _end_run(scenario, run_id, "cancelled")
    assert _finish(scenario) == set()


def test_a_lease_claimed_after_the_cancel_was_answered(scenario: Scenario) -> None:
    item = scenario.accepted[3]
    _cancel_op(scenario, item.run_id, "dispatching", ts_ms=int(time.time() * 1000) - 60_000)
    assert _finish(scenario) == {"h_execution"}
    assert any("claimed" in d and "later" in d for d in _h_details(scenario))
    scenario.ops.pop()
    _cancel_op(scenario, item.run_id, "dispatching")
    assert _finish(scenario) == set()


@pytest.mark.parametrize(("duration_ms", "anomaly"), [(3000, False), (20000, True)])
def test_a_command_that_ran_on_after_its_cancel(scenario: Scenario, duration_ms: int,
                                                anomaly: bool) -> None:  # fmt: skip
    """Cancel answered 1 s into a 20 s command: a heartbeat within the lease TTL
    must have stopped it; one that ended on its own within 3 s is fine."""
    _with_task(scenario)
    item = scenario.accepted[3]
    scenario.sql(
        "UPDATE ql_private.run_leases SET started_at = claimed_at, released_at ="
        " clock_timestamp(), release_reason = 'completed' WHERE offer_id = %s",
        item.offer_id,
    )
    attempt_id = _end_run(scenario, item.run_id, "succeeded")
    scenario.sql(
        "UPDATE ql_private.attempts SET result = jsonb_build_object('durationMs', %s)"
        " WHERE id = %s",
        duration_ms,
        attempt_id,
    )
    claimed_ms = scenario.sql(
        "SELECT (extract(epoch FROM claimed_at) * 1000)::bigint FROM"
        " ql_private.run_leases WHERE offer_id = %s",
        item.offer_id,
    )[0][0]
    _cancel_op(scenario, item.run_id, "running", ts_ms=claimed_ms + 1000)
    assert _finish(scenario) == ({"h_execution"} if anomaly else set())
    if anomaly:
        assert any("ran on for 19.0s and succeeded" in d for d in _h_details(scenario))


# ------------------------------------------------------------------ slots and placement (i)


def _synthetic(leases: list[dict[str, Any]], *, slots: int, required: dict[str, Any],
               labels: dict[str, str]) -> set[str]:  # fmt: skip
    """A synthetic cut: one worker, one session, one revision, these leases."""
    from tools.chaos.checker import check
    from tools.chaos.facts import Inputs

    snapshot = {
        "takenAtUs": 100_000_000, "leases": leases, "dispatched": [], "runs": [],
        "attempts": [], "sessions": [{"sessionId": "s1", "workerId": "W", "generation": 1,
                                      "state": "active", "openedAtUs": 0,
                                      "expiresAtUs": 200_000_000, "closedAtUs": None,
                                      "slots": slots}],
        "revisions": [{"id": "r1", "placement": {"required": {"labels": required}}}],
        "runEvents": [],
    }  # fmt: skip
    manifest = {"workers": {"w01": {"workerId": "W", "journal": "journals/w01",
                                    "labels": labels}}}  # fmt: skip
    inputs = Inputs(manifest=manifest, ops=[], snapshot=snapshot, journals={})
    return {a.name for a in check(inputs).anomalies if a.cls == "i"}


def _lease(offer: str, claimed: int, expires: int, *, started: int | None = None,
           released: int | None = None) -> dict[str, Any]:  # fmt: skip
    return {"id": offer, "offerId": offer, "attemptId": f"a-{offer}", "runId": f"r-{offer}",
            "workerId": "W", "revisionId": "r1", "sessionId": "s1", "claimedAtUs": claimed,
            "expiresAtUs": expires, "startedAtUs": started, "releasedAtUs": released,
            "releaseReason": "completed" if released else None}  # fmt: skip


def test_more_live_leases_than_slots_is_an_anomaly() -> None:
    one_after_another = [_lease("o1", 0, 10), _lease("o2", 10, 20), _lease("o3", 15, 30)]
    assert _synthetic(one_after_another, slots=2, required={}, labels={}) == set()
    # A started lease holds its slot past its expiry until it is released.
    started = [
        _lease("o1", 0, 10, started=5, released=50),
        _lease("o2", 20, 40),
        _lease("o3", 30, 60),
    ]
    assert _synthetic(started, slots=2, required={}, labels={}) == {"i_placement"}


def test_a_lease_to_a_worker_without_the_required_label_is_an_anomaly() -> None:
    leases = [_lease("o1", 0, 10)]
    required = {"fleet": ["exec"]}
    assert _synthetic(leases, slots=2, required=required, labels={"fleet": "exec"}) == set()
    assert _synthetic(leases, slots=2, required=required, labels={}) == {"i_placement"}
    assert _synthetic(leases, slots=2, required=required,
                      labels={"fleet": "other"}) == {"i_placement"}  # fmt: skip


# ------------------------------------------------------------ owner lock, finished entries (f)


def test_a_second_process_that_ran_on_a_held_journal_is_an_anomaly(scenario: Scenario) -> None:
    def double(outcome: str) -> Op:
        return Op(
            int(time.time() * 1000),
            "nemesis",
            OK,
            "double_start",
            value="w01",
            extra={"outcome": outcome, "exitCode": 1},
        )

    scenario.ops += [double("refused"), double("undecided"), double("owner_gone")]
    assert _finish(scenario) == set()
    scenario.ops.append(double("ran"))
    assert _finish(scenario) == {"f_journal_invalid"}


def test_an_executing_worker_keeps_no_entry_of_a_released_lease(scenario: Scenario) -> None:
    """w01's inbox holds run 1's stale entry (its lease released expired)."""
    assert _finish(scenario) == set()
    _set_manifest_worker(scenario, "w01", execute=True)
    found = _finish(scenario)
    assert found == {"f_journal_invalid"}
    details = check_dir(scenario.root).to_doc()["details"]["f_journal_invalid"]
    assert any(scenario.accepted[0].offer_id in d and "released expired" in d for d in details)
    stale = scenario.accepted[0]
    scenario.inbox_file(stale).unlink()  # removed, as the executor does, after its line:
    _exec_op(scenario, "w01", "abandoned", stale.offer_id, _attempt(scenario, stale.run_id))
    assert _finish(scenario) == set()


def test_worker_log_maps_executor_events_onto_ops(tmp_path: Path) -> None:
    log = tmp_path / "w01.log"
    lines = [
        {"ts": 1, "event": "exec.started", "offerId": "o1", "runId": "r1", "attemptId": "a1",
         "pid": 7},
        {"ts": 2, "event": "exec.completed", "offerId": "o1", "runId": "r1",
         "attemptId": "a1", "outcome": "failed", "exitCode": 3, "reason": "exit_nonzero"},
        {"ts": 3, "event": "exec.abandoned", "offerId": "o2", "category": "lease_expired",
         "phase": "start"},
        {"ts": 4, "event": "exec.lease_retry", "offerId": "o2"},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(doc) + "\n" for doc in lines))
    ops = worker_log_ops("w01", log)
    assert [(op.f, op.value, op.offer_id) for op in ops] == [
        ("exec", "started", "o1"),
        ("exec", "completed", "o1"),
        ("exec", "abandoned", "o2"),
    ]
    assert ops[1].extra == {"attemptId": "a1", "outcome": "failed", "exitCode": 3}
    assert ops[1].reason == "exit_nonzero" and ops[2].reason == "lease_expired"


def test_an_executing_worker_drops_an_entry_only_with_its_log_line(scenario: Scenario) -> None:
    """Run 3's intent has no outcome (the worker died after clearing it), its lease
    expired and was re-queued, and its inbox entry is gone: an anomaly, unless the
    worker is an executing one that logged giving the lease up (exec.abandoned)."""
    item, stale = scenario.accepted[3], scenario.accepted[0]
    scenario.ops = [op for op in scenario.ops
                    if not (op.offer_id == item.offer_id and op.type == OK)]  # fmt: skip
    scenario.inbox_file(item).unlink()
    _age_lease(scenario, item.offer_id)
    scenario.sql(
        "UPDATE ql_private.run_leases SET released_at = expires_at,"
        " release_reason = 'expired' WHERE offer_id = %s",
        item.offer_id,
    )
    scenario.sql("UPDATE ql_private.runs SET state = 'queued' WHERE id = %s", item.run_id)
    assert _finish(scenario) == {"e_unresolved_intent"}
    _set_manifest_worker(scenario, "w01", execute=True)
    scenario.inbox_file(stale).unlink()  # the executor dropped the stale one too ...
    assert _finish(scenario) == {"e_unresolved_intent", "f_journal_invalid"}
    for gone in (item, stale):  # ... and says so, as it does
        _exec_op(scenario, "w01", "abandoned", gone.offer_id, _attempt(scenario, gone.run_id))
    assert _finish(scenario) == set()


def test_a_second_process_is_started_only_against_an_established_owner(tmp_path: Path) -> None:
    """The soak's double_start targets a worker whose current process got past its
    journal: its own start line (by pid), then a session or claim line."""
    from tools.chaos.soak import _owns_journal

    log = tmp_path / "w01.log"
    lines = [{"event": "worker.starting", "pid": 1}, {"event": "session.opened"},
             {"event": "worker.starting", "pid": 2}]  # fmt: skip
    log.write_text("".join(json.dumps(doc) + "\n" for doc in lines))
    assert not _owns_journal(log, 1)  # an older process of the same log
    assert not _owns_journal(log, 2)  # started, not past its journal yet
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"event": "claim.idle", "offerId": "o1"}) + "\n")
    assert _owns_journal(log, 2)
    assert not _owns_journal(tmp_path / "missing.log", 2)


# ------------------------------------------------------------------ the hostile worker (j)

BYZ_KINDS = {
    "ack_foreign": "/v1/leases/ack",
    "complete_foreign": "/v1/leases/complete",
    "pull_foreign_offer": "/v1/offers/pull",
    "session_close_foreign": "/v1/sessions/close",
    "credential_wrong_secret": "/v1/sessions/heartbeat",
    "pull_own": "/v1/offers/pull",
    "own_ack_stale_version": "/v1/leases/ack",
    "own_complete_replay": "/v1/leases/complete",
    "own_complete": "/v1/leases/complete",
    "session_open_foreign_labels": "/v1/sessions",
}


def _hostile_worker(scene: Scenario) -> tuple[str, Session]:
    """A third identity, registered like the others, named in the manifest as the
    soak's hostile worker (not one of its journaled workers)."""
    with psycopg.connect(scene.dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        worker = prov.worker("byz")
        session = prov.session(worker)
    path = scene.root / MANIFEST_FILE
    doc = json.loads(path.read_text())
    doc["byzantine"] = {"name": "byz", "workerId": worker.worker_id}
    path.write_text(json.dumps(doc))
    return worker.worker_id, session


def _hostile_op(scene: Scenario, kind: str, answer: str, expect: tuple[str, ...], *,
                target: str, offer_id: str | None = None, **extra: Any) -> None:  # fmt: skip
    """One request of the hostile worker as tools/chaos/byzantine.py records it."""
    status, _, reason = answer.partition(":")
    scene.ops.append(Op(int(time.time() * 1000), "byz", OK, "byz", offer_id=offer_id,
                        value=kind, reason=reason or None, src="byzantine",
                        extra={"path": BYZ_KINDS[kind], "status": int(status),
                               "expect": list(expect), "target": target,
                               "sentAtMs": int(time.time() * 1000) - 5, **extra}))  # fmt: skip


def _byz_classes(scene: Scenario) -> set[str]:
    return {a.name for a in check_dir(scene.root).anomalies}


@pytest.mark.parametrize(("kind", "answer", "flagged"), [
    ("ack_foreign", "409:offer_foreign", False),
    ("ack_foreign", "200", True),  # it changed (ACKed) another worker's lease
    ("complete_foreign", "200", True),
    ("complete_foreign", "409:token_mismatch", True),  # refused, not as promised
    ("session_close_foreign", "409:session_not_found", False),
    ("session_close_foreign", "200", True),  # it closed another worker's session
])  # fmt: skip
def test_hostile_request_on_another_workers_lease_is_judged(
        scenario: Scenario, kind: str, answer: str, flagged: bool) -> None:  # fmt: skip
    _hostile_worker(scenario)
    victim = scenario.accepted[2]  # w02's live lease
    target = "foreign_session" if kind.startswith("session") else "foreign"
    _hostile_op(
        scenario,
        kind,
        answer,
        ("409:session_not_found",) if target == "foreign_session" else ("409:offer_foreign",),
        target=target,
        offer_id=None if target == "foreign_session" else victim.offer_id,
        victim="w02",
        sentVersion=1,
        answerVersion=2 if answer == "200" else None,
    )
    found = _finish(scenario)
    assert found == ({"j_byzantine"} if flagged else set()), check_dir(scenario.root).to_doc()
    report = check_dir(scenario.root)
    if flagged:
        [detail] = report.to_doc()["details"]["j_byzantine"]
        assert ("served" if answer == "200" else "the contract allows") in detail, detail
    assert report.counts["byzJudged"] == 1


@pytest.mark.parametrize(
    ("answer", "flagged"),
    [("401:invalid_credential", False), ("200", True), ("403:worker_mismatch", True)],
)
def test_hostile_answer_outside_the_contract_is_an_anomaly(
        scenario: Scenario, answer: str, flagged: bool) -> None:  # fmt: skip
    _hostile_worker(scenario)
    _hostile_op(scenario, "credential_wrong_secret", answer, ("401:invalid_credential",),
                target="own")  # fmt: skip
    assert _finish(scenario) == ({"j_byzantine"} if flagged else set())


def test_hostile_idle_answer_is_excused_only_for_a_lease_already_over(
        scenario: Scenario) -> None:  # fmt: skip
    """The idle view's residual: idle for a lease released or started before the
    answer; never for a live unstarted one."""
    _hostile_worker(scenario)
    over, live = scenario.accepted[0], scenario.accepted[2]  # released expired; live
    for item in (over, live):
        _hostile_op(scenario, "pull_foreign_offer", "200:idle",
                    ("409:offer_foreign", "200:idle"), target="foreign",
                    offer_id=item.offer_id, victim=item.process)  # fmt: skip
    assert _finish(scenario) == {"j_byzantine"}
    [detail] = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
    assert live.offer_id in detail and "live and unstarted" in detail


def _hostile_lease(scene: Scenario, session: Session) -> str:
    """The hostile worker claims a run for real, and its lease expires (as in the
    soak, where it stops before the heal); the run is queued again."""
    intent = Intent()
    with psycopg.connect(scene.dsn, autocommit=True) as conn:
        result = Provisioner(conn).pull(session, intent)
    assert result["status"] == "offered", result
    _age_lease(scene, intent.offer_id)
    scene.sql(
        "UPDATE ql_private.run_leases SET released_at = expires_at,"
        " release_reason = 'expired' WHERE offer_id = %s",
        intent.offer_id,
    )
    scene.sql(
        "UPDATE ql_private.runs SET state = 'queued' WHERE id = %s",
        result["offer"]["candidate"]["runId"],
    )
    return intent.offer_id


def test_hostile_lease_without_an_honest_pull_is_an_anomaly(scenario: Scenario) -> None:
    _, session = _hostile_worker(scenario)
    offer_id = _hostile_lease(scenario, session)
    assert _finish(scenario) == {"j_byzantine"}  # no pull of its own gave it this lease
    _hostile_op(scenario, "pull_own", "200:offered", ("200:offered", "200:idle"),
                target="own", offer_id=offer_id, labels={"fleet": "Exec"})  # fmt: skip
    assert _finish(scenario) == set()
    # A completion answered 200 for an offer it never claimed: someone else's run.
    _hostile_op(scenario, "own_complete", "200", ("200", "409:lease_expired"), target="own",
                offer_id=scenario.accepted[2].offer_id)  # fmt: skip
    assert _finish(scenario) == {"j_byzantine"}


def test_hostile_lease_is_placed_by_its_exact_labels(scenario: Scenario) -> None:
    """Its labels are case/space variants of `fleet=exec`: a run requiring the exact
    label must never reach it."""
    _, session = _hostile_worker(scenario)
    offer_id = _hostile_lease(scenario, session)
    for labels, flagged in (({"fleet": "Exec"}, True), ({"fleet": "exec"}, False)):
        scenario.ops = [op for op in scenario.ops if op.process != "byz"]
        _hostile_op(scenario, "pull_own", "200:offered", ("200:offered", "200:idle"),
                    target="own", offer_id=offer_id, labels=labels)  # fmt: skip
        assert _finish(scenario) == set()  # the revision requires nothing
        snapshot = json.loads((scenario.root / SNAPSHOT_FILE).read_text())
        for revision in snapshot["revisions"]:
            revision["placement"] = {"required": {"labels": {"fleet": ["exec"]}}}
        write_json(scenario.root / SNAPSHOT_FILE, snapshot)
        found = scenario.check()  # (the other workers' leases break it too: i)
        assert ("j_byzantine" in found) == flagged, (labels, found)


def test_hostile_repeat_that_changed_its_lease_is_an_anomaly(scenario: Scenario) -> None:
    """An exact repeat of a completion answers the lease it already got (it writes
    nothing); a repeat answered with a newer version applied the change twice."""
    _, session = _hostile_worker(scenario)
    offer_id = _hostile_lease(scenario, session)
    _hostile_op(scenario, "pull_own", "200:offered", ("200:offered",), target="own",
                offer_id=offer_id, labels={})  # fmt: skip
    for version, flagged in ((3, False), (4, True)):
        scenario.ops = [op for op in scenario.ops if op.value != "own_complete_replay"]
        _hostile_op(scenario, "own_complete_replay", "200", ("200",), target="own",
                    offer_id=offer_id, expectVersion=3, answerVersion=version)  # fmt: skip
        assert _finish(scenario) == ({"j_byzantine"} if flagged else set())


def test_hostile_refusal_of_a_legitimate_call_needs_its_cause(scenario: Scenario) -> None:
    """Its own ACK refused lease_expired: the lease must have been past expires_at."""
    _, session = _hostile_worker(scenario)
    intent = Intent()
    with psycopg.connect(scenario.dsn, autocommit=True) as conn:
        result = Provisioner(conn).pull(session, intent)
    scenario.ops.append(Op(int(time.time() * 1000), "byz", OK, "byz",
                           offer_id=intent.offer_id, value="pull_own", reason="offered",
                           src="byzantine",
                           extra={"path": "/v1/offers/pull", "status": 200, "target": "own",
                                  "expect": ["200:offered"], "labels": {}}))  # fmt: skip
    _hostile_op(scenario, "own_ack_stale_version", "409:lease_expired",
                ("409:stale_lease_version", "409:lease_expired"), target="own",
                offer_id=intent.offer_id)  # fmt: skip
    scenario.sql(
        "UPDATE ql_private.runs SET state = 'queued' WHERE id = %s",
        result["offer"]["candidate"]["runId"],
    )
    scenario.sql(
        "UPDATE ql_private.run_leases SET released_at = clock_timestamp(),"
        " release_reason = 'cancelled' WHERE offer_id = %s",
        intent.offer_id,
    )
    found = _finish(scenario)  # released later, cancelled: no expiry before the answer
    assert "j_byzantine" in found, found
    detail = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
    assert any("refused lease_expired" in d for d in detail), detail


def test_hostile_worker_that_got_no_answer_is_an_anomaly(scenario: Scenario) -> None:
    _hostile_worker(scenario)
    assert _finish(scenario) == {"j_byzantine"}  # named in the manifest, never answered


def test_hostile_own_session_refusal_needs_the_session_ended(scenario: Scenario) -> None:
    """Its own pull refused `session_replaced` (a lost answer to an open replaced its
    session): only with the session closed in the database before the answer."""
    _, session = _hostile_worker(scenario)
    _hostile_op(scenario, "pull_own", "409:session_replaced", (), target="own",
                offer_id=str(uuid.uuid4()), sentSessionId=session.session_id)  # fmt: skip
    assert _finish(scenario) == {"j_byzantine"}  # its session is live: no cause
    scenario.sql("UPDATE ql_private.worker_sessions SET state = 'closed', closed_at ="
                 " clock_timestamp() - interval '10 seconds' WHERE session_id = %s",
                 session.session_id)  # fmt: skip
    assert _finish(scenario) == set()


def test_a_lease_call_on_a_worker_without_the_executor_is_caught_in_the_database(
        scenario: Scenario) -> None:  # fmt: skip
    """Whatever the hostile worker's answers said: w02 runs no executor and never
    makes a lease call, so its lease started in the database was started by
    someone else's call."""
    _hostile_worker(scenario)
    _hostile_op(scenario, "ack_foreign", "409:offer_foreign", (), target="foreign",
                offer_id=scenario.accepted[2].offer_id, victim="w02")  # fmt: skip
    assert _finish(scenario) == set()
    item = scenario.accepted[2]
    attempt = _attempt(scenario, item.run_id)
    scenario.sql(
        "UPDATE ql_private.run_leases SET started_at = clock_timestamp() WHERE offer_id = %s",
        item.offer_id,
    )
    scenario.sql("UPDATE ql_private.attempts SET state = 'starting' WHERE id = %s", attempt)
    scenario.sql("UPDATE ql_private.runs SET state = 'starting' WHERE id = %s", item.run_id)
    found = _finish(scenario)
    assert "j_byzantine" in found, found
    details = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
    assert any(item.offer_id in d and "another's call" in d for d in details), details


def _grant_only(scene: Scenario, worker_id: str, pool: str, labels: dict[str, str]) -> None:
    """The hostile worker of the soak: granted one pool of the project (created
    here) and `labels`, neither every pool nor self-labels (SPEC §13)."""
    scene.sql(
        "INSERT INTO ql_private.pools (project_id, name) SELECT project_id, %s"
        " FROM ql_private.pools WHERE name = 'default' LIMIT 1",
        pool,
    )
    scene.sql(
        "UPDATE ql_private.workers SET all_pools = false, self_labels = false WHERE id = %s::uuid",
        worker_id,
    )
    scene.sql(
        "INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id) SELECT %s::uuid,"
        " id FROM ql_private.pools WHERE name = %s",
        worker_id,
        pool,
    )
    for key, value in labels.items():
        scene.sql(
            "INSERT INTO ql_private.worker_labels (worker_id, key, value)"
            " VALUES (%s::uuid, %s, %s)",
            worker_id,
            key,
            value,
        )


def test_hostile_lease_on_a_pool_not_granted_to_it_is_an_anomaly(scenario: Scenario) -> None:
    """From the database alone: a lease of the hostile worker on a run of a pool it
    was not granted is flagged, whatever its answers said; granted the run's pool
    (or every pool), the same lease is fine."""
    worker_id, session = _hostile_worker(scenario)
    offer_id = _hostile_lease(scenario, session)  # a run of `default`
    _hostile_op(scenario, "pull_own", "200:offered", ("200:offered", "200:idle"),
                target="own", offer_id=offer_id, labels={})  # fmt: skip
    assert _finish(scenario) == set()  # granted every pool
    _grant_only(scenario, worker_id, "hostile", {})
    assert _finish(scenario) == {"j_byzantine"}
    [detail] = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
    assert offer_id in detail and "of pool" in detail and "not granted" in detail, detail
    scenario.sql(
        "INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id) SELECT"
        " %s::uuid, id FROM ql_private.pools WHERE name = 'default'",
        worker_id,
    )
    assert _finish(scenario) == set()


@pytest.mark.parametrize(
    ("answer", "flagged"),
    [("403:label_not_granted", False), ("201", True), ("400:invalid_label", True)],
)
def test_hostile_session_with_labels_not_granted_is_judged(
        scenario: Scenario, answer: str, flagged: bool) -> None:  # fmt: skip
    """A session declaring the honest fleet's labels must be refused 403
    label_not_granted (the checker's table)."""
    worker_id, _ = _hostile_worker(scenario)
    _grant_only(scenario, worker_id, "hostile", {"fleet": "Exec"})
    _hostile_op(scenario, "session_open_foreign_labels", answer, ("403:label_not_granted",),
                target="own", labels={"fleet": "exec"})  # fmt: skip
    assert _finish(scenario) == ({"j_byzantine"} if flagged else set())
    if flagged:
        [detail] = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
        assert "session_open_foreign_labels" in detail and "the contract allows" in detail


def test_hostile_session_declaring_labels_not_granted_is_an_anomaly(
        scenario: Scenario) -> None:  # fmt: skip
    """From the database alone: a session of the hostile worker (not self-labels)
    whose declared labels are not all granted is flagged (it was let in)."""
    worker_id, session = _hostile_worker(scenario)  # its session declares no label
    _grant_only(scenario, worker_id, "hostile", {"fleet": "Exec"})
    _hostile_op(
        scenario,
        "session_open_foreign_labels",
        "403:label_not_granted",
        ("403:label_not_granted",),
        target="own",
        labels={"fleet": "exec"},
    )
    assert _finish(scenario) == set()
    scenario.sql(
        "UPDATE ql_private.worker_sessions SET capabilities = jsonb_set(capabilities,"
        " '{labels}', '{\"fleet\": \"exec\"}') WHERE session_id = %s::uuid",
        session.session_id,
    )
    assert _finish(scenario) == {"j_byzantine"}
    [detail] = check_dir(scenario.root).to_doc()["details"]["j_byzantine"]
    assert session.session_id in detail and "not granted (fleet)" in detail, detail
