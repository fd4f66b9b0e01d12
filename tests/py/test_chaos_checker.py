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
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.worker.journal import InboxEntry, Journal
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
    scenario.sql("UPDATE ql_private.run_leases SET expires_at = clock_timestamp()"
                 " WHERE offer_id = %s", offer_id)


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
        " WHERE run_leases.offer_id = %s AND s.offer_id = %s", first.offer_id, second.offer_id)
    return {"a_lease_overlap"}


def plant_early_release(scene: Scenario) -> set[str]:
    """(a) a lease released as `expired` while it still had time: its holder overlaps."""
    scene.sql("UPDATE ql_private.run_leases SET expires_at = released_at + interval '1 h'"
              " WHERE offer_id = %s", scene.accepted[0].offer_id)
    return {"a_lease_overlap"}


def plant_second_live_lease(scene: Scenario) -> set[str]:
    """(a) a second live lease of one attempt, inserted as owner past the unique index."""
    item = scene.accepted[2]
    scene.sql("DROP INDEX ql_private.run_leases_one_live")
    scene.sql(
        "INSERT INTO ql_private.run_leases (attempt_id, run_id, worker_id, session_id,"
        " session_generation, lease_generation, lease_version, offer_id, token_digest,"
        " execution_revision_id, content_digest, placement_score, claimed_at, expires_at,"
        " updated_at) SELECT attempt_id, run_id, worker_id, session_id, session_generation,"
        " lease_generation + 1, 1, %s, token_digest, execution_revision_id, content_digest,"
        " placement_score, claimed_at + interval '1 ms', expires_at, updated_at"
        " FROM ql_private.run_leases WHERE offer_id = %s", str(uuid.uuid4()), item.offer_id)
    # Also: no run.dispatched for it (b), and nobody holds it (f); (d) may see it.
    return {"a_lease_overlap", "b_duplicate_claim", "f_journal_invalid"}


def plant_duplicate_dispatch(scene: Scenario) -> set[str]:
    """(b) a second run.dispatched event for one offer."""
    scene.sql(
        "INSERT INTO ql_private.events (type, run_id, attempt_id, payload)"
        " SELECT type, run_id, attempt_id, payload FROM ql_private.events"
        " WHERE type = 'run.dispatched' AND payload->>'offerId' = %s", scene.accepted[2].offer_id)
    return {"b_duplicate_claim"}


def plant_lost_run(scene: Scenario) -> set[str]:
    """(d) a run marked running with no lease at all: neither done, held nor claimable."""
    scene.sql(
        "UPDATE ql_private.runs SET state = 'running' WHERE id NOT IN"
        " (SELECT run_id FROM ql_private.run_leases)")
    return {"d_lost_run"}


DB_PLANTS: list[Callable[[Scenario], set[str]]] = [
    plant_overlap, plant_early_release, plant_second_live_lease, plant_duplicate_dispatch,
    plant_lost_run,
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
    scene.ops.append(Op(int(time.time() * 1000), item.process, "fail", "claim",
                        offer_id=item.offer_id, value="rejected", reason="OfferConflict"))
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
    plant_replay_digest, plant_wrong_token, plant_refused_replay, plant_orphaned_at_heal,
    plant_enqueued_missing, plant_unresolved, plant_idle_with_lease, plant_deleted_inbox,
    plant_loose_mode, plant_temp_file, plant_loose_root,
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
        Op(now, item.process, "info", "claim", offer_id=item.offer_id, value="retry",
           reason="NetworkError"),
        Op(now + 1, item.process, OK, "claim", offer_id=item.offer_id, value="idle",
           reason="capacity_full"),
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
    assert caught == set("abcdef")


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
        ("invoke", None), ("info", "retry"), ("ok", "accepted")]
    assert [(op.type, op.value) for op in ops if op.offer_id == other] == [
        ("invoke", None), ("ok", "idle"), ("fail", "conflict")]
    assert [op.index for op in ops] == list(range(len(ops)))
    build_history(tmp_path, {"w01": log}, [])
    assert read_history(tmp_path) == ops and (tmp_path / HISTORY_FILE).exists()
