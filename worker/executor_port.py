"""What the run loop needs from an executor, and the worker that executes nothing.

The run loop (worker/runner.py) drives one :class:`Executor`:

* :class:`qinglong.worker.lifecycle.Lifecycle` — ``--execute``: runs each
  accepted offer through its lease (SPEC §7); loaded only then (R-LAY-1).
* :class:`NoExecution` — without ``--execute``: accepted offers stay in the
  inbox, still leased, and nothing runs. Every method answers what a worker
  that only holds offers does, so the loop asks the same questions of both
  and has no "is there an executor?" branch.

Light: stdlib only, no process or network code (R-LAY-1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from qinglong.worker.journal import Journal, JournalError
from qinglong.worker.owner_lock import LockError

__all__ = ["Executor", "NoExecution", "Waiter"]


class Waiter(Protocol):
    """The run loop's stop signal, as an executor waits on it (worker/runner.py)."""

    @property
    def requested(self) -> bool: ...

    def wait(self, seconds: float, fds: list[int] | None = None) -> bool: ...


class Executor(Protocol):
    """The run loop's side of an executor. The loop owns the session, the pulls
    and their timers; the executor owns what happens to the accepted offers."""

    # Set by the run loop: called whenever an offer ends and frees its slot.
    on_slot_freed: Callable[[], None] | None

    # -- admission and the loop's turns ---------------------------------------

    def sync(self) -> int:
        """Take on inbox entries not taken on yet (start-up, after every settled
        claim); how many were taken on."""
        ...

    def tick(self) -> None:
        """Do whatever is due now (lease calls, process supervision)."""
        ...

    def wants_offers(self) -> bool:
        """Whether the loop may pull (capacity beyond this is the inbox's)."""
        ...

    def slots_taken(self) -> int:
        """How many of the worker's ``slots`` are taken: a pull asks for the rest."""
        ...

    def tracked(self) -> int:
        """Offers this executor drives (started or still to start)."""
        ...

    def sessions(self) -> list[tuple[str, int]]:
        """Sessions the driven offers' leases belong to, newest generation first."""
        ...

    def wait(self, stop: Waiter, seconds: float) -> bool:
        """The loop's idle wait: up to ``seconds``, or until ``stop`` is
        requested, doing due work meanwhile; may return early when a slot was
        freed. True if a stop was requested."""
        ...

    # -- drain ----------------------------------------------------------------

    def begin_drain(self, *, start_pending: bool) -> None:
        """No more offers; ``start_pending``: still run what is already accepted."""
        ...

    def busy(self) -> bool:
        """Anything left to do before the session may close."""
        ...

    def next_due_ms(self) -> int | None:
        """When :meth:`tick` has something to do next (None: nothing scheduled)."""
        ...

    def wait_fds(self) -> list[int]:
        """File descriptors whose readiness means :meth:`tick` has work (pidfds)."""
        ...

    def shutdown(self) -> None:
        """Stop every running command (its lease is then completed)."""
        ...

    def abort(self) -> None:
        """Fail closed: stop everything and report nothing (leases expire)."""
        ...

    def leaves_session_open(self) -> bool:
        """At the drain: leave the session to expire instead of closing it
        (closing it would release leases that nothing consumed, SPEC §7)."""
        ...

    def forget_unstarted(self) -> int:
        """After the session was closed (its unstarted leases released with it):
        drop those offers; how many."""
        ...


class NoExecution:
    """The executor of a worker without ``--execute``: it holds the accepted
    offers in the inbox, leased, and runs nothing (SPEC §7).

    Its slots are the inbox's entries; it never asks the loop to wait for
    anything but the stop signal; at the drain it has nothing to finish, and
    while the inbox holds an entry the session is left open (the leases then
    end by their own expiry, or when an executor consumes them after a restart).
    """

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.on_slot_freed: Callable[[], None] | None = None  # never called: nothing ends

    def sync(self) -> int:
        return 0

    def tick(self) -> None:
        return None

    def wants_offers(self) -> bool:
        return True  # a full inbox answers the pull itself (inbox_full)

    def slots_taken(self) -> int:
        return self._journal.count()

    def tracked(self) -> int:
        return 0

    def sessions(self) -> list[tuple[str, int]]:
        return []

    def wait(self, stop: Waiter, seconds: float) -> bool:
        return stop.wait(seconds)

    def begin_drain(self, *, start_pending: bool) -> None:
        return None

    def busy(self) -> bool:
        return False

    def next_due_ms(self) -> int | None:
        return None

    def wait_fds(self) -> list[int]:
        return []

    def shutdown(self) -> None:
        return None

    def abort(self) -> None:
        return None

    def leaves_session_open(self) -> bool:
        """Whether the inbox holds an offer (unreadable: assume so, fail closed)."""
        try:
            return bool(self._journal.offer_ids())
        except (JournalError, LockError, OSError):
            return True

    def forget_unstarted(self) -> int:
        return 0
