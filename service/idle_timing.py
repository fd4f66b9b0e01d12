"""The idle view's timing: when the next barrier, probe and re-confirmation may run,
and when the view engages.

Part of the replica idle view (service/idle_view.py; its docstring is the full
argument, "Barrier", "Forged notifications" and "Engagement"). Pure and synchronous:
the caller passes the monotonic `now`; nothing here reads a clock or does I/O.

* At most one barrier per `ping_interval_s`, shared by every waiting pull.
* A barrier that must probe (no belief holds) waits, in addition, until
  `probe_min_interval_s` after the last probe: a flood of `q` notifications
  (forged or real) costs at most one bounded probe per interval.
* Re-confirmation of cached credentials runs at most once per quarter of the
  trust period `credential_max_age_s` (never when it is 0), and only when some
  entry is past half its period (the cache says which).
* Engagement: the view engages once `threshold_per_s` worker requests arrive
  within one second of the clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BarrierClock:
    ping_interval_s: float
    probe_min_interval_s: float
    credential_max_age_s: float
    last_barrier: float = float("-inf")
    last_probe: float = float("-inf")
    last_confirm: float = float("-inf")

    def barrier_due_in(self, now: float, *, belief_holds: bool) -> float:
        """Seconds until the next barrier may be sent (<= 0: now)."""
        due = self.last_barrier + self.ping_interval_s
        if not belief_holds:  # the barrier will be a probe
            due = max(due, self.last_probe + self.probe_min_interval_s)
        return due - now

    def barrier_sent(self, sent: float, *, probe: bool) -> None:
        self.last_barrier = sent
        if probe:
            self.last_probe = sent

    def confirm_window_open(self, now: float) -> bool:
        """No re-confirmation in the last quarter of the trust period (and the
        cache trusts credentials at all)."""
        max_age_s = self.credential_max_age_s
        return max_age_s > 0 and now - self.last_confirm >= max_age_s / 4

    def confirm_sent(self, sent: float) -> None:
        self.last_confirm = sent


@dataclass
class EngageMeter:
    """Counts worker requests per whole second of the clock."""

    threshold_per_s: float
    _second: int = -1
    _count: int = 0

    def note(self, now: float) -> bool:
        """Count one request at `now`; True once this second reached the threshold."""
        second = int(now)
        if second != self._second:
            self._second, self._count = second, 0
        self._count += 1
        return self._count >= self.threshold_per_s
