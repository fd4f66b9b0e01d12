"""The worker's run loop (SPEC §6, ADR-0110): session, heartbeat, one pull at a time.

One thread, one connection. The loop owns the only timers: when to heartbeat
the session (the server's ``heartbeatIntervalMs``) and when to pull next (the
coordinator's ``nextAttemptAtMs`` for a kept claim, ``retryAfterMs`` + jitter
after ``idle``). Everything waits on one :class:`StopSignal`, so SIGTERM/SIGINT
interrupt any wait at once.

Start-up converges the crash windows: a ``pending-claim.json`` left by a dead
process names its session; that session is heartbeated and, if still alive,
reused, so the coordinator replays exactly the same offer id + token on it and
the server recovers the lease it may already have committed. Only when that
session is gone is the intent moved aside and a new session opened.

Drain: no request is sent after a stop was requested (checked right before the
send), a kept claim stays on disk, the session is closed best-effort, exit 0.
Without the executor, accepted offers stay in the inbox, still leased (SPEC §7):
closing the session would release their leases, so while the inbox holds an
entry the session is left to expire instead of being closed; the leases then
end only by their own expiry or when an executor consumes them (a restart,
with or without ``--execute``, resumes the inbox's session while it is alive).
Without the executor, the inbox keeper (worker/inbox_keeper.py) moves entries
whose lease can no longer be used to ``ROOT/aside/`` (SPEC §6.4).

The loop drives an executor through one interface (worker/executor_port.py):
without ``--execute`` that is ``NoExecution``, which runs nothing and answers
as a worker that only holds offers (all of the above); with it, the lifecycle.

With the executor (``--execute``, worker/lifecycle.py, loaded only then):

* Each loop turn first lets the executor do what is due (lease ACKs, heartbeats,
  completions, process supervision), and every wait also wakes when a command
  exits (pidfds) or a lease call is due. Pulls happen only while fewer than
  ``slots`` offers are held; a freed slot pulls at once.
* Start-up resumes the *inbox's* session too: with no pending claim but inbox
  entries holding leases, the newest of their sessions (sessionId/generation
  from the lease) is heartbeated and, if still alive, reused instead of opening
  a new one. Opening one would release that session's unstarted leases and
  fence off its started ones (a started lease stays bound to its session), so a
  restart could neither ACK the accepted offers nor complete the interrupted
  ones. A resumed session whose capabilities differ from the configuration is
  replaced only once the executor holds nothing.
* Drain (SIGTERM/SIGINT): no new pulls and no new starts; running commands may
  finish for ``executor.shutdownGraceS`` (default 30 s) while the session and
  their leases keep being heartbeated; then (or at a second signal) they are
  stopped and completed ``failed`` reason ``worker_shutdown``; only then is the
  session closed (a lease call needs a live session), which releases the
  unstarted leases, whose entries are dropped. A ``done`` stop (``--once``,
  ``--max-offers``, ``--exit-when-idle``) instead runs what was already accepted
  to its end. Exit 0. A journal failure kills every command and leaves the
  leases to expire (fail closed).
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar

from qinglong.worker.backoff import DEFAULT_POLICY, BackoffPolicy
from qinglong.worker.config import ConfigError, WorkerConfig, capabilities_digest, describe
from qinglong.worker.coordinator import (
    AUTH_MIN_DELAY_MS,
    BATCH_PULL_SCHEMA,
    LOGGER,
    ClaimCoordinator,
    ClaimOutcome,
    PullFn,
    StepResult,
)
from qinglong.worker.credential_rotation import CredentialRotator, RotationFailed
from qinglong.worker.errors import CredentialError, TransportError
from qinglong.worker.eventlog import EventLog, Level
from qinglong.worker.executor_port import Executor, NoExecution
from qinglong.worker.faults import FaultPlan, FaultPoint
from qinglong.worker.fsio import REAL_FS, FileSystem
from qinglong.worker.journal import Journal, JournalError
from qinglong.worker.owner_lock import Clock, LockError, LockHeld, wall_clock_ms
from qinglong.worker.session import (
    AuthRefused,
    IngressUnavailable,
    RequestRefused,
    SessionClient,
    SessionError,
    SessionInfo,
    SessionLost,
)

if TYPE_CHECKING:
    from qinglong.worker.inbox_keeper import InboxKeeper

PULL_PATH = "/v1/offers/pull"
PULL_BATCH_PATH = "/v1/offers/pull-batch"  # SPEC §18.1: a worker with several free slots
# 409 reasons that mean "this session is unusable": open a new one.
SESSION_LOST_REASONS = frozenset({
    "session_replaced", "session_expired", "session_not_found", "session_closed",
    "capabilities_mismatch",
})  # fmt: skip
# 409: the operator drains this session (admin session close / worker disable
# --drain). It takes no new offer, but its started leases run on and it stays
# open until they end: stop pulling, keep heartbeating the session and the
# running leases, and never open a new session meanwhile (that would replace
# this one and fence its running leases off). The session's end shows up as a
# 409 on its next heartbeat; then a new session is opened as after any loss.
SESSION_DRAINING = "session_draining"
# Outcomes after which no claim is pending (the claim settled one way or another).
SETTLED = frozenset({
    ClaimOutcome.IDLE, ClaimOutcome.ACCEPTED, ClaimOutcome.CONFLICT, ClaimOutcome.REJECTED,
    ClaimOutcome.EXHAUSTED, ClaimOutcome.INBOX_FULL,
})  # fmt: skip
# Backoff index cap for unbounded retry loops (session open, heartbeat): 60 s max.
_MAX_BACKOFF_INDEX = 15
# After commands were told to stop at drain: how long their completions may take.
DRAIN_COMPLETE_MS = 30_000

__all__ = ["DrainRequested", "ExitCode", "RunOptions", "Runner", "StopSignal", "run_worker"]


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1  # journal/lock/ingress refusal at run time
    CONFIG = 2  # configuration or usage


class DrainRequested(BaseException):
    """Raised at ``before_send`` once a stop was requested: the claim stays pending.

    A ``BaseException`` so the coordinator propagates it untouched (SPEC §6.2:
    cancellation is never recorded as a delivery failure)."""


@dataclass(frozen=True)
class RunOptions:
    once: bool = False  # exit after the first claim settles
    max_offers: int | None = None  # exit after N accepted offers
    exit_when_idle: bool = False  # exit at the first idle (or full inbox)


RUN_FOREVER = RunOptions()
NO_FAULTS = FaultPlan()


class StopSignal:
    """A stop request plus an interruptible wait, safe to trigger from a signal handler.

    A signal handler runs between two bytecodes of the main thread, possibly while
    that thread holds a lock (a ``threading.Event``'s, or the log's): taking any
    lock in it can deadlock. So a request only sets a flag and writes one byte to a
    non-blocking self-pipe, and :meth:`wait` is a ``select`` on that pipe.
    """

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._requested = False
        self.reason: str | None = None
        self.requests = 0  # a second signal during a drain escalates it

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._requested = True
        self.requests += 1
        with contextlib.suppress(OSError):  # full pipe or closed: the flag is what counts
            os.write(self._write_fd, b"x")

    @property
    def requested(self) -> bool:
        return self._requested

    def wait(self, seconds: float, fds: list[int] | None = None) -> bool:
        """Sleep up to ``seconds`` (or until one of ``fds`` is readable); True if a
        stop was requested (before or meanwhile)."""
        if not self._requested:
            select.select([self._read_fd, *(fds or ())], [], [], max(0.0, seconds))
        return self._requested

    def nap(self, seconds: float, fds: list[int] | None = None) -> None:
        """Sleep even after a stop was requested (the executor's drain), waking on
        ``fds`` or on a further request."""
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 64):
                pass
        select.select([self._read_fd, *(fds or ())], [], [], max(0.0, seconds))

    def close(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class Runner:
    def __init__(
        self,
        config: WorkerConfig,
        journal: Journal,
        sessions: SessionClient,
        pull: PullFn,
        *,
        events: EventLog,
        stop: StopSignal,
        options: RunOptions = RUN_FOREVER,
        faults: FaultPlan = NO_FAULTS,
        clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
        policy: BackoffPolicy = DEFAULT_POLICY,
        executor: Executor | None = None,  # None: NoExecution (without --execute)
        keeper: InboxKeeper | None = None,
        rotator: CredentialRotator | None = None,
    ) -> None:
        self._config = config
        self._rotator = rotator  # credential self-rotation (SPEC §16.2)
        if rotator is not None:
            rotator.checkpoint = self._checkpoint
        self._executor: Executor = executor if executor is not None else NoExecution(journal)
        self._executor.on_slot_freed = self._on_slot_freed
        self._keeper = keeper  # without the executor: keeps the inbox to usable entries
        self._journal = journal
        self._sessions = sessions
        self._events = events
        self._stop = stop
        self._options = options
        self._faults = faults
        self._clock = clock
        self._rng = rng or random.SystemRandom()
        self._policy = policy
        self._coordinator = ClaimCoordinator(
            journal, pull, clock=clock, rng=self._rng, policy=policy, checkpoint=self._checkpoint,
            log=self._coordinator_log,
        )  # fmt: skip
        self._caps_digest = capabilities_digest(config.capabilities)
        self._session: SessionInfo | None = None
        self._next_heartbeat_ms = 0
        self._next_pull_ms = 0
        self._heartbeat_failures = 0
        self._step_failures = 0
        self._accepted = 0
        self._resumed_stale = False
        self._draining = False  # the session answered session_draining: no pulls
        self._last_outcome: ClaimOutcome | None = None

    @property
    def accepted(self) -> int:
        return self._accepted

    # -- main loop ---------------------------------------------------------

    def run(self) -> ExitCode:
        clean = False
        try:
            self._executor.sync()  # adopt what a predecessor left in the inbox
            if self._keeper is not None:
                self._keeper.load()
            self._loop()
            clean = True
        except DrainRequested:
            clean = True  # the claim stays pending; drain below
        finally:
            self._drain(clean)
        return ExitCode.OK

    def _loop(self) -> None:
        while not self._stop.requested:
            if self._session is None:
                self._establish()
                continue
            self._executor.tick()
            now = self._clock()
            may_pull = self._may_pull()
            keeper_due = self._keeper.next_due_ms() if self._keeper is not None else None
            if self._rotator is not None and self._rotator.due(now):
                self._rotate()
            elif now >= self._next_heartbeat_ms:
                self._heartbeat()
            elif keeper_due is not None and now >= keeper_due:
                self._probe_inbox()
            elif may_pull and now >= self._next_pull_ms:
                self._pull()
            else:
                wake = min(self._next_heartbeat_ms,
                           self._next_pull_ms if may_pull else self._next_heartbeat_ms)  # fmt: skip
                if keeper_due is not None:
                    wake = min(wake, keeper_due)
                self._wait((wake - now) / 1000)

    def _probe_inbox(self) -> None:
        assert self._keeper is not None
        pending = self._journal.load_pending()
        # The coordinator owns a pending claim's entries (every offer id of a
        # batch) until the claim settles.
        self._keeper.probe_due(skip=pending.offer_ids() if pending is not None else [])

    def _may_pull(self) -> bool:
        if self._draining:
            return False
        return self._executor.wants_offers()

    def _on_slot_freed(self) -> None:
        self._next_pull_ms = min(self._next_pull_ms, self._clock())
        if self._draining:
            # A draining session closes with its last lease: ask now, not a
            # heartbeat interval later, whether it has (409 -> a new session).
            self._next_heartbeat_ms = min(self._next_heartbeat_ms, self._clock())

    def _wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; the executor keeps doing its due work meanwhile
        and may end the wait early when a slot was freed. True if a stop was requested."""
        return self._executor.wait(self._stop, seconds)

    def _coordinator_log(self, level: int, message: str) -> None:
        self._events.emit(Level(level), "log", logger=LOGGER, message=message)

    def _checkpoint(self, point: str) -> None:
        self._faults.hit(point, announce=self._announce_fault, pause=self._stop.wait)
        if point == FaultPoint.BEFORE_SEND and self._stop.requested:
            raise DrainRequested(point)

    def _announce_fault(self, action: str, point: str) -> None:
        self._events.warning(f"fault.{action}", point=point, pid=os.getpid())

    def _backoff_ms(self, failures: int) -> int:
        return self._policy.delay_ms(min(max(failures - 1, 0), _MAX_BACKOFF_INDEX), self._rng)

    # -- session -----------------------------------------------------------

    def _establish(self) -> None:
        """Resume the pending claim's session or open a new one; retry until stopped."""
        failures = 0
        while not self._stop.requested:
            try:
                resumed = self._resume()
                self._session = resumed or self._open()
            except (AuthRefused, IngressUnavailable) as exc:
                failures += 1
                self._wait_after_session_error("session.open_failed", exc, failures)
                continue
            except RequestRefused as exc:
                raise ConfigError("session_refused", exc.reason) from None
            self._resumed_stale = (
                resumed is not None and resumed.capabilities_digest != self._caps_digest
            )
            if self._keeper is not None:
                # One active session per worker: entries of any other are dead.
                self._keeper.settle(self._session.session_id, self._session.generation)
            now = self._clock()
            self._next_heartbeat_ms = now + self._session.heartbeat_interval_ms
            self._next_pull_ms = now
            self._heartbeat_failures = 0
            self._draining = False
            return

    def _wait_after_session_error(self, event: str, exc: SessionError, failures: int) -> None:
        delay = max(self._backoff_ms(failures), exc.retry_after_ms or 0)
        if isinstance(exc, AuthRefused):
            # Needs an operator; loud, slow, never with the credential itself.
            delay = max(delay, AUTH_MIN_DELAY_MS)
            self._events.error(event, reason=exc.reason, auth=True, retryInMs=delay)
        else:
            self._events.warning(event, reason=exc.reason, retryInMs=delay)
        self._wait(delay / 1000)

    def _resume(self) -> SessionInfo | None:
        """Heartbeat the session named by a pending claim; None if there is none to resume."""
        pending = self._journal.load_pending()
        if pending is None:
            return self._resume_inbox()
        if pending.worker_id != self._config.worker_id:
            self._set_aside("worker_changed", pending.offer_id)
            return None
        try:
            info = self._sessions.heartbeat(pending.session_id, pending.generation)
        except SessionLost as exc:
            # The lease (if any) died with its session; the intent can never be answered.
            self._set_aside("session_lost", pending.offer_id, detail=exc.reason)
            return None
        self._events.info("session.resumed", offerId=pending.offer_id, attempts=pending.attempts,
                          **info.log_fields())  # fmt: skip
        return info

    def _resume_inbox(self) -> SessionInfo | None:
        """Heartbeat the newest session the inbox leases belong to (SPEC §6.4: a
        new session would release them, and the same runs would be claimed again)."""
        sessions = self._executor.sessions()
        if not sessions and self._keeper is not None:
            sessions = self._keeper.sessions()
        if not sessions:
            return None
        session_id, generation = sessions[0]
        try:
            info = self._sessions.heartbeat(session_id, generation)
        except SessionLost as exc:
            # Its leases died with it: their calls answer 409 and the entries are
            # dropped (executor), or are moved aside once a session is open (keeper).
            self._events.warning("session.resume_failed", reason=exc.reason,
                                 sessionId=session_id, generation=generation)  # fmt: skip
            return None
        self._events.info("session.resumed", source="inbox", **info.log_fields())
        return info

    def _set_aside(self, reason: str, offer_id: str, detail: str | None = None) -> None:
        self._journal.move_pending_aside(reason)
        self._events.warning("claim.abandoned", offerId=offer_id, reason=reason, detail=detail)

    def _open(self) -> SessionInfo:
        info = self._sessions.open(self._config.capabilities)
        if info.capabilities_digest != self._caps_digest:
            # The fence uses the server's digest; a difference means the two sides
            # canonicalise differently, which must be visible.
            self._events.warning(
                "session.capabilities_digest_differs",
                local=self._caps_digest,
                server=info.capabilities_digest,
            )
        self._events.info("session.opened", slots=self._config.capabilities.get("slots"),
                          heartbeatIntervalMs=info.heartbeat_interval_ms,
                          **info.log_fields())  # fmt: skip
        return info

    def _heartbeat(self) -> None:
        session = self._session
        assert session is not None
        try:
            self._session = self._sessions.heartbeat(session.session_id, session.generation)
        except SessionLost as exc:
            self._lose_session(exc.reason)
            return
        except (AuthRefused, IngressUnavailable) as exc:
            self._heartbeat_failures += 1
            # Keep pulling meanwhile; retry sooner than the interval while failing.
            delay = min(self._backoff_ms(self._heartbeat_failures),
                        session.heartbeat_interval_ms)  # fmt: skip
            self._next_heartbeat_ms = self._clock() + delay
            level = self._events.error if isinstance(exc, AuthRefused) else self._events.warning
            level("session.heartbeat_failed", reason=exc.reason, retryInMs=delay)
            return
        self._heartbeat_failures = 0
        self._next_heartbeat_ms = self._clock() + self._session.heartbeat_interval_ms

    def _rotate(self) -> None:
        """Rotate the credential (worker/credential_rotation.py), then use the new
        one at once: a session heartbeat, its first use, retires the old one."""
        assert self._rotator is not None
        try:
            lifetime = self._rotator.rotate()
        except (RotationFailed, TransportError, CredentialError, OSError) as exc:
            self._rotator.failed(self._clock())
            self._events.warning(
                "credential.rotation_failed", reason=getattr(exc, "reason", type(exc).__name__)
            )
            return
        self._events.info(
            "credential.rotated",
            credentialId=lifetime.credential_id,
            expiresAtMs=lifetime.expires_at_ms,
        )
        self._heartbeat()
        self._checkpoint(FaultPoint.AFTER_ROTATE_FIRST_USE)

    def _lose_session(self, reason: str) -> None:
        session = self._session
        fields = session.log_fields() if session is not None else {}
        self._events.warning("session.lost", reason=reason, **fields)
        self._session = None
        self._draining = False

    # -- claims ------------------------------------------------------------

    def _pull(self) -> None:
        session = self._session
        assert session is not None
        result = self._coordinator.step(session.fence(), self._batch_size())
        now = self._clock()
        handler = self._HANDLERS[result.outcome]
        handler(self, result, now)
        for offer_id, category in result.conflicts:
            if not (result.outcome is ClaimOutcome.CONFLICT and offer_id == result.offer_id):
                # A batch's refused pair: its own outcome, as a single pull's 409 is.
                self._events.warning("claim.conflict", offerId=offer_id, reason=category)
        self._last_outcome = result.outcome
        if result.outcome in SETTLED:
            self._after_settled(result, session)

    def _batch_size(self) -> int:
        """How many offers a new intent asks for (SPEC §18.2): the free slots —
        those the executor does not hold, or without it those the inbox does not
        — and never past ``--max-offers``. 1 (a one-slot worker): a single pull."""
        slots = int(self._config.capabilities.get("slots", 1))
        size = slots - self._executor.slots_taken()
        if self._options.once:
            size = 1
        if self._options.max_offers is not None:
            size = min(size, self._options.max_offers - self._accepted)
        return max(1, size)

    def _after_settled(self, result: StepResult, session: SessionInfo) -> None:
        self._executor.sync()  # the offer just admitted (or replayed)
        done = (
            self._options.once
            or (self._options.exit_when_idle
                and result.outcome in (ClaimOutcome.IDLE, ClaimOutcome.INBOX_FULL))
            or (self._options.max_offers is not None and self._accepted >= self._options.max_offers)
        )  # fmt: skip
        if done:
            self._stop.request("done")
            return
        if (self._resumed_stale and self._session is session
                and self._executor.tracked() == 0
                and (self._keeper is None
                     or not self._keeper.holds_session(session.session_id,
                                                       session.generation))):  # fmt: skip
            # The resumed session carries the previous run's capabilities; now that
            # its claim settled, open one with the configured capabilities (not while
            # the executor holds leases: a new session would fence them off).
            self._resumed_stale = False
            self._events.info("session.capabilities_changed", **session.log_fields())
            self._session = None

    def _on_not_due(self, result: StepResult, now: int) -> None:
        self._next_pull_ms = result.next_attempt_at_ms or now

    def _on_idle(self, result: StepResult, now: int) -> None:
        self._step_failures = 0
        cadence = self._config.cadence
        base = max(result.next_attempt_at_ms or now, now + cadence.idle_poll_ms)
        self._next_pull_ms = base + self._rng.randint(0, cadence.jitter_ms)
        if self._last_outcome is not ClaimOutcome.IDLE:
            # Logged on the transition only: an idle worker polls every few seconds.
            self._events.info("claim.idle", reason=result.reason, offerId=result.offer_id,
                              nextPullInMs=self._next_pull_ms - now)  # fmt: skip
        elif self._faults.trace_idle:
            # QL_WORKER_TRACE_IDLE (the chaos soak): every idle answer, compactly.
            self._events.info("claim.idle", offerId=result.offer_id)

    def _on_inbox_full(self, result: StepResult, now: int) -> None:
        if self._keeper is not None:
            self._keeper.recheck_all()  # entries whose lease died free their place
        cadence = self._config.cadence
        self._next_pull_ms = now + cadence.idle_poll_ms + self._rng.randint(0, cadence.jitter_ms)
        if self._last_outcome is not ClaimOutcome.INBOX_FULL:
            self._events.warning("claim.inbox_full", capacity=self._journal.capacity)

    def _on_accepted(self, result: StepResult, now: int) -> None:
        self._step_failures = 0
        self._next_pull_ms = now
        entries = result.entries or (result.entry,)
        for entry in entries:
            self._accepted += 1
            if self._keeper is not None and entry is not None:
                self._keeper.admitted(entry)  # an older entry of the same run is dead
            candidate = entry.offer.get("candidate", {}) if entry is not None else {}
            self._events.info("claim.accepted",
                              offerId=entry.offer_id if entry is not None else result.offer_id,
                              runId=candidate.get("runId"),
                              attemptId=candidate.get("attemptId"),
                              accepted=self._accepted)  # fmt: skip

    def _on_conflict(self, result: StepResult, now: int) -> None:
        self._events.warning("claim.conflict", offerId=result.offer_id, reason=result.reason)
        self._next_pull_ms = now
        if result.reason == SESSION_DRAINING and self._session is not None:
            self._draining = True
            self._events.warning("session.draining", running=self._executor.tracked(),
                                 **self._session.log_fields())  # fmt: skip
        elif result.reason in SESSION_LOST_REASONS:
            self._lose_session(result.reason or "conflict")

    def _on_failed_claim(self, result: StepResult, now: int) -> None:
        # REJECTED / EXHAUSTED: the intent was moved aside; do not spin on a bad server.
        self._step_failures += 1
        delay = self._backoff_ms(self._step_failures)
        self._next_pull_ms = now + delay
        self._events.error(f"claim.{result.outcome.value}", offerId=result.offer_id,
                           reason=result.reason, retryInMs=delay)  # fmt: skip

    def _on_retry(self, result: StepResult, now: int) -> None:
        self._next_pull_ms = result.next_attempt_at_ms or now
        level = (self._events.error if result.outcome is ClaimOutcome.AUTH_FAILED
                 else self._events.warning)  # fmt: skip
        level("claim.retry", offerId=result.offer_id, reason=result.reason,
              retryInMs=self._next_pull_ms - now)  # fmt: skip

    _HANDLERS: ClassVar[Mapping[ClaimOutcome, Callable[[Runner, StepResult, int], None]]] = {
        ClaimOutcome.NOT_DUE: _on_not_due,
        ClaimOutcome.IDLE: _on_idle,
        ClaimOutcome.INBOX_FULL: _on_inbox_full,
        ClaimOutcome.ACCEPTED: _on_accepted,
        ClaimOutcome.CONFLICT: _on_conflict,
        ClaimOutcome.REJECTED: _on_failed_claim,
        ClaimOutcome.EXHAUSTED: _on_failed_claim,
        ClaimOutcome.RETRY: _on_retry,
        ClaimOutcome.AUTH_FAILED: _on_retry,
    }

    # -- drain -------------------------------------------------------------

    def _drain(self, clean: bool = True) -> None:
        self._events.info("worker.draining", reason=self._stop.reason or "error")
        clean = self._drain_executor(clean)
        session, self._session = self._session, None
        if session is not None and self._executor.leaves_session_open():
            # SPEC §7: the drain itself never releases the inbox's leases.
            self._events.info("session.left_open", reason="inbox_leased",
                              **session.log_fields())  # fmt: skip
        elif session is not None:
            try:
                self._sessions.close(session.session_id, session.generation)
                self._events.info("session.closed", **session.log_fields())
                if clean:
                    with contextlib.suppress(JournalError, LockError, OSError):
                        self._executor.forget_unstarted()
            except SessionError as exc:
                self._events.warning("session.close_failed", reason=exc.reason,
                                     **session.log_fields())  # fmt: skip
        pending = None
        with contextlib.suppress(JournalError, LockError, OSError):
            pending = self._journal.load_pending()
        self._events.info("worker.stopped", reason=self._stop.reason or "error",
                          accepted=self._accepted,
                          pendingOfferId=pending.offer_id if pending else None)  # fmt: skip

    def _drain_executor(self, clean: bool) -> bool:
        """Let commands finish (or stop them), completing their leases; False if the
        journal failed and everything was killed instead."""
        executor = self._executor
        if not clean:
            executor.abort()
            return False
        done = self._stop.reason == "done"
        executor.begin_drain(start_pending=done)
        if not executor.busy():
            return True  # nothing to finish (and no clock read: a worker without commands)
        grace_ms = int(self._config.executor.shutdown_grace_s * 1000)
        shutdown_at = None if done else self._clock() + grace_ms
        give_up_at: int | None = None
        signals = self._stop.requests
        try:
            while executor.busy():
                now = self._clock()
                escalate = self._stop.requests > signals
                if give_up_at is None and (escalate or (shutdown_at and now >= shutdown_at)):
                    self._events.warning("worker.stopping_commands", running=executor.tracked())
                    executor.shutdown()
                    kill_ms = int(self._config.executor.kill_grace_s * 1000)
                    give_up_at = now + kill_ms + DRAIN_COMPLETE_MS
                elif give_up_at is not None and now >= give_up_at:
                    executor.abort()  # completions never got through: leases will expire
                    break
                executor.tick()
                if not executor.busy():
                    break
                if self._session is not None and now >= self._next_heartbeat_ms:
                    self._heartbeat()
                self._stop.nap(self._drain_wake(now, shutdown_at, give_up_at) / 1000,
                               executor.wait_fds())  # fmt: skip
        except (JournalError, LockError, OSError) as exc:
            self._events.error("worker.executor_failed", error=type(exc).__name__)
            executor.abort()
            return False
        return True

    def _drain_wake(self, now: int, shutdown_at: int | None, give_up_at: int | None) -> int:
        # `is not None`: a due time of 0 (e.g. a new log shipper's) means "now".
        times = [t for t in (self._executor.next_due_ms(), shutdown_at, give_up_at)
                 if t is not None]  # fmt: skip
        if self._session is not None:
            times.append(self._next_heartbeat_ms)
        return max(0, min(times, default=now + 1000) - self._clock())


# ---------------------------------------------------------------- wiring


@contextlib.contextmanager
def _signals(stop: StopSignal) -> Iterator[None]:
    """SIGTERM/SIGINT request a drain (main thread only)."""

    def handler(signum: int, _frame: object) -> None:
        # No logging here: see StopSignal (the drain logs the reason).
        stop.request(signal.Signals(signum).name.lower())

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _pull_via(transport: Any) -> PullFn:
    """The coordinator's pull: a batch intent goes to the batch path (its answer
    up to the transport's hard limit, 16 offers), a single one as always."""
    from qinglong.worker.transport import OFFER_RESPONSE_LIMIT, RESPONSE_HARD_LIMIT

    def pull(body: Mapping[str, Any]) -> Any:
        if body.get("schema") == BATCH_PULL_SCHEMA:
            return transport.post_json(PULL_BATCH_PATH, body, response_limit=RESPONSE_HARD_LIMIT)
        return transport.post_json(PULL_PATH, body, response_limit=OFFER_RESPONSE_LIMIT)

    return pull


def _fault_fs(faults: FaultPlan, events: EventLog, stop: StopSignal) -> FileSystem:
    """The journal's file system: the real one, or one that meets the plan's journal points."""

    def announce(action: str, point: str) -> None:
        events.warning(f"fault.{action}", point=point, pid=os.getpid())

    return faults.journal_fs(announce=announce, pause=stop.wait) or REAL_FS


def _open_journal(config: WorkerConfig, fs: FileSystem = REAL_FS) -> Journal:
    parent = os.path.dirname(os.path.abspath(config.journal))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    return Journal.open(
        config.journal, capacity=config.inbox_capacity, stale_ms=config.lock_stale_ms, fs=fs
    )


def _transport(config: WorkerConfig) -> Any:
    from qinglong.worker.errors import CredentialError
    from qinglong.worker.transport import FileCredentialProvider, HttpsTransport, build_ssl_context

    provider = FileCredentialProvider(
        config.cert_file, config.key_file, config.ca_file, config.credential_file
    )
    try:
        build_ssl_context(provider.credentials())  # fail fast on unusable material
    except CredentialError as exc:
        raise ConfigError("credentials_unusable", str(exc)) from None
    return HttpsTransport(config.ingress_url, provider, timeout_s=config.request_timeout_s)


def run_worker(
    config: WorkerConfig,
    options: RunOptions,
    *,
    events: EventLog,
    faults: FaultPlan = NO_FAULTS,
) -> ExitCode:
    """Run until drained or a fatal error; never raises for expected failures."""
    stop = StopSignal()
    events.info("worker.starting", pid=os.getpid(), faults=faults.active or None,
                **describe(config))  # fmt: skip
    with contextlib.closing(stop), _signals(stop):
        try:
            transport = _transport(config)
        except ConfigError as exc:
            return _fail(events, "config_error", exc.reason, exc.detail, ExitCode.CONFIG)
        try:
            journal = _open_journal(config, _fault_fs(faults, events, stop))
        except LockHeld as exc:
            return _fail(events, "journal_locked", "lock_held", str(exc), ExitCode.FAILURE)
        except (JournalError, LockError, OSError) as exc:
            return _fail(events, "journal_unusable", type(exc).__name__, str(exc),
                         ExitCode.FAILURE)  # fmt: skip
        try:
            return _run(config, options, journal, transport, stop, events, faults)
        finally:
            transport.close()
            journal.close()


def _run(
    config: WorkerConfig,
    options: RunOptions,
    journal: Journal,
    transport: Any,
    stop: StopSignal,
    events: EventLog,
    faults: FaultPlan,
) -> ExitCode:
    def post(path: str, body: Mapping[str, Any], limit: int) -> Any:
        return transport.post_json(path, body, response_limit=limit)

    try:
        executor = _executor(config, journal, post, events)
    except OSError as exc:
        return _fail(events, "config_error", "work_dir_unusable", str(exc), ExitCode.CONFIG)
    keeper = None if config.execute else _keeper(config, journal, post, events)
    runner = Runner(
        config,
        journal,
        SessionClient(post, config.worker_id),
        _pull_via(transport),
        events=events,
        stop=stop,
        options=options,
        faults=faults,
        executor=executor,
        keeper=keeper,
        rotator=_rotator(config, post),
    )
    try:
        return runner.run()
    except ConfigError as exc:
        return _fail(events, "config_error", exc.reason, exc.detail, ExitCode.CONFIG)
    except (JournalError, LockError, OSError) as exc:
        # Fail closed: a journal we cannot trust must not admit anything more.
        return _fail(events, "journal_failed", type(exc).__name__, str(exc), ExitCode.FAILURE)


def _rotator(config: WorkerConfig, post: Callable[..., Any]) -> CredentialRotator:
    from qinglong.worker.transport import read_credential_file

    return CredentialRotator(
        config.credential_file,
        config.worker_id,
        post,
        read_token=lambda: read_credential_file(config.credential_file),
    )


def _executor(
    config: WorkerConfig, journal: Journal, post: Callable[..., Any], events: EventLog
) -> Executor:
    if not config.execute:
        return NoExecution(journal)
    # Loaded only now: a worker that does not execute never imports process code.
    from qinglong.worker.lease_client import LeaseClient
    from qinglong.worker.lifecycle import Lifecycle
    from qinglong.worker.log_shipper import LogClient
    from qinglong.worker.trust import RevisionTrust

    # SPEC §16.1: `worker run` loaded the keys at start (exit 2 when unusable).
    trust = config.trust.verifier or RevisionTrust.load(config.trust)
    events.info("worker.trust", policy=trust.policy.value, keysFile=config.trust.keys_file,
                kids=list(trust.kids))  # fmt: skip
    return Lifecycle(
        journal,
        LeaseClient(post),
        slots=int(config.capabilities.get("slots", 1)),
        settings=config.executor,
        work_dir=config.work_dir,
        events=events,
        logs=LogClient(post),
        trust=trust,
    )


def _keeper(
    config: WorkerConfig, journal: Journal, post: Callable[..., Any], events: EventLog
) -> InboxKeeper:
    from qinglong.worker.inbox_keeper import InboxKeeper
    from qinglong.worker.lease_client import LeaseClient

    return InboxKeeper(journal, LeaseClient(post), worker_id=config.worker_id, events=events)


def _fail(events: EventLog, error: str, reason: str, detail: str, code: ExitCode) -> ExitCode:
    events.error("worker.failed", error=error, reason=reason, detail=detail[:500])
    return code
