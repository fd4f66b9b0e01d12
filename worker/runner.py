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
Accepted offers stay in the inbox; nothing here executes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from worker.backoff import DEFAULT_POLICY, BackoffPolicy
from worker.config import ConfigError, WorkerConfig, capabilities_digest, describe
from worker.coordinator import (
    AUTH_MIN_DELAY_MS,
    ClaimCoordinator,
    ClaimOutcome,
    PullFn,
    StepResult,
)
from worker.eventlog import EventLog, LoggingBridge
from worker.faults import FaultPlan, FaultPoint
from worker.journal import Journal, JournalError
from worker.owner_lock import Clock, LockError, LockHeld, wall_clock_ms
from worker.session import (
    AuthRefused,
    IngressUnavailable,
    RequestRefused,
    SessionClient,
    SessionError,
    SessionInfo,
    SessionLost,
)

PULL_PATH = "/v1/offers/pull"
# 409 reasons that mean "this session is unusable": open a new one.
SESSION_LOST_REASONS = frozenset({
    "session_replaced", "session_expired", "session_not_found", "session_closed",
    "capabilities_mismatch",
})  # fmt: skip
# Outcomes after which no claim is pending (the claim settled one way or another).
SETTLED = frozenset({
    ClaimOutcome.IDLE, ClaimOutcome.ACCEPTED, ClaimOutcome.CONFLICT, ClaimOutcome.REJECTED,
    ClaimOutcome.EXHAUSTED, ClaimOutcome.INBOX_FULL,
})  # fmt: skip
# Backoff index cap for unbounded retry loops (session open, heartbeat): 60 s max.
_MAX_BACKOFF_INDEX = 15

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

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._requested = True
        with contextlib.suppress(OSError):  # full pipe or closed: the flag is what counts
            os.write(self._write_fd, b"x")

    @property
    def requested(self) -> bool:
        return self._requested

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if a stop was requested (before or meanwhile)."""
        if not self._requested:
            select.select([self._read_fd], [], [], max(0.0, seconds))
        return self._requested

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
    ) -> None:
        self._config = config
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
            journal, pull, clock=clock, rng=self._rng, policy=policy, checkpoint=self._checkpoint
        )
        self._caps_digest = capabilities_digest(config.capabilities)
        self._session: SessionInfo | None = None
        self._next_heartbeat_ms = 0
        self._next_pull_ms = 0
        self._heartbeat_failures = 0
        self._step_failures = 0
        self._accepted = 0
        self._resumed_stale = False
        self._last_outcome: ClaimOutcome | None = None

    @property
    def accepted(self) -> int:
        return self._accepted

    # -- main loop ---------------------------------------------------------

    def run(self) -> ExitCode:
        try:
            self._loop()
        except DrainRequested:
            pass  # the claim stays pending; drain below
        finally:
            self._drain()
        return ExitCode.OK

    def _loop(self) -> None:
        while not self._stop.requested:
            if self._session is None:
                self._establish()
                continue
            now = self._clock()
            if now >= self._next_heartbeat_ms:
                self._heartbeat()
            elif now >= self._next_pull_ms:
                self._pull()
            else:
                wake = min(self._next_heartbeat_ms, self._next_pull_ms)
                self._stop.wait((wake - now) / 1000)

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
            now = self._clock()
            self._next_heartbeat_ms = now + self._session.heartbeat_interval_ms
            self._next_pull_ms = now
            self._heartbeat_failures = 0
            return

    def _wait_after_session_error(self, event: str, exc: SessionError, failures: int) -> None:
        delay = max(self._backoff_ms(failures), exc.retry_after_ms or 0)
        if isinstance(exc, AuthRefused):
            # Needs an operator; loud, slow, never with the credential itself.
            delay = max(delay, AUTH_MIN_DELAY_MS)
            self._events.error(event, reason=exc.reason, auth=True, retryInMs=delay)
        else:
            self._events.warning(event, reason=exc.reason, retryInMs=delay)
        self._stop.wait(delay / 1000)

    def _resume(self) -> SessionInfo | None:
        """Heartbeat the session named by a pending claim; None if there is none to resume."""
        pending = self._journal.load_pending()
        if pending is None:
            return None
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

    def _lose_session(self, reason: str) -> None:
        session = self._session
        fields = session.log_fields() if session is not None else {}
        self._events.warning("session.lost", reason=reason, **fields)
        self._session = None

    # -- claims ------------------------------------------------------------

    def _pull(self) -> None:
        session = self._session
        assert session is not None
        result = self._coordinator.step(session.fence())
        now = self._clock()
        handler = self._HANDLERS[result.outcome]
        handler(self, result, now)
        self._last_outcome = result.outcome
        if result.outcome in SETTLED:
            self._after_settled(result, session)

    def _after_settled(self, result: StepResult, session: SessionInfo) -> None:
        done = (
            self._options.once
            or (self._options.exit_when_idle
                and result.outcome in (ClaimOutcome.IDLE, ClaimOutcome.INBOX_FULL))
            or (self._options.max_offers is not None and self._accepted >= self._options.max_offers)
        )  # fmt: skip
        if done:
            self._stop.request("done")
            return
        if self._resumed_stale and self._session is session:
            # The resumed session carries the previous run's capabilities; now that
            # its claim settled, open one with the configured capabilities.
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

    def _on_inbox_full(self, result: StepResult, now: int) -> None:
        cadence = self._config.cadence
        self._next_pull_ms = now + cadence.idle_poll_ms + self._rng.randint(0, cadence.jitter_ms)
        if self._last_outcome is not ClaimOutcome.INBOX_FULL:
            self._events.warning("claim.inbox_full", capacity=self._journal.capacity)

    def _on_accepted(self, result: StepResult, now: int) -> None:
        self._step_failures = 0
        self._accepted += 1
        self._next_pull_ms = now
        entry = self._journal.get(result.offer_id) if result.offer_id else None
        candidate = entry.offer.get("candidate", {}) if entry is not None else {}
        self._events.info("claim.accepted", offerId=result.offer_id,
                          runId=candidate.get("runId"), attemptId=candidate.get("attemptId"),
                          accepted=self._accepted)  # fmt: skip

    def _on_conflict(self, result: StepResult, now: int) -> None:
        self._events.warning("claim.conflict", offerId=result.offer_id, reason=result.reason)
        self._next_pull_ms = now
        if result.reason in SESSION_LOST_REASONS:
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

    def _drain(self) -> None:
        self._events.info("worker.draining", reason=self._stop.reason or "error")
        session, self._session = self._session, None
        if session is not None:
            try:
                self._sessions.close(session.session_id, session.generation)
                self._events.info("session.closed", **session.log_fields())
            except SessionError as exc:
                self._events.warning("session.close_failed", reason=exc.reason,
                                     **session.log_fields())  # fmt: skip
        pending = None
        with contextlib.suppress(JournalError, LockError, OSError):
            pending = self._journal.load_pending()
        self._events.info("worker.stopped", reason=self._stop.reason or "error",
                          accepted=self._accepted,
                          pendingOfferId=pending.offer_id if pending else None)  # fmt: skip


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


@contextlib.contextmanager
def _log_bridge(events: EventLog) -> Iterator[None]:
    logger = logging.getLogger("qinglong.worker")
    bridge = LoggingBridge(events)
    logger.addHandler(bridge)
    old_propagate, old_level = logger.propagate, logger.level
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(bridge)
        logger.propagate, logger.level = old_propagate, old_level


def _open_journal(config: WorkerConfig) -> Journal:
    parent = os.path.dirname(os.path.abspath(config.journal))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    return Journal.open(
        config.journal, capacity=config.inbox_capacity, stale_ms=config.lock_stale_ms
    )


def _transport(config: WorkerConfig) -> Any:
    from worker.errors import CredentialError
    from worker.transport import FileCredentialProvider, HttpsTransport, build_ssl_context

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
    with contextlib.closing(stop), _signals(stop), _log_bridge(events):
        try:
            transport = _transport(config)
        except ConfigError as exc:
            return _fail(events, "config_error", exc.reason, exc.detail, ExitCode.CONFIG)
        try:
            journal = _open_journal(config)
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

    runner = Runner(
        config,
        journal,
        SessionClient(post, config.worker_id),
        lambda body: transport.post_json(PULL_PATH, body),
        events=events,
        stop=stop,
        options=options,
        faults=faults,
    )
    try:
        return runner.run()
    except ConfigError as exc:
        return _fail(events, "config_error", exc.reason, exc.detail, ExitCode.CONFIG)
    except (JournalError, LockError, OSError) as exc:
        # Fail closed: a journal we cannot trust must not admit anything more.
        return _fail(events, "journal_failed", type(exc).__name__, str(exc), ExitCode.FAILURE)


def _fail(events: EventLog, error: str, reason: str, detail: str, code: ExitCode) -> ExitCode:
    events.error("worker.failed", error=error, reason=reason, detail=detail[:500])
    return code
