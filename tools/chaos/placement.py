"""Where offers went and how many at once (checker class i, `placement`; SPEC §3.2).

1. slots: at no moment did one session hold more live leases than its `slots`.
   A lease counts from its claim until it was released, or, unstarted, until it
   expired (what ql_private.session_live_leases counts: started leases hold their
   slot until released, expired or not);
2. placement: every lease went to a worker whose labels (the manifest's, i.e.
   the capabilities it sent) satisfy the revision's required labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from tools.chaos.facts import Anomaly, Facts

__all__ = ["check_placement", "peak_leases"]


def check_placement(facts: Facts) -> Iterator[Anomaly]:
    yield from _slots(facts)
    yield from _labels(facts)


def _lease_end(lease: dict[str, Any], now_us: int) -> int:
    released = lease["releasedAtUs"]
    if lease["startedAtUs"] is not None:
        return released if released is not None else now_us
    return lease["expiresAtUs"] if released is None else min(released, lease["expiresAtUs"])


def peak_leases(leases: list[dict[str, Any]], now_us: int) -> tuple[int, int]:
    """(most live leases at once, when) over `leases`; an end frees its slot before
    a claim at the same microsecond takes one."""
    points: list[tuple[int, int]] = []
    for lease in leases:
        points.append((lease["claimedAtUs"], 1))
        points.append((_lease_end(lease, now_us), -1))
    live, peak, at = 0, 0, 0
    for when, step in sorted(points):
        live += step
        if live > peak:
            peak, at = live, when
    return peak, at


def _slots(facts: Facts) -> Iterator[Anomaly]:
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lease in facts.inputs.snapshot["leases"]:
        by_session[str(lease["sessionId"])].append(lease)
    now = facts.inputs.snapshot["takenAtUs"]
    for session_id, leases in by_session.items():
        slots = (facts.sessions.get(session_id) or {}).get("slots")
        if not isinstance(slots, int):
            continue
        peak, at = peak_leases(leases, now)
        if peak > slots:
            yield Anomaly(
                "i", f"session {session_id}: {peak} live leases at once (slots {slots}) at {at}us"
            )


def _labels(facts: Facts) -> Iterator[Anomaly]:
    workers = facts.inputs.manifest["workers"]
    for lease in facts.inputs.snapshot["leases"]:
        revision = facts.revisions.get(str(lease.get("revisionId"))) or {}
        placement = revision.get("placement") or {}
        required = (placement.get("required") or {}).get("labels") or {}
        name = facts.worker_names.get(lease["workerId"])
        if not required or name is None:
            continue
        labels = workers[name].get("labels") or {}
        unmet = sorted(k for k, allowed in required.items() if labels.get(k) not in allowed)
        if unmet:
            yield Anomaly(
                "i",
                f"lease {lease['offerId']} went to {name}, whose labels do "
                f"not meet the placement (label {', '.join(unmet)})",
            )
