"""The idle view's belief: the last `ql.idle_probe()` answer and the database clock it read.

Part of the replica idle view (service/idle_view.py; its docstring is the full
argument, "Belief" and "Clocks"). Pure and synchronous: the caller passes the
monotonic `now` and the listener incarnation; nothing here reads a clock, does I/O
or counts a metric (answers say what to count).

Invalidation rules (a belief only ever ends; only a probe answer starts one):

* a `q` notification (`queue_changed`) ends the belief whose probe was sent
  before it — the belief carries the `q` count (*epoch*) at sending;
* a belief holds only under the listener incarnation its probe ran on, and
  `drop` (listener lost or reconnected) forgets it and the database clock;
* it lapses `max_staleness_s` after its probe was sent, and at its wake-up (the
  earliest future `not_before`/`due_at` the probe reported).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from qinglong.db.answers import IdleProbed


@dataclass(frozen=True)
class DbClock:
    """The database's clock (`nowMs` of a probe) pinned to the monotonic instant
    the probe was *sent*: the database read its clock after that instant, so
    `now_ms` is never behind the database's own clock (a session is judged
    expired no later than the database judges it), whatever the local wall
    clock says or does."""

    db_ms: int
    at: float  # monotonic

    def now_ms(self, monotonic_now: float) -> float:
        return self.db_ms + (monotonic_now - self.at) * 1000


@dataclass(frozen=True)
class Belief:
    idle: bool
    incarnation: int
    epoch: int  # the `q` count when its probe was sent
    formed_at: float  # monotonic, when the probe was sent
    wake_at: float | None  # monotonic


class ProbeVerdict(StrEnum):
    """What a probe answer installed (the `idle_view_probes` label)."""

    IDLE = "idle"
    BUSY = "busy"
    ERROR = "error"  # not a probe answer: nothing installed, answered as not idle


@dataclass
class Beliefs:
    """At most one belief, plus the database clock of the probe that formed it."""

    max_staleness_s: float
    epoch: int = 0  # bumped by every `q` notification
    _belief: Belief | None = None
    _db_clock: DbClock | None = None  # from the last probe under this incarnation

    def queue_changed(self) -> None:
        """A `q` notification: the belief no longer holds."""
        self.epoch += 1

    def drop(self) -> None:
        """A new (or lost) listener incarnation: forget the belief and the clock."""
        self._belief = None
        self._db_clock = None

    def install(
        self, result: IdleProbed | None, incarnation: int, epoch: int, sent: float
    ) -> ProbeVerdict:
        """Install a probe's answer (None: the probe answered a shape it may not
        have, and nothing is believed); `epoch` is the `q` count and `sent` the
        monotonic instant when the probe was sent."""
        if result is None:
            return ProbeVerdict.ERROR
        self._db_clock = DbClock(result.now_ms, sent)
        wake_at = None
        if result.wake_at_ms is not None:
            wake_at = sent + (result.wake_at_ms - result.now_ms) / 1000
        # A `q` that arrived with this probe's answer may postdate its snapshot:
        # the belief then starts stale (its epoch is the one at sending).
        self._belief = Belief(result.idle, incarnation, epoch, sent, wake_at)
        return ProbeVerdict.IDLE if result.idle else ProbeVerdict.BUSY

    def current(self, incarnation: int, now: float) -> Belief | None:
        """The belief, while it still holds at `now` under `incarnation`."""
        belief = self._belief
        if belief is None or belief.incarnation != incarnation or belief.epoch != self.epoch:
            return None
        if now - belief.formed_at >= self.max_staleness_s:
            return None
        if belief.wake_at is not None and now >= belief.wake_at:
            return None
        return belief

    @property
    def knows_db_clock(self) -> bool:
        return self._db_clock is not None

    def db_now_ms(self, now: float) -> float | None:
        """The database's clock at monotonic `now`, once a probe read it."""
        return None if self._db_clock is None else self._db_clock.now_ms(now)
