"""Spawn and supervise one ``qinglong/command@v1`` process (SPEC §7 opt-in executor).

Nothing here talks to the network; :mod:`worker.lifecycle` drives the lease.

Decisions:

* **No shell.** ``argv`` is executed as is (``subprocess.Popen(argv)``); a ``;``
  or ``$(…)`` in an argument is literal text.
* **Environment.** Exactly the spec's ``env``; nothing of the worker's own
  environment (credentials, proxies, tokens) is inherited. When the spec sets no
  ``PATH``, a fixed minimal one (:data:`DEFAULT_PATH`) is added so that plain
  command names (``sh``, ``python3``) resolve; it is the only addition.
* **Working directory.** The spec's ``cwd`` (a relative one is taken relative to
  the offer's scratch directory), else the offer's own empty scratch directory
  ``WORK/<offerId>/scratch``.
* **Isolation.** ``start_new_session=True``: the command leads its own session
  and process group, so every signal goes to the whole group (grandchildren
  included) and a terminal's ^C never reaches it. stdin is ``/dev/null``.
* **Output.** stdout and stderr share one pipe; a pump thread copies the first
  ``output_limit`` bytes to ``WORK/<offerId>/output.log`` (0600) and then drains
  and drops the rest, so a chatty command neither blocks nor fills the disk.
  The same thread keeps the *last* :data:`TAIL_BYTES` in a ring buffer and
  counts every byte (:class:`OutputTail`): that tail, the exit code and the
  duration are the run's result (SPEC §9.3, :meth:`Process.result`), so memory
  stays bounded however much the command prints.
* **Group lifetime.** When the leader exits, whatever is left of its group is
  killed: a run's processes never outlive the run. The leader is detected with
  ``waitid(WNOWAIT)`` *before* it is reaped, so the group id cannot have been
  reused when we signal it.
* **Stopping.** :meth:`Process.terminate` sends SIGTERM to the group and SIGKILL
  once ``kill_grace_s`` passed (checked by :meth:`Process.poll`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
OUTPUT_NAME = "output.log"
SCRATCH_NAME = "scratch"
_PUMP_CHUNK = 64 * 1024
# SPEC §9.3: outputTail is the last <= 8 KiB (UTF-8) of the combined output.
TAIL_BYTES = 8 * 1024
# ... and, JSON-escaped, at most this much: control characters escape to 6
# bytes each, and the stored result object (about 12 KiB at most) and the
# complete request (16 KiB at most) must still fit.
TAIL_JSON_BUDGET = 11 * 1024

__all__ = [
    "DEFAULT_PATH",
    "CommandSpec",
    "ExitStatus",
    "OutputTail",
    "Process",
    "SpawnFailed",
    "StopReason",
    "kill_orphan_group",
    "output_tail_text",
    "process_start_ticks",
    "spawn",
]


class SpawnFailed(Exception):
    """The command could not be started; ``reason`` is a low-cardinality code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StopReason(StrEnum):
    """Why the worker stopped a process (None: it exited on its own)."""

    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    SHUTDOWN = "worker_shutdown"
    LEASE_LOST = "lease_lost"


@dataclass(frozen=True)
class CommandSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None
    timeout_s: int

    @classmethod
    def from_revision(cls, spec: Mapping[str, Any]) -> CommandSpec:
        # Validated against qinglong/command@v1 when the offer was admitted.
        return cls(
            argv=tuple(spec["argv"]),
            env=dict(spec.get("env") or {}),
            cwd=spec.get("cwd"),
            timeout_s=int(spec["timeoutS"]),
        )

    def child_env(self) -> dict[str, str]:
        env = dict(self.env)
        env.setdefault("PATH", DEFAULT_PATH)
        return env


@dataclass(frozen=True)
class ExitStatus:
    returncode: int  # Popen convention: negative = killed by that signal
    stopped_by: StopReason | None

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None


_SPAWN_REASONS = {
    errno.ENOENT: "executable_not_found",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.ENOEXEC: "exec_format_error",
    errno.ENOTDIR: "executable_not_found",
    errno.E2BIG: "argument_list_too_long",
    errno.ENOMEM: "out_of_memory",
    errno.EAGAIN: "process_limit",
}


def _resolve_cwd(spec: CommandSpec, scratch: str) -> str:
    if spec.cwd is None:
        return scratch
    return os.path.normpath(os.path.join(scratch, spec.cwd))


