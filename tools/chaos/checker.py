"""Offline checker of a soak: history + database snapshot + worker journals.

Inputs in HISTORY_DIR (all written by `python -m tools.chaos soak`, see soak.py):

    manifest.json      workers {name: {workerId, journal}}, run parameters
    history.jsonl      the ops (qinglong/chaos/history.py)
    snapshot.json      final database snapshot, taken after the workers stopped
    heal.json          the heal-time cut: a database snapshot taken while the
                       workers were frozen (SIGSTOP) after faults healed, and the
                       inbox/pending offer ids of every journal at that moment
    journals/<name>/   the workers' journal roots, as they were left

Anomaly classes (docs/RELIABILITY.md):

a  lease_overlap       two leases of one attempt live at the same time: the
                       intervals [claimed_at, min(released_at, expires_at)) of
                       one attempt must be disjoint, at most one is unreleased,
                       and none is released as `expired` before its expires_at
b  duplicate_claim     an intent (offer id) with more than one lease, a lease
                       without exactly one matching `run.dispatched` event, an
                       event without its lease, an offer id used by two workers
                       or accepted for two runs
c  replay_mismatch     an inbox entry that differs from what the database would
                       replay for its offer id (offer view digest, token digest,
                       lease version, owner), or from the lease row and the
                       revision's canonical bytes (tools/chaos/evidence.py), an
                       inbox offer the database does not know, a worker refusing
                       a replay as a different offer, or a conflict answered
                       without its cause in the database (tools/chaos/judge.py)
d  lost_run            at the heal-time cut a run that is not done, not held by a
                       live lease that is in its worker's inbox (or is the offer
                       that worker has in flight), and not claimable; or an
                       enqueued run missing from the database
e  unresolved_intent   an intent without an outcome that is not resolved by the
                       final state (lease <=> inbox entry), or an outcome that
                       contradicts it (idle while its lease was live and
                       unstarted; idle for a lease already released or started is
                       the ingress idle view's documented residual, service/
                       idle_view.py, and is excused with its evidence); an intent still
                       pending must match its lease's fence and token
f  journal_invalid     unsafe modes (root/dirs 0700, files 0600), leftover
                       `.tmp-*` files, unparseable entries, and a lease whose
                       intent was cleared without a durable inbox entry or a
                       recorded failure (accepted but missing from the inbox)
g  state_invariant     dispatching without a live unstarted lease, a started lease
                       on an attempt not starting/running, a terminal run without
                       its event, a released lease whose run was neither queued
                       again nor finished (tools/chaos/invariants.py)
h  execution           executing workers: an attempt started or ended twice, a
                       completion the database does not show, an outcome the
                       command cannot have had, retries outside the task's policy,
                       a cancel that did not stop the run (tools/chaos/execution.py)
i  placement           a session holding more live leases than its slots, a lease
                       given to a worker whose labels miss the placement
                       (tools/chaos/placement.py)
j  byzantine           the hostile worker (tools/chaos/byzantine.py) got an answer
                       the contract does not allow, was served another worker's
                       lease or session, holds a lease no honest pull of its own
                       gave it, or a lease its exact labels do not meet
                       (tools/chaos/byzantine_check.py)

Class f also covers the owner lock: a second worker process started on a live
worker's journal (the soak's `double_start`) must be turned away (journal_locked);
and an executing worker's inbox that, after its drain, still holds the entry of a
released lease (a finished offer is removed: it must never run again).

Every failure of an intent (conflict, exhausted, abandoned, moved aside) is
judged against the facts (tools/chaos/judge.py): one without its cause is an
anomaly (c for conflicts, e otherwise); the ones let pass are listed with their
evidence in the report (`excused`).

Known bugs of the system under test (KNOWN_ISSUES) are matched by signature and
reported apart, unless `strict`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.chaos.byzantine_check import byzantine_counts, check_byzantine
from tools.chaos.evidence import check_entry_evidence
from tools.chaos.execution import check_execution, exec_counts
from tools.chaos.facts import CLASSES, Anomaly, Claim, Facts, Inputs, op_us
from tools.chaos.history import (
    CLIENT,
    FAIL,
    FAULT_KINDS,
    INFO,
    INVOKE,
    NEMESIS,
    OK,
    Op,
    read_history,
)
from tools.chaos.invariants import DONE_STATES, check_invariants
from tools.chaos.judge import Excuse, judge_failures
from tools.chaos.placement import check_placement
from tools.chaos.snapshot import SNAPSHOT_FILE, JournalView, read_journal

MANIFEST_FILE = "manifest.json"
HEAL_FILE = "heal.json"
RESULT_FILE = "soak.json"

# Lease releases after which a worker may legitimately have dropped its entry.
TERMINAL_RELEASES = frozenset({"completed", "start_failed", "cancelled", "lost"})
DETAIL_LIMIT = 20  # details kept per class in the report

__all__ = ["CLASSES", "Anomaly", "Inputs", "Report", "check", "check_dir", "load_inputs"]


# Known bugs of the system under test, by signature: reported apart from the
# anomalies (and counted as anomalies with `strict`) until they are fixed. Each
# has a reproduction marked xfail(strict=True) in tests/py/test_chaos_soak.py,
# which starts failing once the bug is fixed: then delete its entry here.
KNOWN_ISSUES: dict[str, str] = {
    # "duplicate_pull_idle" (a retry racing its own first request answered idle) was
    # found by the soak and fixed with an advisory lock on the offer id in
    # ql.pull_offer; its reproduction is test_retry_racing_its_own_first_request_*.
}


@dataclass
class Report:
    anomalies: list[Anomaly]
    counts: dict[str, int]
    faults: dict[str, int]
    pulls: int | None = None
    known: list[Anomaly] = field(default_factory=list)  # matched KNOWN_ISSUES (not strict)
    excused: list[Excuse] = field(default_factory=list)  # failures let pass, with evidence

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def by_class(self) -> dict[str, int]:
        found = Counter(a.name for a in self.anomalies)
        return {f"{k}_{v}": found.get(f"{k}_{v}", 0) for k, v in CLASSES.items()}

    def to_doc(self) -> dict[str, Any]:
        details: dict[str, list[str]] = defaultdict(list)
        for anomaly in self.anomalies:
            if len(details[anomaly.name]) < DETAIL_LIMIT:
                details[anomaly.name].append(anomaly.detail)
        known: dict[str, list[str]] = defaultdict(list)
        for anomaly in self.known:
            known[str(anomaly.known)].append(anomaly.detail)
        return {"ok": self.ok, "anomalies": self.by_class(), "details": dict(details),
                "knownIssues": dict(known), "excused": self.excused_counts(),
                "counts": self.counts, "faults": self.faults, "pulls": self.pulls}  # fmt: skip

    def excused_counts(self) -> dict[str, int]:
        """The audit trail: each kind of failure let pass, by its evidence."""
        return dict(sorted(Counter(e.key for e in self.excused).items()))


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_inputs(history_dir: Path) -> Inputs:
    manifest = _read_json(history_dir / MANIFEST_FILE)
    journals: dict[str, JournalView] = {}
    for name, worker in manifest["workers"].items():
        root = Path(worker["journal"])
        journals[name] = read_journal(root if root.is_absolute() else history_dir / root)
    heal_path, result_path = history_dir / HEAL_FILE, history_dir / RESULT_FILE
    return Inputs(
        manifest=manifest,
        ops=read_history(history_dir),
        snapshot=_read_json(history_dir / SNAPSHOT_FILE),
        journals=journals,
        heal=_read_json(heal_path) if heal_path.exists() else None,
        result=_read_json(result_path) if result_path.exists() else None,
    )


# ------------------------------------------------------------------ indexes


# ------------------------------------------------------------------ (a)


def check_lease_overlap(facts: Facts) -> Iterable[Anomaly]:
    for attempt_id, leases in facts.leases_by_attempt.items():
        live = [lease for lease in leases if lease["releasedAtUs"] is None]
        if len(live) > 1:
            yield Anomaly(
                "a",
                f"attempt {attempt_id}: {len(live)} unreleased leases "
                f"({', '.join(lease['offerId'] for lease in live)})",
            )
        ordered = sorted(leases, key=lambda lease: lease["claimedAtUs"])
        end, holder = None, None
        for lease in ordered:
            if end is not None and lease["claimedAtUs"] < end:
                yield Anomaly(
                    "a",
                    f"attempt {attempt_id}: lease {lease['offerId']} claimed "
                    f"{end - lease['claimedAtUs']} us before lease {holder} "
                    "ended",
                )
            lease_end = _lease_end(lease)
            if end is None or lease_end > end:
                end, holder = lease_end, lease["offerId"]
            if lease["releaseReason"] == "expired" and lease["releasedAtUs"] < lease["expiresAtUs"]:
                # Its holder still counts on it until expires_at: a successor overlaps.
                yield Anomaly(
                    "a",
                    f"attempt {attempt_id}: lease {lease['offerId']} released "
                    "as expired before it expired",
                )


def _lease_end(lease: dict[str, Any]) -> int:
    released = lease["releasedAtUs"]
    return lease["expiresAtUs"] if released is None else min(released, lease["expiresAtUs"])


# ------------------------------------------------------------------ (b)


def check_duplicate_claims(facts: Facts) -> Iterable[Anomaly]:
    for offer_id, leases in facts.leases_by_offer.items():
        if len(leases) > 1:
            yield Anomaly("b", f"offer {offer_id}: {len(leases)} leases")
        events = facts.dispatched_by_offer.get(offer_id, [])
        if len(events) != 1:
            yield Anomaly("b", f"offer {offer_id}: {len(events)} run.dispatched events")
        lease = leases[0]
        for event in events:
            if (event["runId"], event["attemptId"], event["workerId"]) != (
                lease["runId"],
                lease["attemptId"],
                lease["workerId"],
            ):
                yield Anomaly(
                    "b",
                    f"offer {offer_id}: run.dispatched names another "
                    "run/attempt/worker than its lease",
                )
    for offer_id in facts.dispatched_by_offer.keys() - facts.leases_by_offer.keys():
        yield Anomaly("b", f"offer {offer_id}: run.dispatched without a lease")
    yield from _offers_shared(facts)
    yield from _accepted_runs(facts)


def _offers_shared(facts: Facts) -> Iterable[Anomaly]:
    owners: dict[str, set[str]] = defaultdict(set)
    for process, offer_id in facts.claims:
        owners[offer_id].add(process)
    for name, view in facts.inputs.journals.items():
        for offer_id in (*view.inbox, *view.failed, *view.aside):
            owners[offer_id].add(name)
    for offer_id, processes in owners.items():
        if len(processes) > 1:
            yield Anomaly("b", f"offer {offer_id}: used by {sorted(processes)}")


def _accepted_runs(facts: Facts) -> Iterable[Anomaly]:
    for claim in facts.claims.values():
        runs = {op.run_id for op in claim.accepted}
        lease = facts.lease(claim.offer_id)
        if len(runs) > 1:
            yield Anomaly("b", f"offer {claim.offer_id}: accepted for runs {sorted(runs)}")
        if runs and lease is None:
            yield Anomaly("b", f"offer {claim.offer_id}: accepted but no lease exists")
        elif runs and lease is not None and runs != {lease["runId"]}:
            yield Anomaly("b", f"offer {claim.offer_id}: accepted for another run than leased")


# ------------------------------------------------------------------ (c)


def check_replays(facts: Facts) -> Iterable[Anomaly]:
    workers = facts.inputs.manifest["workers"]
    for name, view in facts.inputs.journals.items():
        for offer_id, entry in view.inbox.items():
            lease = facts.lease(offer_id)
            if lease is None:
                yield Anomaly("c", f"{name}: inbox offer {offer_id} unknown to the database")
                continue
            yield from _entry_vs_lease(name, offer_id, entry, lease, workers[name]["workerId"])
            yield from check_entry_evidence(facts, f"{name}: inbox offer {offer_id}", entry,
                                            lease)  # fmt: skip


def _entry_vs_lease(name: str, offer_id: str, entry: dict[str, Any], lease: dict[str, Any],
                    worker_id: str) -> Iterable[Anomaly]:  # fmt: skip
    where = f"{name}: inbox offer {offer_id}"
    if lease["workerId"] != worker_id:
        yield Anomaly("c", f"{where}: leased to another worker")
    if entry["offerDigest"] != lease["offerDigest"]:
        fields = [
            k
            for k in ("runId", "attemptId", "sessionId", "leaseGeneration", "contentDigest")
            if entry.get(k) != _lease_field(lease, k)
        ]
        yield Anomaly(
            "c",
            f"{where}: stored offer differs from the database's replay"
            f" (differs: {', '.join(fields) or 'offer body'})",
        )
    if entry["tokenDigest"] != lease["tokenDigest"]:
        yield Anomaly("c", f"{where}: stored lease token does not hash to the lease's digest")
    version = entry.get("leaseVersion")
    if not isinstance(version, int) or version > lease["leaseVersion"]:
        yield Anomaly(
            "c", f"{where}: lease version {version} ahead of the database's {lease['leaseVersion']}"
        )


def _lease_field(lease: dict[str, Any], key: str) -> Any:
    return lease.get("sessionGeneration") if key == "generation" else lease.get(key)


# ------------------------------------------------------------------ (d)


def check_lost_runs(facts: Facts, states: Counter[str]) -> Iterable[Anomaly]:
    heal = facts.inputs.heal
    if heal is not None:
        snapshot, held = heal["snapshot"], _held_offers(facts, heal["journals"])
    else:  # no heal cut recorded: judge the final state instead
        snapshot = facts.inputs.snapshot
        held = _held_offers(facts, {n: v.ids() for n, v in facts.inputs.journals.items()})
    yield from _runs_at(snapshot, held, states)
    known = {r["id"] for r in facts.inputs.snapshot["runs"]}
    for op in facts.inputs.ops:
        if op.process == CLIENT and op.f == "enqueue" and op.type == OK:
            for run_id in op.extra.get("runIds", []):
                if run_id not in known:
                    yield Anomaly("d", f"run {run_id}: enqueued, missing from the database")


def _held_offers(facts: Facts, journals: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """workerId -> offer ids its journal held (inbox, or the intent in flight)."""
    held: dict[str, set[str]] = {}
    for name, ids in journals.items():
        worker_id = facts.inputs.manifest["workers"][name]["workerId"]
        offers = set(ids["inbox"])
        if ids.get("pending"):
            offers.add(ids["pending"])
        held[worker_id] = offers
    return held


def _runs_at(snapshot: dict[str, Any], held: dict[str, set[str]],
             states: Counter[str]) -> Iterable[Anomaly]:  # fmt: skip
    now = snapshot["takenAtUs"]
    attempts = {a["id"]: a for a in snapshot["attempts"]}
    live: dict[str, dict[str, Any]] = {}
    for lease in snapshot["leases"]:
        if lease["releasedAtUs"] is None and (
            lease["startedAtUs"] is not None or lease["expiresAtUs"] > now
        ):
            live[lease["attemptId"]] = lease
    for run in snapshot["runs"]:
        verdict = _run_verdict(run, attempts.get(run["currentAttemptId"]), live, held)
        states[verdict] += 1
        if verdict == "lost":
            yield Anomaly(
                "d",
                f"run {run['id']}: state {run['state']}, attempt "
                f"{(attempts.get(run['currentAttemptId']) or {}).get('state')}, "
                "neither done, held nor claimable",
            )
        elif verdict == "orphaned":
            lease = live[run["currentAttemptId"]]
            yield Anomaly(
                "d",
                f"run {run['id']}: live lease {lease['offerId']} is in no "
                "inbox and in flight nowhere",
            )


def _run_verdict(run: dict[str, Any], attempt: dict[str, Any] | None,
                 live: dict[str, dict[str, Any]], held: dict[str, set[str]]) -> str:  # fmt: skip
    if run["state"] in DONE_STATES:
        return "done"
    lease = live.get(run["currentAttemptId"])
    if lease is not None:
        return "held" if lease["offerId"] in held.get(lease["workerId"], set()) else "orphaned"
    claimable = (run["state"] in ("queued", "dispatching") and run["runtimeOwned"]
                 and attempt is not None and attempt["state"] == "claimed")  # fmt: skip
    return "claimable" if claimable else "lost"


# ------------------------------------------------------------------ (e)


def check_indeterminate(facts: Facts, counts: Counter[str],
                        excused: list[Excuse]) -> Iterable[Anomaly]:  # fmt: skip
    for claim in facts.claims.values():
        view = facts.inputs.journals.get(claim.process)
        lease = facts.lease(claim.offer_id)
        if claim.idle and lease is not None:
            why = _idle_replay_excuse(claim, lease)
            if why is not None:
                excused.append(Excuse("idle replay", claim.process, claim.offer_id, why))
            else:
                yield Anomaly("e", f"{claim.process}: offer {claim.offer_id} answered idle "
                                   "while its lease was live and unstarted",
                              _idle_signature(claim))  # fmt: skip
        if claim.settled or view is None:
            continue
        counts["indeterminate"] += 1
        if view.pending is not None and view.pending.get("offerId") == claim.offer_id:
            counts["pendingAtEnd"] += 1
            yield from _pending_vs_lease(claim, view.pending, lease, facts)
        elif (
            lease is not None
            and claim.offer_id not in view.inbox
            and claim.offer_id not in view.aside
            and not _executor_let_go(facts, claim.process, claim.offer_id)
        ):
            yield Anomaly(
                "e",
                f"{claim.process}: offer {claim.offer_id} without outcome "
                "has a lease but no inbox entry",
            )


def _idle_replay_excuse(claim: Claim, lease: dict[str, Any]) -> str | None:
    """An idle answer to a replayed intent is the ingress idle view's documented
    residual (service/idle_view.py) only when the lease was already released or
    started when it answered: a live unstarted lease is never answered idle."""
    at = op_us(next(op for op in claim.ops if op.type == OK and op.value == "idle"))
    released, started = lease["releasedAtUs"], lease["startedAtUs"]
    if released is not None and released <= at:
        return f"lease released {lease['releaseReason']} before the answer"
    if started is not None and started <= at:
        return "lease started before the answer"
    return None


def _idle_signature(claim: Claim) -> str | None:
    """The known duplicate-pull race needs the intent to have been sent twice: a
    retry (or a resume) before the idle answer. Anything else stays unexplained."""
    idle_at = min(op.index for op in claim.ops if op.type == OK and op.value == "idle")
    resent = any(op.type == INFO and op.value in ("retry", "resumed") and op.index < idle_at
                 for op in claim.ops)  # fmt: skip
    signature = "duplicate_pull_idle" if resent else None
    # Only a bug still listed in KNOWN_ISSUES is reported apart; a fixed one is an
    # anomaly again.
    return signature if signature in KNOWN_ISSUES else None


def _pending_vs_lease(claim: Claim, pending: dict[str, Any], lease: dict[str, Any] | None,
                      facts: Facts) -> Iterable[Anomaly]:  # fmt: skip
    if lease is None:
        return
    mine = facts.worker_names.get(lease["workerId"]) == claim.process
    fence = (lease["sessionId"], lease["sessionGeneration"], lease["tokenDigest"])
    if not mine or fence != (pending["sessionId"], pending["generation"], pending["tokenDigest"]):
        yield Anomaly(
            "e",
            f"{claim.process}: pending offer {claim.offer_id} does not match "
            "its lease's session/token",
        )


# ------------------------------------------------------------------ (f)


def check_journals(facts: Facts) -> Iterable[Anomaly]:
    for name, view in facts.inputs.journals.items():
        for problem in view.problems:
            yield Anomaly("f", f"{name}: {problem}")
    for offer_id, leases in facts.leases_by_offer.items():
        lease = leases[0]
        name = facts.worker_names.get(lease["workerId"])
        view = facts.inputs.journals.get(name or "")
        if name is None or view is None or offer_id in view.inbox:
            continue
        if view.pending is not None and view.pending.get("offerId") == offer_id:
            continue
        claim = facts.claim(name, offer_id)
        if offer_id in view.failed or (claim is not None and claim.values(FAIL)):
            continue
        if offer_id in view.aside:  # given up on the record; a live one is d's orphan
            continue
        if _executor_let_go(facts, name, offer_id):
            continue
        if claim is not None and claim.accepted:
            if lease["releaseReason"] not in TERMINAL_RELEASES:
                yield Anomaly(
                    "f",
                    f"{name}: accepted offer {offer_id} is missing from the "
                    "inbox while its lease exists",
                )
        elif claim is None:
            yield Anomaly(
                "f",
                f"{name}: lease {offer_id} has no inbox entry, no pending "
                "intent and no recorded failure",
            )


def _executor_let_go(facts: Facts, name: str, offer_id: str) -> bool:
    """An executing worker removes an inbox entry once it completed the lease or
    gave it up (a 409, no confirmation for a TTL, its session closed), and logs
    that first (`exec.completed` / `exec.abandoned`): the entry was in its inbox
    and left it on purpose. (Whether the cause was real is judged by h and by the
    lease history; an entry that never reached the inbox has no such line.)"""
    if not facts.inputs.manifest["workers"].get(name, {}).get("execute"):
        return False
    return any(
        op.f == "exec"
        and op.process == name
        and op.offer_id == offer_id
        and op.value in ("abandoned", "completed")
        for op in facts.inputs.ops
    )


def check_finished_entries(facts: Facts) -> Iterable[Anomaly]:
    """An executing worker removes an offer's entry once its lease is over (SPEC §7,
    worker/lifecycle.py "terminal = removed"); after the drain none of its entries
    may name a released lease: it could be run again and the inbox never shrinks."""
    for name, view in facts.inputs.journals.items():
        if not facts.inputs.manifest["workers"].get(name, {}).get("execute"):
            continue
        for offer_id in view.inbox:
            lease = facts.lease(offer_id)
            if lease is not None and lease["releasedAtUs"] is not None:
                yield Anomaly(
                    "f",
                    f"{name}: inbox still holds offer {offer_id}, whose lease "
                    f"was released {lease['releaseReason']}",
                )


def check_owner_lock(ops: list[Op]) -> Iterable[Anomaly]:
    """Every second process the nemesis started on a held journal was turned away."""
    for op in ops:
        if (
            op.process == NEMESIS
            and op.f == "double_start"
            and op.type == OK
            and (op.extra.get("outcome") == "ran")
        ):
            yield Anomaly(
                "f",
                f"{op.value}: a second worker process ran on its journal while "
                f"the owner was alive (events {op.extra.get('events')})",
            )


# ------------------------------------------------------------------ report


def _faults(ops: list[Op]) -> dict[str, int]:
    found = Counter(op.f for op in ops if op.process == NEMESIS and op.f in FAULT_KINDS)
    return {kind: found.get(kind, 0) for kind in FAULT_KINDS}


def check(inputs: Inputs, *, strict: bool = False) -> Report:
    facts = Facts.build(inputs)
    counts: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    anomalies: list[Anomaly] = []
    checks: list[Callable[[], Iterable[Anomaly]]] = [
        lambda: check_lease_overlap(facts),
        lambda: check_duplicate_claims(facts),
        lambda: check_replays(facts),
        lambda: check_lost_runs(facts, runs),
        lambda: check_indeterminate(facts, counts, excused),
        lambda: check_journals(facts),
    ]
    known: list[Anomaly] = []
    excused: list[Excuse] = []
    for verdict in judge_failures(facts):
        (excused if isinstance(verdict, Excuse) else anomalies).append(verdict)
    checks.append(lambda: check_invariants(facts))
    checks.append(lambda: check_execution(facts))
    checks.append(lambda: check_placement(facts))
    checks.append(lambda: check_owner_lock(inputs.ops))
    checks.append(lambda: check_finished_entries(facts))
    checks.append(lambda: check_byzantine(facts))
    for run_check in checks:
        for anomaly in run_check():
            (known if anomaly.known and not strict else anomalies).append(anomaly)
    snapshot = inputs.snapshot
    counts.update(
        {
            "historyOps": len(inputs.ops),
            "claims": len(facts.claims),
            "claimsAccepted": sum(1 for c in facts.claims.values() if c.accepted),
            "claimsFailed": sum(1 for c in facts.claims.values() if c.values(FAIL)),
            "idleAnswers": sum(1 for op in inputs.ops if op.type == OK and op.value == "idle"),
            "invokes": sum(1 for op in inputs.ops if op.type == INVOKE),
            "leases": len(snapshot["leases"]),
            "dispatchedEvents": len(snapshot["dispatched"]),
            "leasedAttempts": len(facts.leases_by_attempt),
            "runs": len(snapshot["runs"]),
            "inboxEntries": sum(len(v.inbox) for v in inputs.journals.values()),
            "journals": len(inputs.journals),
        }
    )
    counts.update({f"runs{k.capitalize()}AtHeal": v for k, v in runs.items()})
    counts.update(exec_counts(facts))
    counts.update(byzantine_counts(facts))
    doubles = Counter(
        str(op.extra.get("outcome"))
        for op in inputs.ops
        if op.process == NEMESIS and op.f == "double_start" and op.type == OK
    )
    counts.update({f"doubleStart{k.capitalize()}": v for k, v in doubles.items()})
    pulls = inputs.result.get("pulls") if inputs.result else None
    counts["failuresExcused"] = len(excused)
    return Report(anomalies, dict(counts), _faults(inputs.ops), pulls, known, excused)


def check_dir(history_dir: Path, *, strict: bool = False) -> Report:
    return check(load_inputs(history_dir), strict=strict)
