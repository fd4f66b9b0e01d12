"""The run/lease state invariants, as checks (checker class g, `state_invariant`).

Checked on every database cut the soak took (the heal cut and the final
snapshot, each one REPEATABLE READ transaction), and over the whole lease
history (every lease row, released or not, with its times):

1. a `dispatching` run has a live (unreleased) unstarted lease of its current
   attempt — the candidate index relies on it (release_unstarted_leases.sql);
2. a live started lease's attempt is `starting` or `running`;
3. a run is terminal only through its event: a `succeeded` / `failed` /
   `cancelled` run has its `run.<state>` event;
4. every lease released without completing its run (expired, session replaced
   or closed, lost) left its run queued again or terminal: by the final cut the
   run is `queued`, terminal, or has a lease claimed after that one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tools.chaos.facts import Anomaly, Facts

DONE_STATES = frozenset({"succeeded", "failed", "cancelled"})
# Releases after which the run must be a candidate again (or finished).
REQUEUE_RELEASES = frozenset({"expired", "session_replaced", "session_closed", "lost"})

__all__ = ["check_invariants"]


def check_invariants(facts: Facts) -> Iterator[Anomaly]:
    cuts = [("final", facts.inputs.snapshot)]
    if facts.inputs.heal is not None:
        cuts.insert(0, ("heal", facts.inputs.heal["snapshot"]))
    for name, snapshot in cuts:
        yield from _cut(name, snapshot)
    yield from _released_requeued(facts)


def _cut(name: str, snapshot: dict[str, Any]) -> Iterator[Anomaly]:
    live: dict[str, list[dict[str, Any]]] = {}
    for lease in snapshot["leases"]:
        if lease["releasedAtUs"] is None:
            live.setdefault(lease["attemptId"], []).append(lease)
    attempts = {a["id"]: a for a in snapshot["attempts"]}
    events = {(e["runId"], e["type"]) for e in snapshot.get("runEvents", [])}
    for run in snapshot["runs"]:
        held = live.get(run["currentAttemptId"] or "", [])
        if run["state"] == "dispatching" and not any(x["startedAtUs"] is None for x in held):
            yield Anomaly(
                "g", f"{name} cut: run {run['id']} dispatching without a live unstarted lease"
            )
        if (
            run["state"] in DONE_STATES
            and "runEvents" in snapshot
            and ((run["id"], f"run.{run['state']}") not in events)
        ):
            yield Anomaly(
                "g",
                f"{name} cut: run {run['id']} {run['state']} without its run.{run['state']} event",
            )
    for attempt_id, leases in live.items():
        state = (attempts.get(attempt_id) or {}).get("state")
        for lease in leases:
            if lease["startedAtUs"] is not None and state not in ("starting", "running"):
                yield Anomaly(
                    "g",
                    f"{name} cut: started lease {lease['offerId']} on an attempt in state {state}",
                )


def _released_requeued(facts: Facts) -> Iterator[Anomaly]:
    runs = {r["id"]: r for r in facts.inputs.snapshot["runs"]}
    for run_id, leases in facts.leases_by_run.items():
        run = runs.get(run_id)
        if run is None or run["state"] in DONE_STATES or run["state"] == "queued":
            continue
        for lease in leases:
            released = lease["releasedAtUs"]
            if released is None or lease["releaseReason"] not in REQUEUE_RELEASES:
                continue
            if not any(
                later["claimedAtUs"] >= lease["claimedAtUs"]
                and later["offerId"] != lease["offerId"]
                for later in leases
            ):
                yield Anomaly(
                    "g",
                    f"run {run_id}: lease {lease['offerId']} released "
                    f"{lease['releaseReason']}, run left {run['state']} with "
                    "no later lease",
                )
