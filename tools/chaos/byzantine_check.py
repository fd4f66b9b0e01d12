"""Checker class j, `byzantine`: what the hostile worker got (tools/chaos/byzantine.py).

Every answered request of the hostile worker (op f `byz`) is judged against the
contract and the database snapshot:

1. refused as promised — its answer is one the contract allows for that request
   (`expect`: 409 with the category, 403, 401, 400, or the 200 its own legitimate
   calls get); an `idle` answer to a pull naming an existing lease only when that
   lease was started or released before the answer (the idle view's documented
   residual), never for a live unstarted one;
2. no request of the hostile worker changed a lease it does not hold — a request
   naming another worker's offer or session was never answered 2xx, no lease of
   another worker's offer id ever names the hostile worker, and (from the
   database alone) no lease of a worker without the executor — which never makes
   a lease call — was ever started or ended by a completion or start failure;
3. no run completed by the hostile worker unless it legitimately held the lease
   — every lease the database gave the hostile worker comes from one of its own
   honest pulls answered `offered`, and every 2xx answer to its lease calls is
   for such a lease;
4. its legitimately held leases are judged like anyone's: their placement holds
   against the exact labels of the session that claimed them (its granted label
   is a case variant of `fleet=exec`: an `exec-*` run must never reach it); a
   legitimate call refused `lease_expired` / `lease_terminal` has its cause in
   the database; an exact repeat of its own call answers the same lease version
   (it changed nothing);
5. the pool and label boundary (SPEC §13), from the database alone: every lease
   of the hostile worker is on a run of a pool it is granted (the soak never
   revokes its grant, so the grants at the end are those at every claim), and
   none of its sessions declares a label it was not granted (it is not
   self-labels). Its sessions declaring the honest fleet's labels must be
   answered 403 label_not_granted (1.).

Unanswered requests (network, a killed ingress) and 503/429 answers (no decision)
are counted, not judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from tools.chaos.facts import Anomaly, Facts, op_us
from tools.chaos.history import Op

PROCESS, F = "byz", "byz"  # tools/chaos/byzantine.py
UNJUDGED = frozenset({None, 429, 503})
FOREIGN_TARGETS = frozenset({"foreign", "foreign_session"})
LEGIT_KINDS = frozenset({"own_ack_starting", "own_ack_replay", "own_complete",
                         "own_complete_replay"})  # fmt: skip
IDLE = "200:idle"
# Its own session's calls: a refusal for a session that is over needs the end in the
# database (closed — replaced or closed — or lapsed) before the answer.
SESSION_KINDS = frozenset({"pull_own", "session_heartbeat"})
SESSION_OVER = frozenset({"session_replaced", "session_expired", "session_closed"})

_FOREIGN = ("409:offer_foreign",)
_OVER = tuple(f"409:{reason}" for reason in sorted(SESSION_OVER))
_EXPIRED = "409:lease_expired"  # its own lease, past expires_at: needs its cause
_GONE = ("409:lease_terminal", _EXPIRED, "409:attempt_changed")
# What the contract allows for each request of the hostile worker (docs/CONTRACT.md
# §3.3, §5, §7): the checker's own table, not the hostile's word. "200:idle" for a
# pull naming an existing offer only when its lease was already started or released.
EXPECT: dict[str, tuple[str, ...]] = {
    # another worker's offer id (with its token, its session, or neither)
    "pull_foreign_offer": (*_FOREIGN, IDLE),
    "ack_foreign": _FOREIGN, "heartbeat_foreign": _FOREIGN, "complete_foreign": _FOREIGN,
    "ack_unknown_offer": _FOREIGN,
    # sessions not its own, or not its current one
    "pull_wrong_generation": ("409:session_replaced",),
    "pull_replaced_session": ("409:session_replaced", "409:session_closed"),
    "pull_foreign_session": ("409:session_not_found",),
    "session_heartbeat_foreign": ("409:session_not_found",),
    "session_close_foreign": ("409:session_not_found",),
    # identity and credentials
    "identity_body": ("403:identity_mismatch",),
    "identity_foreign_credential": ("403:identity_mismatch",),
    "credential_foreign": ("403:worker_mismatch",),
    "credential_wrong_secret": ("401:invalid_credential",),
    "session_open_bad_label": ("400:schema_invalid", "400:invalid_input", "400:invalid_label"),
    # labels it was not granted (the honest fleet's, or variants of them): SPEC §13.2
    "session_open_foreign_labels": ("403:label_not_granted",),
    # its own session and honest pulls
    "session_open": ("201",),
    "session_heartbeat": ("200", *_OVER),
    "pull_own": ("200:offered", "200:idle", *_OVER),
    # its own lease: fences (token before expiry; the version and the transition
    # only on a live lease)
    "own_ack_wrong_token": ("409:token_mismatch",),
    "own_ack_wrong_generation": ("409:session_replaced",),
    "own_ack_stale_version": ("409:stale_lease_version", _EXPIRED),
    "own_heartbeat_unstarted": ("409:illegal_transition", _EXPIRED),
    "own_complete_unstarted": ("409:illegal_transition", _EXPIRED),
    "own_ack_starting": ("200", _EXPIRED),
    "own_ack_replay": ("200", _EXPIRED),
    "own_complete_stale": ("409:stale_lease_version", _EXPIRED),
    "own_heartbeat_stale": ("409:stale_lease_version", _EXPIRED),
    "own_complete": ("200", _EXPIRED),
    "own_complete_replay": ("200",),
    "own_heartbeat_terminal": ("409:lease_terminal",),
    # a lease it let expire, and replays of its old requests of finished leases
    "lost_ack": _GONE, "lost_complete": _GONE,
    "replay_old": (*_GONE, "409:stale_lease_version", "409:session_replaced"),
}  # fmt: skip
PULL_PATH = "/v1/offers/pull"

__all__ = ["EXPECT", "byzantine_counts", "check_byzantine", "expected_answers", "hostile_ops"]


def expected_answers(kind: str, path: str) -> tuple[str, ...]:
    """The answers the contract allows for one hostile request (empty: unknown kind)."""
    allowed = EXPECT.get(kind, ())
    return (*allowed, IDLE) if kind == "replay_old" and path == PULL_PATH else allowed


def hostile_ops(facts: Facts) -> list[Op]:
    return [op for op in facts.inputs.ops if op.process == PROCESS and op.f == F]


def answer_key(op: Op) -> str:
    status = op.extra.get("status")
    return f"{status}:{op.reason}" if op.reason else str(status)


def _judged(op: Op) -> bool:
    return op.type == "ok" and op.extra.get("status") not in UNJUDGED


def check_byzantine(facts: Facts) -> Iterator[Anomaly]:
    hostile = facts.inputs.manifest.get("byzantine")
    if not hostile:
        return
    worker_id = str(hostile["workerId"])
    ops = hostile_ops(facts)
    judged = [op for op in ops if _judged(op)]
    if not judged:
        yield Anomaly("j", "the hostile worker got no answer at all (it did not run)")
    honest = {op.offer_id for op in judged
              if op.value == "pull_own" and answer_key(op) == "200:offered"}  # fmt: skip
    for op in judged:
        yield from _answer(facts, op, worker_id, honest)
    yield from _its_leases(facts, worker_id, honest, judged)
    yield from _untouchable_leases(facts)
    yield from _pool_boundary(facts, worker_id)


def _pool_boundary(facts: Facts, worker_id: str) -> Iterator[Anomaly]:
    """From the database alone: the hostile worker's leases are all on runs of a pool
    it is granted, and its sessions declare only labels it is granted."""
    snapshot = facts.inputs.snapshot
    if "grants" not in snapshot:  # a record from before grants were snapshotted
        return
    grant = next((g for g in snapshot["grants"] if g["workerId"] == worker_id), None)
    if grant is None:
        yield Anomaly("j", "the database snapshot has no grants of the hostile worker")
        return
    pools = set(grant["pools"])
    pool_of = {r["id"]: r.get("pool") for r in snapshot["runs"]}
    for lease in snapshot["leases"]:
        pool = pool_of.get(lease["runId"])
        if lease["workerId"] == worker_id and not grant["allPools"] and pool not in pools:
            yield Anomaly(
                "j",
                f"lease {lease['offerId']} of the hostile worker is on run "
                f"{lease['runId']} of pool {pool}, not granted to it "
                f"(granted {sorted(pools)})",
            )
    if grant["selfLabels"]:
        return
    granted = grant["labels"]
    for session in snapshot["sessions"]:
        labels = session.get("labels") or {}
        ungranted = sorted(k for k, v in labels.items() if granted.get(k) != v)
        if session["workerId"] == worker_id and ungranted:
            yield Anomaly(
                "j",
                f"session {session['sessionId']} of the hostile worker declares "
                f"labels it was not granted ({', '.join(ungranted)}): "
                f"{labels}, granted {granted}",
            )


def _untouchable_leases(facts: Facts) -> Iterator[Anomaly]:
    """Evidence from the database, whatever the answers said: a worker without the
    executor never sends a lease call (its offers stay in its inbox), so a lease of
    one that was started, or released by a completion or a start failure, was
    changed by someone else's call."""
    workers = facts.inputs.manifest["workers"]
    for lease in facts.inputs.snapshot["leases"]:
        name = facts.worker_names.get(lease["workerId"])
        if name is None or workers[name].get("execute"):
            continue
        if lease["startedAtUs"] is not None or lease["releaseReason"] in (
            "completed",
            "start_failed",
        ):
            yield Anomaly(
                "j",
                f"lease {lease['offerId']} of {name} (no executor: it never "
                f"makes a lease call) was started or ended "
                f"{lease['releaseReason'] or ''} by another's call",
            )


