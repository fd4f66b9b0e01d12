"""Test-only fault injection at named points of a claim.

Inactive unless the environment asks for it:

* ``QL_WORKER_CRASH_AT=point[,point...]`` — ``SIGKILL`` ourselves when the claim
  reaches ``point`` (no cleanup, no ``finally``: exactly a power cut for the
  process), to prove the ADR-0110 crash windows converge.
* ``QL_WORKER_PAUSE_AT=point`` (+ ``QL_WORKER_PAUSE_S``, default 30) — stop at
  ``point`` until a drain is requested or the pause ends, so a test can send
  SIGTERM at a known place (e.g. mid-claim, intent durable, nothing sent).

* ``QL_WORKER_TRACE_IDLE=1`` — log every ``idle`` answer with its offer id (normally
  only the transition into idle is logged), so the chaos checker sees each one.

Points of the coordinator (worker/coordinator.py): ``before_send`` (intent on
disk, request not sent), ``after_pull_response`` (HTTP response received,
nothing written yet), ``after_offer_response`` (the same, but only once the
response is a valid offer: the lease is committed and the inbox not yet written),
``after_inbox_write`` (offer in the inbox, pending claim
not cleared), ``after_clear_pending`` (intent cleared, outcome not yet logged).

Points of a credential rotation (worker/credential_rotation.py): ``before_rotate``
(nothing sent), ``after_rotate_response`` (the new credential in memory only),
``after_rotate_write`` (on disk, not yet used), ``after_rotate_first_use`` (the
heartbeat that used it first has been answered).

Points of the journal's file protocol (worker/journal.py through worker/fsio.py,
met by the :class:`~qinglong.worker.fsio.FileSystem` that :meth:`FaultPlan.journal_fs`
returns; each fires *before* its system call): ``intent_replace`` (a new
version of the intent written and fsynced, not yet renamed over the old one),
``inbox_link`` (an offer's temp file fsynced, not yet linked into the inbox),
``pending_unlink`` (the intent about to be removed: after an inbox write, an
idle answer or a move aside), ``aside_replace`` (an abandoned intent's copy
under failed-claims/ fsynced, not yet renamed; the intent still in place).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.worker.fsio import FileSystem, Step, StepHook

CRASH_ENV = "QL_WORKER_CRASH_AT"
PAUSE_ENV = "QL_WORKER_PAUSE_AT"
PAUSE_S_ENV = "QL_WORKER_PAUSE_S"
TRACE_IDLE_ENV = "QL_WORKER_TRACE_IDLE"
PENDING_FILE = "pending-claim.json"  # worker/journal.py PENDING_NAME
DEFAULT_PAUSE_S = 30.0

__all__ = ["CRASH_ENV", "JOURNAL_POINTS", "PAUSE_ENV", "TRACE_IDLE_ENV", "FaultPlan", "FaultPoint"]


class FaultPoint(StrEnum):
    BEFORE_SEND = "before_send"
    AFTER_PULL_RESPONSE = "after_pull_response"
    AFTER_OFFER_RESPONSE = "after_offer_response"
    AFTER_INBOX_WRITE = "after_inbox_write"
    AFTER_CLEAR_PENDING = "after_clear_pending"
    INTENT_REPLACE = "intent_replace"
    INBOX_LINK = "inbox_link"
    PENDING_UNLINK = "pending_unlink"
    ASIDE_REPLACE = "aside_replace"
    # Credential self-rotation (worker/credential_rotation.py, SPEC §16.2).
    BEFORE_ROTATE = "before_rotate"
    AFTER_ROTATE_RESPONSE = "after_rotate_response"
    AFTER_ROTATE_WRITE = "after_rotate_write"
    AFTER_ROTATE_FIRST_USE = "after_rotate_first_use"


JOURNAL_POINTS = frozenset({FaultPoint.INTENT_REPLACE, FaultPoint.INBOX_LINK,
                            FaultPoint.PENDING_UNLINK, FaultPoint.ASIDE_REPLACE})  # fmt: skip


def journal_point(step: str, path: str) -> FaultPoint | None:
    """The journal point a file-system step of the claim protocol is, if any."""
    name, parent = os.path.basename(path), os.path.basename(os.path.dirname(path))
    if name == PENDING_FILE:
        return {Step.REPLACE_FINAL: FaultPoint.INTENT_REPLACE,
                Step.UNLINK_FINAL: FaultPoint.PENDING_UNLINK}.get(Step(step))  # fmt: skip
    if step == Step.LINK_FINAL and parent == "inbox":
        return FaultPoint.INBOX_LINK
    if step == Step.REPLACE_FINAL and parent == "failed-claims":
        return FaultPoint.ASIDE_REPLACE
    return None


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
    trace_idle: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FaultPlan:
        pause_s = float(environ.get(PAUSE_S_ENV, DEFAULT_PAUSE_S))
        if not 0 < pause_s <= 600:
            raise ValueError(f"{PAUSE_S_ENV} must be in (0, 600]")
        return cls(
            crash_at=_points(environ.get(CRASH_ENV), CRASH_ENV),
            pause_at=_points(environ.get(PAUSE_ENV), PAUSE_ENV),
            pause_s=pause_s,
            trace_idle=environ.get(TRACE_IDLE_ENV) == "1",
        )

    @property
    def active(self) -> bool:
        return bool(self.crash_at or self.pause_at)

    def hit(
        self,
        point: str,
        *,
        announce: Callable[[str, str], None],
        pause: Callable[[float], object],
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

    def journal_fs(
        self,
        *,
        announce: Callable[[str, str], None],
        pause: Callable[[float], object],
    ) -> FileSystem | None:
        """A file system that applies the plan at the journal points; None if none asked."""
        if not (self.crash_at | self.pause_at) & JOURNAL_POINTS:
            return None

        def hook(step: Step, path: str) -> None:
            point = journal_point(step, path)
            if point is not None:
                self.hit(point, announce=announce, pause=pause)

        step_hook: StepHook = hook
        return FileSystem(step_hook)