def spawn(spec: CommandSpec, work_dir: str, *, output_limit: int) -> Process:
    """Start ``spec`` in its own process group; raise :class:`SpawnFailed` if it cannot."""
    scratch = os.path.join(work_dir, SCRATCH_NAME)
    try:
        os.makedirs(scratch, mode=0o700, exist_ok=True)
        log = _open_log(os.path.join(work_dir, OUTPUT_NAME))
    except OSError:
        raise SpawnFailed("work_dir_unusable") from None
    cwd = _resolve_cwd(spec, scratch)
    if not os.path.isdir(cwd):
        log.close()
        raise SpawnFailed("cwd_not_found")
    try:
        # argv as a list and no shell: `;`, `$(…)` or globs in an argument are literal.
        popen = subprocess.Popen(
            list(spec.argv),
            env=spec.child_env(),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        log.close()
        raise SpawnFailed(_SPAWN_REASONS.get(exc.errno or 0, "spawn_failed")) from None
    except (ValueError, TypeError):
        log.close()
        raise SpawnFailed("invalid_argv") from None
    return Process(popen, log, output_limit, deadline=time.monotonic() + spec.timeout_s)


def _open_log(path: str) -> IO[bytes]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "wb", buffering=0)


class OutputTail:
    """The last ``capacity`` bytes of a stream and the count of all of them.

    Fed by the pump thread, read once the pump is done (or while it runs: the
    lock keeps each snapshot whole). Memory: ``capacity`` plus one chunk."""

    def __init__(self, capacity: int = TAIL_BYTES) -> None:
        self.capacity = capacity
        self._buf = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self._total += len(chunk)
            if len(chunk) >= self.capacity:
                self._buf[:] = chunk[-self.capacity :]
                return
            self._buf += chunk
            excess = len(self._buf) - self.capacity
            if excess > 0:
                del self._buf[:excess]

    def snapshot(self) -> tuple[bytes, int]:
        """(the kept tail, the total byte count)."""
        with self._lock:
            return bytes(self._buf), self._total

    def text(self) -> str:
        data, total = self.snapshot()
        return output_tail_text(data, cut=total > len(data))


def output_tail_text(data: bytes, *, cut: bool = False) -> str:
    """The tail as text: UTF-8, invalid bytes replaced, NUL replaced (jsonb refuses
    it), at most TAIL_BYTES encoded and TAIL_JSON_BUDGET JSON-escaped, cut on a
    character boundary from the front. ``cut``: ``data`` starts mid-stream."""
    if cut:
        # The ring buffer may start inside a character: drop its continuation bytes.
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        data = data[skip:]
    text = data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    size = escaped = 0
    start = len(text)
    while start > 0:
        char = text[start - 1]
        size += len(char.encode("utf-8"))
        escaped += _escaped_len(char)
        if size > TAIL_BYTES or escaped > TAIL_JSON_BUDGET:
            break
        start -= 1
    return text[start:]


def _escaped_len(char: str) -> int:
    """Bytes of ``char`` inside a JSON string (json.dumps ensure_ascii=False, and
    PostgreSQL's jsonb text output, escape the same characters)."""
    if char in '"\\\b\f\n\r\t':
        return 2
    if char < " ":
        return 6
    return len(char.encode("utf-8"))


def _pump(source: IO[bytes], sink: IO[bytes], limit: int, tail: OutputTail) -> None:
    """Copy the head of the output, keep the tail, and keep draining so the
    child never blocks (a failing log file only stops the copy)."""
    head: _Head | None = _Head(sink, limit) if limit > 0 else None
    try:
        while chunk := source.read1(_PUMP_CHUNK):  # type: ignore[attr-defined]
            tail.feed(chunk)
            if head is not None and not head.write(chunk):
                head = None
    except (OSError, ValueError):
        pass  # a closed pipe must not take the worker down
    finally:
        with contextlib.suppress(OSError):
            sink.close()
        with contextlib.suppress(OSError):
            source.close()


@dataclass
class _Head:
    """The first ``limit`` bytes of the output, written to ``output.log``."""

    sink: IO[bytes]
    limit: int
    written: int = 0

    def write(self, chunk: bytes) -> bool:
        """False once nothing more is wanted (limit reached, or the disk failed)."""
        try:
            part = chunk[: self.limit - self.written]
            self.sink.write(part)
            self.written += len(part)
            if self.written >= self.limit:
                self.sink.write(
                    f"\n[qinglong: output truncated after {self.limit} bytes]\n".encode()
                )
                return False
        except (OSError, ValueError):
            return False  # a full disk or closed file must not take the worker down
        return True