def _answer(facts: Facts, op: Op, worker_id: str, honest: set[str | None]) -> Iterator[Anomaly]:
    key = answer_key(op)
    expect = list(expected_answers(str(op.value), str(op.extra.get("path"))))
    status = int(op.extra["status"])
    where = f"hostile {op.value} ({op.extra.get('path')}, offer {op.offer_id})"
    target = op.extra.get("target")
    if target in FOREIGN_TARGETS and 200 <= status < 300 and key != IDLE:
        yield Anomaly(
            "j",
            f"{where}: another worker's "
            f"{'session' if target == 'foreign_session' else 'lease'} "
            f"(of {op.extra.get('victim')}) served: answered {key}",
        )
        return
    if key not in expect:
        yield Anomaly("j", f"{where}: answered {key}, the contract allows {expect}")
        return
    lease = facts.lease(op.offer_id) if op.offer_id else None
    if key == IDLE and lease is not None and not _over_at(lease, op_us(op)):
        yield Anomaly("j", f"{where}: answered idle while the lease was live and unstarted")
    if target in FOREIGN_TARGETS and lease is not None and lease["workerId"] == worker_id:
        yield Anomaly(
            "j", f"{where}: the lease of another worker's offer id names the hostile worker"
        )
    if 200 <= status < 300 and op.value in LEGIT_KINDS and op.offer_id not in honest:
        yield Anomaly("j", f"{where}: answered {key} for a lease it never claimed")
    expected_version = op.extra.get("expectVersion")
    if (
        status == 200
        and expected_version is not None
        and (op.extra.get("answerVersion") != expected_version)
    ):
        yield Anomaly(
            "j",
            f"{where}: an exact repeat answered lease version "
            f"{op.extra.get('answerVersion')}, not {expected_version} "
            "(the repeat changed the lease)",
        )
    if status == 409 and lease is not None and target == "own":
        yield from _cause(where, op, lease)
    if (
        status == 409
        and op.value in SESSION_KINDS
        and op.reason in SESSION_OVER
        and (facts.session_over(op.extra.get("sentSessionId"), op_us(op)) is None)
    ):
        yield Anomaly(
            "j",
            f"{where}: refused {op.reason}, but its session "
            f"{op.extra.get('sentSessionId')} had not ended",
        )


