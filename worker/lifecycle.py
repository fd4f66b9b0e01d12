"""The opt-in executor: drive each accepted offer through its lease (SPEC §7).

Loaded only with ``--execute`` / ``execute: true`` (R-LAY-1); the run loop sees
it through :class:`qinglong.worker.executor_port.Executor` (without ``--execute``:
``NoExecution``). The run loop owns the timers; :meth:`Lifecycle.tick` does
whatever is due (at most one lease call per offer per tick) and
:meth:`Lifecycle.next_due_ms` / :meth:`Lifecycle.wait_fds` tell it when to wake
(a pidfd becomes readable when a command exits); :meth:`Lifecycle.wait` is the
loop's idle wait, ending early when a slot was freed.

Per offer (a :class:`Job`), oldest accepted first, at most ``slots`` started::

    START        ACK starting -> journal `starting` (+ lease version) -> SPAWN
    SPAWN        (trust check) -> secrets, if the command has any (SPEC §14.3:
                 values in memory only; 409 -> START_FAILED secrets_unavailable,
                 transient -> retried) -> spawn
                 spawn failed  -> START_FAILED
                 spawned       -> journal pid/start ticks -> RUNNING_ACK
    START_FAILED ACK start_failed(reason) -> done
    RUNNING_ACK  ACK running -> journal `running` -> RUNNING
    RUNNING      heartbeat every TTL/3 (TTL = expiresAtMs - updatedAtMs of the
                 last answer); cancelRequested -> SIGTERM group (SIGKILL after
                 killGraceS); timeoutS -> same; on exit -> journal `exited` with
                 the decided completion -> COMPLETE
    COMPLETE     complete(outcome, exitCode, reason, result) -> done

Decisions:

* Lease versions (SPEC §7): every call carries the lease version of the inbox
  entry, i.e. of the last answer received, and every answer (heartbeats
  included) is journaled before anything else, so the entry's version only
  grows and a restart sends the version the server last gave us. A call whose
  answer was lost (transient failure) is repeated, with the same version,
  before any other call of that offer: the server answers it ``idempotent``
  with the current lease (a repeated heartbeat never extends twice), and only
  then may the next change follow at the new version. Without that, a command
  that exits while a heartbeat answer is outstanding would complete at a
  version the server already moved past (409 ``stale_lease_version``). After a
  restart the call that may have been in flight is taken from the entry's
  state (``starting`` with a spawned pid: the running ACK; ``running``: a
  heartbeat) and repeated first the same way; if it never reached the server
  it is simply applied (a harmless extension / the running ACK of a command
  that is then reported ``worker_restarted``).

* The journal records every state *before* the action it enables (``starting``
  before the spawn, ``exited`` + completion before the complete call), so a
  restart never runs a command twice and replays exactly the completion it had
  decided (the server answers an exact replay ``idempotent``).
* Terminal = removed: once a completion / start failure is acknowledged, or on
  any 409 (logged with its category), the inbox entry is deleted and the job
  forgotten, so it can never run again and the inbox stays bounded. A crash
  before the delete converges: the entry replays the same call, which answers
  ``idempotent`` or the same 409. ``WORK/<offerId>/result.json`` keeps a
  diagnostic record next to ``output.log`` (the newest 64 offers are kept).
* A 409 (or 400/413) on any call stops the offer: its process group is killed,
  nothing is completed. A lease whose last confirmation is older than its TTL is
  treated the same way locally (``lease_unconfirmed``): from then on the sweeper
  owns it, and the command must not race the retry.
* Result (SPEC §9.3): every completion of a command that ran carries
  ``result`` = {exitCode (the leader's return code), durationMs, outputTail
  (the last <= 8 KiB of its output), outputBytes}, decided with the completion
  and journaled with it, so a replay after a restart sends the same bytes. A
  restart that could not re-attach its command has no result to send (with
  the live log: the one read from its output.log, below).
* Live log (SPEC §15, worker/log_shipper.py, with a log client): a RUNNING
  job ships its output.log in a tick without a lease call (never while a
  call's answer is outstanding: the version fences the log call too); COMPLETE
  first ships the rest (bounded), then completes; ``logBytes`` is decided
  with the completion. A recovered job ships from the server's offset before
  its completion.
* Restart: ``starting``/``running`` entries cannot be re-attached; a command the
  dead predecessor left running (pid + start ticks still match) has its group
  killed, then the lease is completed ``failed`` reason ``worker_restarted``.
  ``accepted`` entries are started normally (the server decides: a lease that
  expired or whose session was replaced answers 409 -> abandoned). The entry of
  a still-pending claim is left to the coordinator's replay until it settles.
* Shutdown (SIGTERM): no new starts; running commands may finish for
  ``shutdownGraceS``; then they are stopped and completed ``failed`` reason
  ``worker_shutdown`` (so the retry policy reschedules them at once instead of
  after a lease expiry). Unstarted entries are left to the session close.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from qinglong.worker.backoff import DEFAULT_POLICY, BackoffPolicy
from qinglong.worker.config import ExecutorSettings
from qinglong.worker.eventlog import EventLog
from qinglong.worker.executor import (
    OUTPUT_NAME,
    SCRATCH_NAME,
    TAIL_BYTES,
    CommandSpec,
    ExitStatus,
    Process,
    SpawnFailed,
    StopReason,
    kill_orphan_group,
    output_tail_text,
    spawn,
)
from qinglong.worker.executor_port import Waiter
from qinglong.worker.journal import EntryState, EntryTooLarge, InboxEntry, Journal
from qinglong.worker.lease_client import (
    AckPhase,
    LeaseAnswer,
    LeaseClient,
    LeaseConflict,
    LeaseRef,
    LeaseUnavailable,
    Outcome,
)
from qinglong.worker.log_shipper import (
    FLUSH_LIMIT_MS,
    LogClient,
    LogOffset,
    LogRefused,
    LogShipper,
    ShipState,
    log_size,
)
from qinglong.worker.owner_lock import Clock, wall_clock_ms
from qinglong.worker.trust import SIGNATURE_INVALID, RevisionTrust, TrustPolicy

START_RETRY_CAP_MS = 5_000
SECRETS_UNAVAILABLE = "secrets_unavailable"  # start_failed: the secrets fetch got a 409
MIN_HEARTBEAT_MS = 1_000
NO_PIDFD_POLL_MS = 100
WORK_KEEP = 64
RESULT_NAME = "result.json"

__all__ = ["Completion", "Job", "JobPhase", "Lifecycle"]


class JobPhase(StrEnum):
    START = "start"
    SPAWN = "spawn"  # starting ACK journaled: (trust check,) secrets, spawn
    START_FAILED = "start_failed"
    RUNNING_ACK = "running_ack"
    RUNNING = "running"
    COMPLETE = "complete"


@dataclass(frozen=True)
class Completion:
    outcome: Outcome
    exit_code: int | None = None
    reason: str | None = None
    result: dict[str, Any] | None = None  # SPEC §9.3, None when there is none

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "outcome": self.outcome.value,
            "exitCode": self.exit_code,
            "reason": self.reason,
        }
        if self.result is not None:
            doc["result"] = self.result
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Completion:
        result = doc.get("result")
        return cls(Outcome(doc["outcome"]), doc.get("exitCode"), doc.get("reason"),
                   result if isinstance(result, dict) else None)  # fmt: skip

    @classmethod
    def of(cls, status: ExitStatus, result: dict[str, Any] | None = None) -> Completion:
        """What to report for a process that ended (the first stop reason wins)."""
        stopped = status.stopped_by
        if stopped is StopReason.CANCELLED:
            return cls(Outcome.CANCELLED, result=result)
        if stopped is not None:
            return cls(Outcome.FAILED, None, stopped.value, result)
        if status.returncode == 0:
            return cls(Outcome.SUCCEEDED, 0, result=result)
        if status.signal is not None:
            return cls(Outcome.FAILED, status.returncode, "signaled", result)
        return cls(Outcome.FAILED, status.returncode, "exit_nonzero", result)


RESTARTED = Completion(Outcome.FAILED, None, "worker_restarted")


@dataclass
class Job:
    entry: InboxEntry
    ref: LeaseRef
    phase: JobPhase
    due_ms: int = 0  # next lease call
    failures: int = 0
    ttl_ms: int | None = None
    confirmed_until_ms: int | None = None  # send time of the last ok call + TTL
    process: Process | None = None
    start_failure: str | None = None
    completion: Completion | None = None
    # The call whose answer was lost (transient failure): repeated, at the same
    # lease version, before any other call of this offer.
    unanswered: JobPhase | None = None
    log: LogShipper | None = None  # the live log (SPEC §15), with a log client

    @property
    def version(self) -> int:
        """The lease version last received (journaled): sent with every call."""
        return self.entry.lease_version

    @property
    def offer_id(self) -> str:
        return self.entry.offer_id

    @property
    def started(self) -> bool:
        return self.phase is not JobPhase.START

    def fields(self) -> dict[str, Any]:
        candidate = self.entry.offer.get("candidate", {})
        return {"offerId": self.offer_id, "runId": candidate.get("runId"),
                "attemptId": candidate.get("attemptId")}  # fmt: skip


class Lifecycle:
    def __init__(
        self,
        journal: Journal,
        leases: LeaseClient,
        *,
        slots: int,
        settings: ExecutorSettings,
        work_dir: str,
        events: EventLog,
        clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
        policy: BackoffPolicy = DEFAULT_POLICY,
        logs: LogClient | None = None,
        trust: RevisionTrust | None = None,
    ) -> None:
        self._journal = journal
        # SPEC §16.1: None = the default policy (warn) without keys.
        self._trust = trust or RevisionTrust(TrustPolicy.WARN, None)
        self._leases = leases
        self._logs = logs  # None: no live log is shipped
        self._slots = slots
        self._settings = settings
        self._work_dir = os.path.abspath(work_dir)
        self._events = events
        self._clock = clock
        self._rng = rng or random.SystemRandom()
        self._policy = policy
        # The run loop's hook: a freed slot means "pull now".
        self.on_slot_freed: Callable[[], None] | None = None
        self._slot_freed = False  # since the current wait began: end it early
        self._jobs: dict[str, Job] = {}
        self._draining = False
        self._start_pending = True
        _private_dir(self._work_dir)

    # -- what the run loop asks ---------------------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        return self._jobs

    def wants_offers(self) -> bool:
        return not self._draining and len(self._jobs) < self._slots

    def slots_taken(self) -> int:
        return len(self._jobs)

    def tracked(self) -> int:
        return len(self._jobs)

    def busy(self) -> bool:
        """Anything left to do (unstarted entries count only while they may start)."""
        return any(j.started or self._start_pending for j in self._jobs.values())

    def sessions(self) -> list[tuple[str, int]]:
        """Sessions our inbox leases belong to, newest generation first."""
        seen = {(j.ref.session_id, j.ref.generation) for j in self._jobs.values()}
        return sorted(seen, key=lambda s: s[1], reverse=True)

    def wait_fds(self) -> list[int]:
        return [j.process.pidfd for j in self._jobs.values()
                if j.process is not None and j.process.pidfd is not None]  # fmt: skip

    def wait(self, stop: Waiter, seconds: float) -> bool:
        """Wait up to ``seconds``, doing due work meanwhile (waking when a lease
        call is due or a command exits); return early when a slot was freed.
        True if a stop was requested."""
        end = self._clock() + int(seconds * 1000)
        self._slot_freed = False
        while not stop.requested and not self._slot_freed:
            self.tick()
            now = self._clock()
            if now >= end or self._slot_freed:
                break
            due = self.next_due_ms()
            wake = end if due is None else max(min(end, due), now)
            stop.wait((wake - now) / 1000, self.wait_fds())
        return stop.requested

    def next_due_ms(self) -> int | None:
        now = self._clock()
        mono = time.monotonic()
        times: list[int] = []
        for job in self._jobs.values():
            if job.phase is not JobPhase.START or self._may_start():
                times.append(job.due_ms)
            if job.confirmed_until_ms is not None:
                times.append(job.confirmed_until_ms)
            log_due = self._log_due_ms(job)
            if log_due is not None:
                times.append(log_due)
            process = job.process
            if process is not None and process.status is None:
                at = process.next_check_at()
                if at is not None:
                    times.append(now + max(0, int((at - mono) * 1000)) + 1)
                if process.pidfd is None:
                    times.append(now + NO_PIDFD_POLL_MS)
        return min(times) if times else None

    # -- admission ------------------------------------------------------------

    def sync(self) -> int:
        """Track inbox entries not tracked yet (start-up and after every settled claim).

        The entries of a pending claim are skipped — every pair of a batch, not
        only its first: the coordinator's replay of those offers must find them
        exactly as admitted (a started one would no longer match its replay)."""
        pending = self._journal.load_pending()
        skip = set(pending.offer_ids()) if pending is not None else set()
        added = 0
        for offer_id in self._journal.offer_ids():
            if offer_id in self._jobs or offer_id in skip:
                continue
            entry = self._journal.get(offer_id)
            if entry is not None:
                self._track(entry)
                added += 1
        return added

    def _track(self, entry: InboxEntry) -> None:
        job = Job(entry, LeaseRef.from_lease(entry.lease), JobPhase.START, due_ms=self._clock())
        self._jobs[job.offer_id] = job
        state = EntryState(entry.state)
        if state is EntryState.ACCEPTED:
            return
        execution = entry.execution or {}
        if state is EntryState.EXITED and isinstance(execution.get("completion"), dict):
            job.completion = Completion.from_doc(execution["completion"])
        else:
            self._adopt_orphan(job, execution)
            job.completion = self._restarted(job)
            # The call the predecessor may have sent without journaling its answer.
            if state is EntryState.RUNNING:
                job.unanswered = JobPhase.RUNNING
            elif state is EntryState.STARTING and isinstance(execution.get("pid"), int):
                job.unanswered = JobPhase.RUNNING_ACK
            self._record(job, EntryState.EXITED, None)
        job.phase = JobPhase.COMPLETE
        if self._logs is not None:
            # Whatever the predecessor shipped, the server says where to go on.
            job.log = LogShipper.for_file(self._log_path(job), known=False, final=True)
        self._events.warning("exec.recovered", state=state.value,
                             outcome=job.completion.outcome.value,
                             reason=job.completion.reason, **job.fields())  # fmt: skip

    def _adopt_orphan(self, job: Job, execution: dict[str, Any]) -> None:
        pid = execution.get("pid")
        if isinstance(pid, int) and kill_orphan_group(pid, execution.get("startTicks")):
            self._events.warning("exec.orphan_killed", pid=pid, **job.fields())

    # -- draining -------------------------------------------------------------

    def begin_drain(self, *, start_pending: bool) -> None:
        """No more offers; ``start_pending``: still run what is already accepted."""
        self._draining = True
        self._start_pending = start_pending

    def shutdown(self) -> None:
        """Stop every running command (completed ``failed`` / ``worker_shutdown``)."""
        self._start_pending = False
        for job in self._jobs.values():
            if job.process is not None:
                job.process.terminate(StopReason.SHUTDOWN, self._settings.kill_grace_s)

    def abort(self) -> None:
        """Fail closed (journal unusable, drain overran): kill everything, report nothing.

        The leases are left to expire; the sweeper then retries the runs."""
        for job in list(self._jobs.values()):
            if job.process is not None:
                job.process.close()
                self._events.error("exec.killed", phase=job.phase.value, **job.fields())
        self._jobs.clear()

    def leaves_session_open(self) -> bool:
        """Never: the session closes once the commands ended (a lease call needs
        it live), releasing the unstarted leases, whose entries are then dropped."""
        return False

    def forget_unstarted(self) -> int:
        """After the session was closed: its unstarted leases were released with it."""
        gone = [j for j in self._jobs.values() if not j.started]
        for job in gone:
            self._abandon(job, "session_closed")
        return len(gone)

    # -- the work -------------------------------------------------------------

    def tick(self) -> None:
        for job in sorted(self._jobs.values(), key=lambda j: (j.entry.accepted_at_ms, j.offer_id)):
            if job.offer_id in self._jobs:
                self._step(job)

    def _may_start(self) -> bool:
        if not self._start_pending:
            return False
        return sum(1 for j in self._jobs.values() if j.started) < self._slots

    def _step(self, job: Job) -> None:
        if job.process is not None:
            self._supervise(job)
        now = self._clock()
        if job.confirmed_until_ms is not None and now >= job.confirmed_until_ms:
            # No confirmation for a whole TTL: the lease is the sweeper's now.
            self._stop_lost(job, "lease_unconfirmed")
            return
        if now < job.due_ms:
            if job.phase is JobPhase.RUNNING:
                self._ship_log(job, now)  # only in a tick without a lease call
            return
        if job.phase is JobPhase.START and not self._may_start():
            return
        if job.unanswered is not None and job.unanswered is not job.phase:
            self._call_replay(job)
            return
        self._CALLS[job.phase](self, job)

    def _supervise(self, job: Job) -> None:
        process = job.process
        assert process is not None
        if process.stopped_by is None and process.timed_out():
            self._events.warning("exec.timeout", pid=process.pid, **job.fields())
            process.terminate(StopReason.TIMEOUT, self._settings.kill_grace_s)
        status = process.poll()
        if status is None or job.phase is JobPhase.COMPLETE:
            return
        if job.phase is JobPhase.RUNNING_ACK:
            return  # the running ACK must land first (complete needs a started lease)
        process.join_output()
        job.completion = Completion.of(status, self._result(job, process.result()))
        self._events.info("exec.exited", returncode=status.returncode,
                          stoppedBy=status.stopped_by, **job.fields())  # fmt: skip
        self._record_exit(job)
        job.phase, job.due_ms, job.failures = JobPhase.COMPLETE, self._clock(), 0

    def _record_exit(self, job: Job) -> None:
        """Journal the decided completion; an entry that would outgrow the
        journal's limit with the output tail keeps the result without it."""
        try:
            self._record(job, EntryState.EXITED, None)
        except EntryTooLarge:
            c = job.completion
            assert c is not None and c.result is not None
            job.completion = dataclasses.replace(c, result=dict(c.result, outputTail=""))
            self._events.warning("exec.output_tail_dropped", **job.fields())
            self._record(job, EntryState.EXITED, None)

    # -- lease calls ----------------------------------------------------------

    def _call_start(self, job: Job) -> None:
        answer = self._lease_call(
            job, JobPhase.START, lambda: self._leases.ack(job.ref, job.version, AckPhase.STARTING)
        )
        if answer is None:
            return
        # Durable before the spawn: a restart must know this lease was started.
        self._record(job, EntryState.STARTING, answer)
        job.phase = JobPhase.SPAWN
        self._call_spawn(job)

    def _call_spawn(self, job: Job) -> None:
        """After the journaled starting ACK, in this order: the revision's trust
        check, the secrets (SPEC §14.3: only a started lease receives them), the
        spawn. Repeated from here after a transient failure of the fetch."""
        spec = CommandSpec.from_revision(job.entry.offer["executionRevision"]["spec"])
        if not self._start_pending:  # shut down while the fetch was retried
            self._fail_start(job, "worker_shutdown")
            return
        # The trust check (SPEC §16.1) before the fetch below: an untrusted
        # revision never receives a secret value, nor runs under enforce.
        if not self._trusted(job):
            return
        secret_env = self._fetch_secrets(job, spec)
        if secret_env is None:
            return
        try:
            limit = self._settings.output_limit_bytes
            process = spawn(
                spec, self._offer_dir(job), output_limit=limit,
                sandbox=self._settings.sandbox, secret_env=secret_env,
            )  # fmt: skip
        except SpawnFailed as exc:
            self._events.warning("exec.start_failed", reason=exc.reason, **job.fields())
            self._fail_start(job, exc.reason)
            return
        job.process = process
        self._record(
            job,
            EntryState.STARTING,
            None,
            execution={"pid": process.pid, "startTicks": process.start_ticks},
        )
        self._events.info("exec.started", pid=process.pid, ttlMs=job.ttl_ms, **job.fields())
        job.phase = JobPhase.RUNNING_ACK
        self._call_running(job)

    def _trusted(self, job: Job) -> bool:
        """SPEC §16.1: the revision's signature under the trust policy; False =
        refused (enforce): ACKed start_failed signature_invalid, nothing runs."""
        verdict = self._trust.check(job.entry.offer["executionRevision"])
        if verdict.ok:
            return True
        finding = {
            "category": verdict.reason,
            "kid": verdict.kid,
            "policy": self._trust.policy.value,
            "trustedKids": list(self._trust.kids),
        }
        if self._trust.refuses(verdict):
            self._events.error("exec.signature_invalid", **finding, **job.fields())
            self._fail_start(job, SIGNATURE_INVALID)
            return False
        self._events.error("exec.signature_unverified", **finding, **job.fields())
        return True

    def _fetch_secrets(self, job: Job, spec: CommandSpec) -> Mapping[str, str] | None:
        """The command's secret values (held in memory only, handed to spawn and
        dropped); None when not now: a 409 fails the start (nothing runs), a
        transient failure retries the fetch. Never journaled, never logged."""
        if not spec.secrets:
            return {}
        try:
            values = self._leases.secrets(job.ref, job.version, spec.secrets.keys())
        except LeaseConflict as exc:
            self._events.warning("exec.start_failed", reason=SECRETS_UNAVAILABLE,
                                 category=exc.reason, **job.fields())  # fmt: skip
            self._fail_start(job, SECRETS_UNAVAILABLE)
            return None
        except LeaseUnavailable as exc:
            self._retry_later(job, exc)
            return None
        self._events.info("exec.secrets_delivered", variables=sorted(values), **job.fields())
        return values

    def _fail_start(self, job: Job, reason: str) -> None:
        job.phase, job.start_failure = JobPhase.START_FAILED, reason
        self._call_start_failed(job)

    def _call_start_failed(self, job: Job) -> None:
        reason = job.start_failure
        answer = self._lease_call(
            job,
            JobPhase.START_FAILED,
            lambda: self._leases.ack(job.ref, job.version, AckPhase.START_FAILED, reason),
        )
        if answer is not None:
            self._finish(job, {"outcome": "start_failed", "reason": reason})

    def _call_running(self, job: Job) -> None:
        answer = self._lease_call(
            job,
            JobPhase.RUNNING_ACK,
            lambda: self._leases.ack(job.ref, job.version, AckPhase.RUNNING),
        )
        if answer is None:
            return
        self._record(job, EntryState.RUNNING, answer)
        job.phase = JobPhase.RUNNING
        self._schedule_heartbeat(job)
        self._supervise(job)  # it may have exited meanwhile

    def _call_heartbeat(self, job: Job) -> None:
        answer = self._lease_call(
            job, JobPhase.RUNNING, lambda: self._leases.heartbeat(job.ref, job.version)
        )
        if answer is None:
            return
        self._record(job, EntryState.RUNNING, answer)
        self._schedule_heartbeat(job)
        process = job.process
        if answer.cancel_requested and process is not None and process.stopped_by is None:
            self._events.info("exec.cancel_requested", pid=process.pid, **job.fields())
            process.terminate(StopReason.CANCELLED, self._settings.kill_grace_s)

    def _call_complete(self, job: Job) -> None:
        c = job.completion
        assert c is not None
        if not self._log_flushed(job):
            return  # the live log first (bounded), then the completion
        answer = self._lease_call(
            job,
            JobPhase.COMPLETE,
            lambda: self._leases.complete(
                job.ref, job.version, c.outcome, c.exit_code, c.reason, c.result
            ),
        )
        if answer is not None:
            self._finish(job, c.to_doc())

    def _call_replay(self, job: Job) -> None:
        """Repeat the call whose answer was lost (same version) before the job's
        next one; journal the lease it answers, keep the entry's state."""
        phase = job.unanswered
        assert phase in (JobPhase.RUNNING, JobPhase.RUNNING_ACK), phase
        if phase is JobPhase.RUNNING:
            answer = self._lease_call(
                job, phase, lambda: self._leases.heartbeat(job.ref, job.version)
            )
        else:
            answer = self._lease_call(
                job, phase, lambda: self._leases.ack(job.ref, job.version, AckPhase.RUNNING)
            )
        if answer is None:
            return
        self._record(job, EntryState(job.entry.state), answer)
        job.due_ms = self._clock()  # the job's own call is due now

    _CALLS: ClassVar[Mapping[JobPhase, Callable[[Lifecycle, Job], None]]] = {
        JobPhase.START: _call_start,
        JobPhase.SPAWN: _call_spawn,
        JobPhase.START_FAILED: _call_start_failed,
        JobPhase.RUNNING_ACK: _call_running,
        JobPhase.RUNNING: _call_heartbeat,
        JobPhase.COMPLETE: _call_complete,
    }

    def _lease_call(
        self, job: Job, kind: JobPhase, call: Callable[[], LeaseAnswer]
    ) -> LeaseAnswer | None:
        """One call (``kind``: the phase whose call it is); None when it did not
        succeed (the job is rescheduled, with ``kind`` to repeat first, or gone)."""
        sent_at = self._clock()
        try:
            answer = call()
        except LeaseConflict as exc:
            job.unanswered = None
            self._stop_lost(job, exc.reason)
            return None
        except LeaseUnavailable as exc:
            job.unanswered = kind
            self._retry_later(job, exc)
            return None
        job.unanswered = None
        job.failures = 0
        if job.started or answer.lease.get("startedAtMs") is not None:
            job.ttl_ms = max(answer.ttl_ms, 0)
            job.confirmed_until_ms = sent_at + job.ttl_ms
        return answer

    def _retry_later(self, job: Job, exc: LeaseUnavailable) -> None:
        job.failures += 1
        cap = START_RETRY_CAP_MS if job.ttl_ms is None else max(job.ttl_ms // 6, 200)
        delay = min(self._policy.delay_ms(min(job.failures - 1, 8), self._rng), cap)
        delay = max(delay, min(exc.retry_after_ms or 0, cap))
        job.due_ms = self._clock() + delay
        level = self._events.error if exc.auth else self._events.warning
        level("exec.lease_retry", phase=job.phase.value, reason=exc.reason,
              retryInMs=delay, **job.fields())  # fmt: skip

    def _schedule_heartbeat(self, job: Job) -> None:
        ttl = job.ttl_ms or 0
        job.due_ms = self._clock() + max(ttl // 3, MIN_HEARTBEAT_MS)

    # -- the live log (SPEC §15) ----------------------------------------------

    def _log_path(self, job: Job) -> str:
        return os.path.join(self._work_dir, job.offer_id, OUTPUT_NAME)

    def _log_of(self, job: Job) -> LogShipper | None:
        """The job's shipper; one for a command this process spawned starts at
        offset 0 (a lease is started once: the server holds no log for it yet)."""
        if job.log is None and self._logs is not None and job.process is not None:
            job.log = LogShipper.for_file(self._log_path(job), known=True)
        return job.log

    def _log_due_ms(self, job: Job) -> int | None:
        # The shipper exists from the spawn on: the run loop sleeps until the
        # next due time, so a shipper made only on a later tick would first be
        # due at the heartbeat (TTL/3) or the exit, not every SEND_INTERVAL_MS.
        log = self._log_of(job)
        if log is None or job.unanswered is not None:
            return None
        if job.phase is JobPhase.RUNNING or (job.phase is JobPhase.COMPLETE and log.active):
            return log.due_ms()
        return None

    def _result(self, job: Job, result: dict[str, Any]) -> dict[str, Any]:
        """The completion's result; with the live log, ``logBytes`` too, and the
        rest of the log is due now (bounded: it must not outlive the lease)."""
        log = self._log_of(job)
        if log is None:
            return result
        log.finish(self._clock(), self._flush_until(job))
        return dict(result, logBytes=log_size(self._log_path(job)))

    def _flush_until(self, job: Job) -> int:
        until = self._clock() + FLUSH_LIMIT_MS
        if job.confirmed_until_ms is not None and job.ttl_ms is not None:
            until = min(until, job.confirmed_until_ms - max(job.ttl_ms // 3, MIN_HEARTBEAT_MS))
        return until

    def _restarted(self, job: Job) -> Completion:
        """``worker_restarted``; with the live log, a result read from the
        predecessor's output.log (its tail, its size, ``logBytes``)."""
        path = self._log_path(job)
        if self._logs is None or not os.path.exists(path):
            return RESTARTED
        started = job.entry.lease.get("startedAtMs")
        duration = max(0, self._clock() - started) if isinstance(started, int) else 0
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - TAIL_BYTES))
                tail = handle.read(TAIL_BYTES)
        except OSError:
            return RESTARTED
        result = {"durationMs": duration, "outputBytes": size,
                  "outputTail": output_tail_text(tail, cut=size > len(tail)),
                  "logBytes": log_size(path)}  # fmt: skip
        return dataclasses.replace(RESTARTED, result=result)

    def _log_flushed(self, job: Job) -> bool:
        """Before the completion: ship what is left (one call per tick), until the
        log is stored to its end, truncated, given up, or its time ran out."""
        log = job.log
        if log is None:
            return True
        now = self._clock()
        if log.flush_until_ms is None:
            log.finish(now, self._flush_until(job))
        if log.flushed(now):
            self._log_ended(job, log)
            return True
        self._ship_log(job, now)
        if log.flushed(self._clock()):
            self._log_ended(job, log)
        due = log.due_ms()
        job.due_ms = self._clock() if due is None else min(due, log.flush_until_ms or due)
        return False

    def _log_ended(self, job: Job, log: LogShipper) -> None:
        if log.state is ShipState.STOPPED:
            self._events.warning("exec.log_incomplete", reason=log.reason,
                                 offset=log.reader.offset, **job.fields())  # fmt: skip

    def _ship_log(self, job: Job, now: int) -> None:
        """One log call if a chunk is due (never while a lease call's answer is
        outstanding: its lease version is the fence of this call too)."""
        log = self._log_of(job)
        if log is None or self._logs is None or job.unanswered is not None:
            return
        if not log.should_send(now):
            return
        offset, chunk = log.next_request()
        try:
            answer = self._logs.send(job.ref, job.version, offset, chunk)
        except LogOffset as exc:
            log.offset_conflict(now, exc.offset)
            self._events.info("exec.log_resumed", offset=exc.offset, sent=offset,
                              **job.fields())  # fmt: skip
        except LeaseConflict as exc:
            self._stop_lost(job, exc.reason)
        except LeaseUnavailable as exc:
            delay = log.unavailable(now, exc)
            level = self._events.error if exc.auth else self._events.warning
            level("exec.log_retry", reason=exc.reason, retryInMs=delay, **job.fields())
        except LogRefused as exc:
            log.refused(exc.reason)
            self._events.warning("exec.log_refused", reason=exc.reason, **job.fields())
        else:
            log.sent(now, offset, chunk, answer)
            if log.state is ShipState.TRUNCATED:
                self._events.info("exec.log_truncated", storedBytes=answer.stored_bytes,
                                  **job.fields())  # fmt: skip

    # -- endings --------------------------------------------------------------

    def _stop_lost(self, job: Job, category: str) -> None:
        if job.process is not None and job.process.status is None:
            job.process.close()  # SIGKILL the group: the lease is not ours any more
        self._abandon(job, category)

    def _abandon(self, job: Job, category: str) -> None:
        self._events.warning("exec.abandoned", category=category, phase=job.phase.value,
                             **job.fields())  # fmt: skip
        self._forget(job, {"outcome": "abandoned", "reason": category})

    def _finish(self, job: Job, result: dict[str, Any]) -> None:
        self._events.info("exec.completed", outcome=result.get("outcome"),
                          exitCode=result.get("exitCode"), reason=result.get("reason"),
                          **job.fields())  # fmt: skip
        self._forget(job, result)

    def _forget(self, job: Job, result: dict[str, Any]) -> None:
        if job.process is not None:
            job.process.close()
        self._write_result(job, result)
        # Terminal: remove the entry so it can never run again (crash before this
        # line: the entry replays the same call and converges here).
        self._journal.remove(job.offer_id)
        del self._jobs[job.offer_id]
        self._prune_work()
        self._slot_freed = True
        if self.on_slot_freed is not None:
            self.on_slot_freed()

    # -- journal + files --------------------------------------------------------

    def _record(
        self,
        job: Job,
        state: EntryState,
        answer: LeaseAnswer | None,
        *,
        execution: dict[str, Any] | None = None,
    ) -> None:
        entry = job.entry
        lease = entry.lease
        # The server's mutable lease fields only (identity and token stay ours); an
        # idempotent replay answering an older projection changes nothing.
        if answer is not None and answer.version >= entry.lease_version:
            lease = dict(lease, **{k: answer.lease[k] for k in _LEASE_UPDATES if k in answer.lease})
        merged = dict(entry.execution or {}, **(execution or {}))
        if job.completion is not None and state is EntryState.EXITED:
            merged["completion"] = job.completion.to_doc()
        updated = dataclasses.replace(entry, lease=lease, state=state.value,
                                      execution=merged or None)  # fmt: skip
        self._journal.advance(updated)
        job.entry = updated

    def _offer_dir(self, job: Job) -> str:
        path = os.path.join(self._work_dir, job.offer_id)
        _private_dir(path)
        return path

    def _write_result(self, job: Job, result: dict[str, Any]) -> None:
        # Diagnostics only (not fsynced): the lease state lives in the database.
        doc = dict(result, **job.fields(), finishedAtMs=self._clock())
        with contextlib.suppress(OSError):
            path = self._offer_dir(job)
            shutil.rmtree(os.path.join(path, SCRATCH_NAME), ignore_errors=True)
            fd = os.open(os.path.join(path, RESULT_NAME),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # fmt: skip
            with os.fdopen(fd, "w") as handle:
                json.dump(doc, handle, sort_keys=True)

    def _prune_work(self) -> None:
        try:
            with os.scandir(self._work_dir) as entries:
                dirs = [e for e in entries if e.is_dir(follow_symlinks=False)
                        and e.name not in self._jobs]  # fmt: skip
            if len(dirs) <= WORK_KEEP:
                return
            dirs.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
            for old in dirs[: len(dirs) - WORK_KEEP]:
                shutil.rmtree(old.path, ignore_errors=True)
        except OSError:
            pass  # housekeeping must never stop the executor


_LEASE_UPDATES = ("leaseVersion", "expiresAtMs", "updatedAtMs", "state", "startedAtMs")


def _private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PermissionError(f"work directory is not ours: {os.path.basename(path)}")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours but too open (umask): tighten, never loosen