@dataclass
class Process:
    """A running command: its group, its deadline, its output pump."""

    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    output_limit: int
    deadline: float  # time.monotonic() of the spec's timeoutS
    stopped_by: StopReason | None = None
    kill_at: float | None = None
    status: ExitStatus | None = None
    pidfd: int | None = None
    start_ticks: int | None = None
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None  # monotonic, when the leader was reaped
    tail: OutputTail = field(default_factory=OutputTail, repr=False)
    _pump: threading.Thread | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        assert self.popen.stdout is not None
        self._pump = threading.Thread(
            target=_pump, args=(self.popen.stdout, self.log, self.output_limit, self.tail),
            name=f"output-{self.pid}", daemon=True,
        )  # fmt: skip
        self._pump.start()
        with contextlib.suppress(OSError, AttributeError):
            # Readable once the process exits: lets the run loop sleep until then.
            self.pidfd = os.pidfd_open(self.pid)
        self.start_ticks = process_start_ticks(self.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def timed_out(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.deadline

    def terminate(self, reason: StopReason, kill_grace_s: float) -> None:
        """SIGTERM the group now, SIGKILL after ``kill_grace_s`` (first reason wins)."""
        if self.status is not None or self.stopped_by is not None:
            return
        self.stopped_by = reason
        self.kill_at = time.monotonic() + kill_grace_s
        self._signal_group(signal.SIGTERM)

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)

    def poll(self) -> ExitStatus | None:
        """Non-blocking: escalate a due SIGKILL, reap the leader, sweep its group."""
        if self.status is not None:
            return self.status
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.kill_at = None
            self._signal_group(signal.SIGKILL)
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None if self.popen.poll() is None else True  # reaped elsewhere
        if info is None:
            return None
        # The leader is a zombie, so its group id is still pinned: no reuse race.
        self._signal_group(signal.SIGKILL)
        returncode = self.popen.wait()
        self.ended_at = time.monotonic()
        self._close_pidfd()
        self.status = ExitStatus(returncode, self.stopped_by)
        return self.status

    def result(self) -> dict[str, Any]:
        """`result` of the complete request (SPEC §9.3); call after join_output().

        ``exitCode`` is the leader's return code (Popen convention: negative =
        the signal that killed it), absent while it has not been reaped."""
        end = time.monotonic() if self.ended_at is None else self.ended_at
        data, total = self.tail.snapshot()
        doc: dict[str, Any] = {}
        if self.status is not None:
            doc["exitCode"] = self.status.returncode
        doc.update(durationMs=max(0, int((end - self.started_at) * 1000)),
                   outputTail=output_tail_text(data, cut=total > len(data)),
                   outputBytes=total)  # fmt: skip
        return doc

    def next_check_at(self) -> float | None:
        """The next monotonic instant poll() must run (deadline or SIGKILL escalation)."""
        if self.status is not None:
            return None
        if self.kill_at is not None:
            return self.kill_at
        return self.deadline if self.stopped_by is None else None

    def join_output(self, timeout: float = 2.0) -> None:
        if self._pump is not None:
            self._pump.join(timeout)

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def _close_pidfd(self) -> None:
        fd, self.pidfd = self.pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Last resort (worker failing closed): kill the group, reap, release fds."""
        if self.status is None:
            self.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)
        self._close_pidfd()


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: identifies a process beyond its (reusable) pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    try:
        # The command name (field 2) may hold spaces or ')'; fields follow the last ')'.
        fields = data[data.rindex(b")") + 2 :].split()
        return int(fields[19])
    except (ValueError, IndexError):
        return None


def kill_orphan_group(pid: int, start_ticks: int | None) -> bool:
    """SIGKILL the group a dead predecessor left running, if it is provably the same.

    After a worker restart its commands are no longer our children: we cannot
    reap them or learn their exit code. A group leader still alive with the same
    start time is that command (a recycled pid has another start time); its
    group is killed so it cannot race the retry the server is about to schedule.
    """
    if start_ticks is None or process_start_ticks(pid) != start_ticks:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
        return True
    return False