def _over_at(lease: dict[str, Any], at_us: int) -> bool:
    released, started = lease["releasedAtUs"], lease["startedAtUs"]
    return (released is not None and released <= at_us) or (
        started is not None and started <= at_us
    )


def _cause(where: str, op: Op, lease: dict[str, Any]) -> Iterator[Anomaly]:
    """A refusal of a call the holder could legitimately make needs its cause."""
    at, released = op_us(op), lease["releasedAtUs"]
    if op.reason == "lease_expired":
        lapsed = lease["expiresAtUs"] <= at or (
            lease["releaseReason"] in ("expired", "lost") and released is not None
            and released <= at)  # fmt: skip
        if not lapsed:
            yield Anomaly(
                "j",
                f"{where}: refused lease_expired, but the lease had "
                f"{(lease['expiresAtUs'] - at) / 1e6:.1f}s left",
            )
    elif op.reason == "lease_terminal" and (released is None or released > at):
        yield Anomaly("j", f"{where}: refused lease_terminal, but the lease was not released")


def _its_leases(facts: Facts, worker_id: str, honest: set[str | None],
                judged: list[Op]) -> Iterator[Anomaly]:  # fmt: skip
    labels_of = {op.offer_id: op.extra.get("labels") or {} for op in judged
                 if op.value == "pull_own" and op.offer_id in honest}  # fmt: skip
    for lease in facts.inputs.snapshot["leases"]:
        if lease["workerId"] != worker_id:
            continue
        offer_id = lease["offerId"]
        if offer_id not in honest:
            yield Anomaly(
                "j",
                f"lease {offer_id} of the hostile worker comes from none of its "
                "honest pulls (released "
                f"{lease['releaseReason']})",
            )
            continue
        revision = facts.revisions.get(str(lease.get("revisionId"))) or {}
        required = ((revision.get("placement") or {}).get("required") or {}).get("labels") or {}
        labels = labels_of.get(offer_id, {})
        unmet = sorted(k for k, allowed in required.items() if labels.get(k) not in allowed)
        if unmet:
            yield Anomaly(
                "j",
                f"lease {offer_id} went to the hostile worker, whose session's "
                f"labels {labels} do not meet the placement "
                f"(label {', '.join(unmet)})",
            )


def byzantine_counts(facts: Facts) -> dict[str, int]:
    ops = hostile_ops(facts)
    found: Counter[str] = Counter()
    for op in ops:
        found["byzRequests"] += 1
        if not _judged(op):
            found["byzUnjudged"] += 1
            continue
        found["byzJudged"] += 1
        status = int(op.extra["status"])
        if status >= 400:
            found["byzRefused"] += 1
            if op.extra.get("target") in FOREIGN_TARGETS:
                found["byzForeignRefused"] += 1
        if op.value == "pull_own" and answer_key(op) == "200:offered":
            found["byzHonestOffers"] += 1
        if op.value == "own_complete" and status == 200:
            found["byzHonestCompletions"] += 1
        if op.value == "session_open_foreign_labels" and status == 403:
            found["byzLabelsRefused"] += 1
    return dict(found)
