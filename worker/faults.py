"""Test-only fault injection at named points of a claim.

Inactive unless the environment asks for it:

* ``QL_WORKER_CRASH_AT=point[,point...]`` — ``SIGKILL`` ourselves when the claim
  reaches ``point`` (no cleanup, no ``finally``: exactly a power cut for the
  process), to prove the ADR-0110 crash windows converge.
* ``QL_WORKER_PAUSE_AT=point`` (+ ``QL_WORKER_PAUSE_S``, default 30) — stop at
  ``point`` until a drain is requested or the pause ends, so a test can send
  SIGTERM at a known place (e.g. mid-claim, intent durable, nothing sent).

Points: ``before_send`` (intent on disk, request not sent),
``after_pull_response`` (HTTP response received, nothing written yet),
``after_inbox_write`` (offer in the inbox, pending claim not cleared).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

CRASH_ENV = "QL_WORKER_CRASH_AT"
PAUSE_ENV = "QL_WORKER_PAUSE_AT"
PAUSE_S_ENV = "QL_WORKER_PAUSE_S"
DEFAULT_PAUSE_S = 30.0

__all__ = ["CRASH_ENV", "PAUSE_ENV", "FaultPlan", "FaultPoint"]


class FaultPoint(StrEnum):
    BEFORE_SEND = "before_send"
    AFTER_PULL_RESPONSE = "after_pull_response"
    AFTER_INBOX_WRITE = "after_inbox_write"


def _points(value: str | None, env: str) -> frozenset[FaultPoint]:
    if not value:
        return frozenset()
    try:
        return frozenset(FaultPoint(p.strip()) for p in value.split(",") if p.strip())
    except ValueError:
        known = ", ".join(p.value for p in FaultPoint)
        raise ValueError(f"{env} must name points among: {known}") from None


@dataclass(frozen=True)
class FaultPlan:
    crash_at: frozenset[FaultPoint] = frozenset()
    pause_at: frozenset[FaultPoint] = frozenset()
    pause_s: float = DEFAULT_PAUSE_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FaultPlan:
        pause_s = float(environ.get(PAUSE_S_ENV, DEFAULT_PAUSE_S))
        if not 0 < pause_s <= 600:
            raise ValueError(f"{PAUSE_S_ENV} must be in (0, 600]")
        return cls(
            crash_at=_points(environ.get(CRASH_ENV), CRASH_ENV),
            pause_at=_points(environ.get(PAUSE_ENV), PAUSE_ENV),
            pause_s=pause_s,
        )

    @property
    def active(self) -> bool:
        return bool(self.crash_at or self.pause_at)

    def hit(
        self,
        point: str,
        *,
        announce: Callable[[str, str], None],
        pause: Callable[[float], None],
    ) -> None:
        """Apply the plan at ``point``; ``announce(action, point)`` runs first."""
        if not self.active:
            return
        if point in self.pause_at:
            announce("pause", point)
            pause(self.pause_s)
        if point in self.crash_at:
            announce("crash", point)
            os.kill(os.getpid(), signal.SIGKILL)
