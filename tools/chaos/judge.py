"""Every refusal and failure of a claim, judged against the facts (checker class c/e).

A worker that hears 409 `lease_expired` for its own intent, or gives an intent
up, is only right if the database shows the cause at that time: the lease had
really expired, its session had really ended, the lease had really been
released, the run had really moved on, 16 attempts had really been made. A
failure without its cause is an anomaly (a flipped fence comparison answers
`lease_expired` to a live lease: nothing else would notice). Each failure the
checker lets pass is kept as an :class:`Excuse` (what, and the evidence), so a
report shows what was excused and why.

Times: the answer's log time (ms, same host) bounds the moment the database
decided it (:func:`tools.chaos.facts.op_us`); lease and session times come from
the database snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tools.chaos.facts import Anomaly, Claim, Facts, op_us
from tools.chaos.history import FAIL, Op

MAX_ATTEMPTS = 16  # worker/backoff.py MAX_ATTEMPTS: an intent is given up after 16 sends
# A worker refusing an answer to its own intent for one of these reasons means the
# server answered a replay with something other than the very same offer.
IDENTITY_REJECTIONS = frozenset({
    "OfferConflict", "LeaseVersionRegression", "offer_id_mismatch", "target_mismatch",
    "ids_not_closed", "digest_mismatch", "lease_invalid", "not_offered",
})  # fmt: skip
IDENTITY_CONFLICTS = frozenset({"token_mismatch", "offer_foreign", "revision_drift"})
# A session that ended answers session_replaced, or (QL013) session_closed: both
# need the session's end in the database before the answer.
SESSION_CONFLICTS = frozenset({"session_replaced", "session_closed"})
FACT_CONFLICTS = frozenset({"lease_expired", "lease_terminal", "attempt_changed",
                            *SESSION_CONFLICTS})  # fmt: skip
SESSION_REASONS = frozenset({"session_lost", "session_changed", "worker_changed"})
SESSION_RELEASES = frozenset({"session_replaced", "session_closed"})

__all__ = ["Excuse", "judge_failures"]


@dataclass(frozen=True)
class Excuse:
    """A failure the checker let pass, and the fact that explains it."""

    kind: str  # "conflict lease_expired", "abandoned session_lost", ...
    process: str
    offer_id: str
    why: str  # low-cardinality evidence

    @property
    def key(self) -> str:
        return f"{self.kind}: {self.why}"


Verdict = Anomaly | Excuse


def judge_failures(facts: Facts) -> Iterator[Verdict]:
    for claim in facts.claims.values():
        logged = [op for op in claim.values(FAIL) if op.src != "journal"]
        # The intent moved aside on disk is the same failure the log names; it is
        # judged on its own only when the worker died before logging it.
        for op in logged or claim.values(FAIL):
            yield _judge(facts, claim, op)


def _judge(facts: Facts, claim: Claim, op: Op) -> Verdict:
    value, reason = op.value or "", op.reason or ""
    if value == "moved_aside":
        value, reason = _aside_kind(reason)
    where = f"{claim.process}: offer {claim.offer_id}"
    if value == "conflict":
        return _conflict(facts, claim, op, reason, where)
    if value == "rejected":
        what = "answered with a different offer" if reason in IDENTITY_REJECTIONS else "refused"
        return Anomaly("c", f"{where} {what} (rejected: {reason})")
    if value in ("exhausted", "attempts_exhausted"):
        return _exhausted(facts, claim, where)
    if value == "abandoned" and reason in SESSION_REASONS:
        return _session_gone(facts, claim, op, f"abandoned {reason}", where)
    return Anomaly("e", f"{where}: failed ({value}: {reason}) without a cause")


def _aside_kind(reason: str) -> tuple[str, str]:
    """(value, reason) of an intent seen under failed-claims/ (worker/coordinator.py)."""
    if reason.startswith("conflict_"):
        return "conflict", reason.removeprefix("conflict_")
    if reason in ("conflict", "inbox_refused") or reason.startswith(("offer_", "http_")):
        return "rejected" if reason != "conflict" else "conflict", reason
    if reason == "attempts_exhausted":
        return "exhausted", reason
    return "abandoned", reason


def _conflict(facts: Facts, claim: Claim, op: Op, reason: str, where: str) -> Verdict:
    if reason in IDENTITY_CONFLICTS:
        return Anomaly("c", f"{where} answered with a different offer (conflict: {reason})")
    if reason not in FACT_CONFLICTS:
        return Anomaly("c", f"{where}: conflict `{reason}` has no known cause")
    kind = f"conflict {reason}"
    lease = facts.lease(claim.offer_id)
    if reason in SESSION_CONFLICTS:
        return _session_gone(facts, claim, op, kind, where)
    if lease is None:
        return Anomaly("c", f"{where}: conflict {reason} for an offer without a lease")
    at = op_us(op)
    why = {"lease_expired": _expired, "lease_terminal": _terminal,
           "attempt_changed": _attempt_moved}[reason](facts, lease, at)  # fmt: skip
    if why is None:
        return Anomaly("c", f"{where}: answered {reason} but {_lease_state(lease, at)}")
    return Excuse(kind, claim.process, claim.offer_id, why)


def _lease_state(lease: dict[str, Any], at: int) -> str:
    left = (lease["expiresAtUs"] - at) / 1e6
    released = lease["releasedAtUs"]
    if released is not None and released <= at:
        return f"its lease was released {lease['releaseReason']} ({left:+.1f}s to expiry)"
    return f"its lease was live and unreleased with {left:.1f}s left"


def _expired(_facts: Facts, lease: dict[str, Any], at: int) -> str | None:
    if lease["expiresAtUs"] <= at:
        return "lease past expires_at at the answer"
    released = lease["releasedAtUs"]
    if lease["releaseReason"] in ("expired", "lost") and released is not None and released <= at:
        return f"lease released {lease['releaseReason']} before the answer"
    return None


def _terminal(_facts: Facts, lease: dict[str, Any], at: int) -> str | None:
    released = lease["releasedAtUs"]
    if released is not None and released <= at:
        return f"lease released {lease['releaseReason']} before the answer"
    return None


def _attempt_moved(facts: Facts, lease: dict[str, Any], at: int) -> str | None:
    # Attempts only move forward: the final state tells whether the run's attempt
    # had moved on or left `claimed`; when it has not even by the end, it had not then.
    runs = {r["id"]: r for r in facts.inputs.snapshot["runs"]}
    attempts = {a["id"]: a for a in facts.inputs.snapshot["attempts"]}
    run = runs.get(lease["runId"])
    if run is not None and run["currentAttemptId"] != lease["attemptId"]:
        return "the run moved to another attempt"
    attempt = attempts.get(lease["attemptId"]) or {}
    wanted = ("claimed",) if lease["startedAtUs"] is None else ("starting", "running")
    if attempt.get("state") not in wanted:
        return f"the attempt left {'/'.join(wanted)}"
    return _terminal(facts, lease, at)


def _session_gone(facts: Facts, claim: Claim, op: Op, kind: str, where: str) -> Verdict:
    at = op_us(op)
    lease = facts.lease(claim.offer_id)
    if lease is None:
        worker_id = facts.inputs.manifest["workers"][claim.process]["workerId"]
        ended = [
            s
            for s in facts.sessions.values()
            if s["workerId"] == worker_id and facts.session_over(s["sessionId"], at)
        ]
        if ended or not facts.sessions:
            return Excuse(kind, claim.process, claim.offer_id,
                          "no lease; a session of the worker had ended")  # fmt: skip
        return Anomaly("e", f"{where}: {kind} while every session of the worker was live")
    released = lease["releasedAtUs"]
    if lease["releaseReason"] in SESSION_RELEASES and released is not None and released <= at:
        return Excuse(kind, claim.process, claim.offer_id,
                      f"lease released {lease['releaseReason']}")  # fmt: skip
    why = facts.session_over(lease["sessionId"], at)
    if why is None:
        return Anomaly(
            "c" if kind.startswith("conflict") else "e",
            f"{where}: {kind} but the lease's session was live and active",
        )
    return Excuse(kind, claim.process, claim.offer_id, why)


def _exhausted(facts: Facts, claim: Claim, where: str) -> Verdict:
    attempts = _attempts_made(facts, claim)
    if attempts is not None and attempts >= MAX_ATTEMPTS:
        return Excuse("exhausted", claim.process, claim.offer_id,
                      f"{MAX_ATTEMPTS}+ attempts recorded with the intent")  # fmt: skip
    return Anomaly(
        "e", f"{where}: given up after {attempts or 'unknown'} attempts (< {MAX_ATTEMPTS})"
    )


def _attempts_made(facts: Facts, claim: Claim) -> int | None:
    counts: Iterable[Any] = (op.extra.get("attempts") for op in claim.ops)
    view = facts.inputs.journals.get(claim.process)
    found = [int(n) for n in counts if isinstance(n, int)]
    if view is not None and claim.offer_id in view.failed_attempts:
        found.append(view.failed_attempts[claim.offer_id])
    return max(found) if found else None
