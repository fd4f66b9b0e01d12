"""What the checker knows: its inputs, indexed (tools/chaos/checker.py).

The anomaly classes, the inputs of one soak (manifest, history, snapshots,
journals) and :class:`Facts`, the indexes every check reads: leases by offer and
by attempt, sessions, revisions, terminal events, and each intent's ops. Times
are integer microseconds from the database clock; a worker's log time (wall
clock, ms, on the same host) converts with :func:`op_us`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tools.chaos.history import FAIL, OK, Op
from tools.chaos.snapshot import JournalView

CLASSES: dict[str, str] = {
    "a": "lease_overlap",
    "b": "duplicate_claim",
    "c": "replay_mismatch",
    "d": "lost_run",
    "e": "unresolved_intent",
    "f": "journal_invalid",
    "g": "state_invariant",
    "h": "execution",
    "i": "placement",
    "j": "byzantine",
}

__all__ = ["CLASSES", "Anomaly", "Claim", "Facts", "Inputs", "op_us"]


def op_us(op: Op) -> int:
    """The latest database time (us) an op's outcome can have been decided at.

    A worker logs an answer after the database decided it, with a millisecond
    wall clock on the same host: the decision happened before the end of that ms.
    """
    return op.ts * 1000 + 999


@dataclass(frozen=True)
class Anomaly:
    cls: str  # a key of CLASSES
    detail: str
    known: str | None = None  # a KNOWN_ISSUES key when it matches a known bug

    @property
    def name(self) -> str:
        return f"{self.cls}_{CLASSES[self.cls]}"


@dataclass
class Inputs:
    manifest: dict[str, Any]
    ops: list[Op]
    snapshot: dict[str, Any]
    journals: dict[str, JournalView]
    heal: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


@dataclass
class Claim:
    """Everything the history says about one intent of one worker."""

    process: str
    offer_id: str
    ops: list[Op] = field(default_factory=list)

    def values(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.type == kind]

    @property
    def settled(self) -> bool:
        return any(op.type in (OK, FAIL) for op in self.ops)

    @property
    def accepted(self) -> list[Op]:
        return [op for op in self.ops if op.type == OK and op.value == "accepted"]

    @property
    def idle(self) -> bool:
        return any(op.type == OK and op.value == "idle" for op in self.ops)


@dataclass
class Facts:
    inputs: Inputs
    leases_by_offer: dict[str, list[dict[str, Any]]]
    leases_by_attempt: dict[str, list[dict[str, Any]]]
    dispatched_by_offer: dict[str, list[dict[str, Any]]]
    claims: dict[tuple[str, str], Claim]
    worker_names: dict[str, str]  # workerId -> process name
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # sessionId -> row
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> row
    leases_by_run: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    run_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # terminal

    @classmethod
    def build(cls, inputs: Inputs) -> Facts:
        by_offer: dict[str, list[dict[str, Any]]] = defaultdict(list)
        by_attempt: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for lease in inputs.snapshot["leases"]:
            by_offer[lease["offerId"]].append(lease)
            by_attempt[lease["attemptId"]].append(lease)
        dispatched: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in inputs.snapshot["dispatched"]:
            dispatched[str(event["offerId"])].append(event)
        claims: dict[tuple[str, str], Claim] = {}
        for op in inputs.ops:
            if op.f == "claim" and op.offer_id is not None:
                key = (op.process, op.offer_id)
                claims.setdefault(key, Claim(*key)).ops.append(op)
        names = {w["workerId"]: name for name, w in inputs.manifest["workers"].items()}
        facts = cls(inputs, by_offer, by_attempt, dispatched, claims, names)
        snapshot = inputs.snapshot
        facts.sessions = {s["sessionId"]: s for s in snapshot.get("sessions", [])}
        facts.revisions = {r["id"]: r for r in snapshot.get("revisions", [])}
        facts.leases_by_run = _group(snapshot["leases"], "runId")
        facts.run_events = _group(snapshot.get("runEvents", []), "runId")
        return facts

    def lease(self, offer_id: str) -> dict[str, Any] | None:
        found = self.leases_by_offer.get(offer_id)
        return found[0] if found else None

    def claim(self, process: str, offer_id: str) -> Claim | None:
        return self.claims.get((process, offer_id))

    def session_over(self, session_id: str | None, at_us: int) -> str | None:
        """Why session `session_id` was no longer usable at `at_us`, or None.

        A session's expires_at only ever moves forward while it is active (a
        heartbeat refuses a lapsed session), so its final value bounds it.
        """
        session = self.sessions.get(session_id or "")
        if session is None:
            return None
        closed = session["closedAtUs"]
        if closed is not None and closed <= at_us:
            return "session closed before the answer"
        if session["expiresAtUs"] <= at_us:
            return "session lapsed before the answer"
        return None


def _group(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[str(row[key])].append(row)
    return dict(grouped)
