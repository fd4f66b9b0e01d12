"""Without the executor: the inbox holds only entries whose lease can still be used
(SPEC §6.4, CONTRACT §6.4).

A worker that does not execute leaves accepted offers in its inbox, leased. An
entry stops being usable when its session is replaced or closed, or its lease is
released (expired unstarted, cancelled, superseded by a newer claim of the run).
Such entries are moved to ``ROOT/aside/`` (:meth:`Journal.move_aside`): kept for
inspection, not counted against the capacity, never offered to an executor, and
the inbox never holds two usable entries for one run. How the worker learns it:

* **Session** (local, exact): a worker has at most one active session, so once
  a session is established (resumed or opened), every entry leased on another
  session of this worker is dead (SPEC §5: opening one releases the old
  session's unstarted leases; a started lease stays bound to its session).
  An entry of another worker id is not this worker's to use either.
* **Run** (local, exact): the server claims a run only when it has no live
  lease (a claim releases an expired unstarted predecessor), so a newer entry
  for the same run means every older one is dead.
* **Lease** (asked, read-only): an unstarted lease past its ``expiresAtMs`` (by
  the worker's clock) is probed with a lease heartbeat carrying a version the
  server can never hold (:data:`PROBE_VERSION`). The lease calls check their
  fences first, the version last (CONTRACT §7: offer_foreign, token_mismatch,
  session_replaced, lease_expired, lease_terminal, attempt_changed,
  revision_drift, then stale_lease_version), and a version that is neither the
  current one nor the one before is never applied nor replayed: the answer is
  the fence that fails, or ``stale_lease_version`` when every fence holds (the
  lease is still usable). The probe writes nothing on the server.

The keeper tracks only small summaries (:class:`Held`) of the entries; with the
executor (``--execute``) the lifecycle drives and drops entries itself.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from qinglong.worker.eventlog import EventLog
from qinglong.worker.journal import EntryState, InboxEntry, Journal
from qinglong.worker.lease_client import LeaseClient, LeaseConflict, LeaseRef, LeaseUnavailable
from qinglong.worker.owner_lock import Clock, wall_clock_ms

# The largest wire counter (defs@v1 counter): no lease ever reaches it.
PROBE_VERSION = 9_007_199_254_740_991
# Fence categories that mean "this lease can never be used again".
DEAD_CATEGORIES = frozenset({
    "offer_foreign", "token_mismatch", "session_replaced", "lease_expired", "lease_terminal",
    "attempt_changed", "revision_drift",
})  # fmt: skip
USABLE_CATEGORY = "stale_lease_version"
PROBE_GRACE_MS = 2_000  # past expiresAtMs before the first probe (clock skew)
REPROBE_MS = 30_000  # a usable answer, or a full inbox: ask again after this
PROBES_PER_TURN = 16  # never starve the session heartbeat

__all__ = ["DEAD_CATEGORIES", "PROBE_VERSION", "Held", "InboxKeeper"]


@dataclass(frozen=True)
class Held:
    """What the keeper needs to know about one inbox entry (no token)."""

    offer_id: str
    worker_id: str
    session_id: str
    generation: int
    run_id: str
    claimed_at_ms: int
    lease_generation: int
    expires_at_ms: int
    unstarted: bool

    @classmethod
    def of(cls, entry: InboxEntry) -> Held:
        lease = entry.lease
        return cls(
            offer_id=entry.offer_id,
            worker_id=str(lease.get("workerId")),
            session_id=str(lease.get("sessionId")),
            generation=_int(lease.get("sessionGeneration")),
            run_id=str(lease.get("runId")),
            claimed_at_ms=_int(lease.get("claimedAtMs")),
            lease_generation=_int(lease.get("leaseGeneration")),
            expires_at_ms=_int(lease.get("expiresAtMs")),
            unstarted=entry.state == EntryState.ACCEPTED.value,
        )

    @property
    def newness(self) -> tuple[int, int, int]:
        return (self.claimed_at_ms, self.lease_generation, self.generation)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class InboxKeeper:
    def __init__(
        self,
        journal: Journal,
        leases: LeaseClient | None,
        *,
        worker_id: str,
        events: EventLog,
        clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
    ) -> None:
        self._journal = journal
        self._leases = leases  # None: never probe (local rules only)
        self._worker_id = worker_id
        self._events = events
        self._clock = clock
        self._rng = rng or random.SystemRandom()
        self._held: dict[str, Held] = {}
        self._probe_at: dict[str, int] = {}
        self._asked_at: dict[str, int] = {}  # last probe sent, per entry

    # -- what the runner asks ------------------------------------------------

    def load(self) -> None:
        """Read the inbox (start-up); drop older entries of a run held twice."""
        self._held.clear()
        self._probe_at.clear()
        self._asked_at.clear()
        for offer_id in self._journal.offer_ids():
            entry = self._journal.get(offer_id)
            if entry is not None:
                self._track(Held.of(entry))
        for run_id in {h.run_id for h in self._held.values()}:
            self._supersede(run_id)

    def __len__(self) -> int:
        return len(self._held)

    def sessions(self) -> list[tuple[str, int]]:
        """This worker's sessions the inbox leases belong to, newest generation first."""
        seen = {(h.session_id, h.generation) for h in self._held.values()
                if h.worker_id == self._worker_id}  # fmt: skip
        return sorted(seen, key=lambda s: s[1], reverse=True)

    def holds_session(self, session_id: str, generation: int) -> bool:
        return any((h.session_id, h.generation) == (session_id, generation)
                   for h in self._held.values())  # fmt: skip

    def settle(self, session_id: str, generation: int) -> int:
        """A session is established: every entry of another session is dead."""
        moved = 0
        for held in list(self._held.values()):
            if held.worker_id != self._worker_id:
                moved += self._aside(held, "worker_changed")
            elif (held.session_id, held.generation) != (session_id, generation):
                moved += self._aside(held, "session_replaced")
        return moved

    def admitted(self, entry: InboxEntry | None) -> None:
        """An offer was accepted: track it; an older entry of its run is dead."""
        if entry is None:
            return
        held = Held.of(entry)
        self._track(held)
        self._supersede(held.run_id)

    def recheck_all(self) -> None:
        """A full inbox: ask about every unstarted entry not asked recently."""
        now = self._clock()
        for offer_id, held in self._held.items():
            asked = self._asked_at.get(offer_id)
            if held.unstarted and (asked is None or now - asked >= REPROBE_MS):
                self._probe_at[offer_id] = min(self._probe_at.get(offer_id, now), now)

    def next_due_ms(self) -> int | None:
        if self._leases is None or not self._probe_at:
            return None
        return min(self._probe_at.values())

    def probe_due(self, skip: Iterable[str] = ()) -> int:
        """Probe (at most :data:`PROBES_PER_TURN`) entries that are due; moved count."""
        if self._leases is None:
            return 0
        now = self._clock()
        for offer_id in skip:
            if offer_id in self._probe_at:  # not now, but never due in a busy loop
                self._probe_at[offer_id] = max(self._probe_at[offer_id], now + PROBE_GRACE_MS)
        due = sorted((at, oid) for oid, at in self._probe_at.items() if at <= now)
        moved = 0
        for _, offer_id in due[:PROBES_PER_TURN]:
            moved += self._probe(offer_id)
        return moved

    # -- inside ----------------------------------------------------------------

    def _track(self, held: Held) -> None:
        self._held[held.offer_id] = held
        if held.unstarted:
            self._probe_at[held.offer_id] = held.expires_at_ms + PROBE_GRACE_MS
        else:
            self._probe_at.pop(held.offer_id, None)

    def _supersede(self, run_id: str) -> None:
        same = [h for h in self._held.values() if h.run_id == run_id]
        if len(same) < 2:
            return
        newest = max(same, key=lambda h: (h.newness, h.offer_id))
        for held in same:
            if held is not newest:
                self._aside(held, "superseded")

    def _probe(self, offer_id: str) -> int:
        assert self._leases is not None
        entry = self._journal.get(offer_id)
        if entry is None or entry.state != EntryState.ACCEPTED.value:
            self._forget(offer_id)
            return 0
        held = self._held.get(offer_id) or Held.of(entry)
        self._asked_at[offer_id] = self._clock()
        try:
            self._leases.heartbeat(LeaseRef.from_lease(entry.lease), PROBE_VERSION)
        except LeaseConflict as exc:
            if exc.reason in DEAD_CATEGORIES:
                return self._aside(held, exc.reason)
            # stale_lease_version: every fence holds, the lease is usable.
            self._probe_at[offer_id] = self._clock() + REPROBE_MS
            if exc.reason != USABLE_CATEGORY:
                self._events.warning("inbox.probe_unexpected", offerId=offer_id,
                                     reason=exc.reason)  # fmt: skip
            return 0
        except LeaseUnavailable as exc:
            delay = REPROBE_MS // 2 + self._rng.randint(0, REPROBE_MS // 2)
            self._probe_at[offer_id] = self._clock() + delay
            self._events.warning("inbox.probe_failed", offerId=offer_id, reason=exc.reason,
                                 retryInMs=delay)  # fmt: skip
            return 0
        # 200: no lease holds PROBE_VERSION; never act on such an answer.
        self._probe_at[offer_id] = self._clock() + REPROBE_MS
        self._events.warning("inbox.probe_unexpected", offerId=offer_id, reason="applied")
        return 0

    def _aside(self, held: Held, reason: str) -> int:
        moved = self._journal.move_aside(held.offer_id)
        self._forget(held.offer_id)
        if moved:
            self._events.info("inbox.set_aside", offerId=held.offer_id, runId=held.run_id,
                              reason=reason, sessionId=held.session_id,
                              generation=held.generation)  # fmt: skip
        return int(moved)

    def _forget(self, offer_id: str) -> None:
        self._held.pop(offer_id, None)
        self._probe_at.pop(offer_id, None)
        self._asked_at.pop(offer_id, None)
