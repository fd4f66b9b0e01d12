"""Spawn and supervise one ``qinglong/command@v1`` process (SPEC §7 opt-in executor).

Nothing here talks to the network; :mod:`worker.lifecycle` drives the lease.

Decisions:

* **No shell.** ``argv`` is executed as is (``execvpe(argv[0], argv, env)``); a ``;``
  or ``$(…)`` in an argument is literal text.
* **Isolation** (SPEC §11, :mod:`worker.process_tree`, :mod:`worker.run_as`).
  Every command runs under its own supervisor process, as the sandbox's run-as
  user when there is one, in a fresh directory ``RUNS/<offerId>`` (0700, owned
  by that user, removed after the run). Whatever it starts — ``setsid()``,
  double forks — is killed when the run ends, times out or is cancelled.
  Without a sandbox (the executor's old call form) the directory is
  ``WORK/<offerId>/scratch`` and the worker's own identity is kept, which a
  worker running as root refuses (``run_as_required``): a task never runs as
  root unless ``--run-as root`` said so. With a uid pool (``--run-as-range``,
  SPEC §14.4) each run leases a uid of its own, given back once its supervisor
  is gone (:func:`_start`); ``result.limits`` says which per-run limits applied
  and which the run hit.
* **Environment.** Exactly the spec's ``env`` plus, when it does not set them,
  ``PATH`` (:data:`DEFAULT_PATH`), ``HOME`` (the run's directory) and ``LANG``
  (:data:`DEFAULT_LANG`); nothing of the worker's own environment (credentials,
  proxies, tokens) is inherited.
* **Working directory.** ``cwd`` must be relative and stay inside the run's
  directory (no absolute path, no ``..`` above it); its components are created
  there without following symlinks. Anything else: ``start_failed`` reason
  ``cwd_outside_work_dir``. stdin is ``/dev/null``.
* **Output.** stdout and stderr share one pipe; a pump thread copies the first
  ``output_limit`` bytes to ``WORK/<offerId>/output.log`` (0600) and then drains
  and drops the rest, so a chatty command neither blocks nor fills the disk.
  The same thread keeps the *last* :data:`TAIL_BYTES` in a ring buffer and
  counts every byte (:class:`OutputTail`): that tail, the exit code and the
  duration are the run's result (SPEC §9.3, :meth:`Process.result`), so memory
  stays bounded however much the command prints.
* **Stopping.** :meth:`Process.terminate` SIGTERMs every process of the run and
  SIGKILLs them once ``kill_grace_s`` passed (checked by :meth:`Process.poll`);
  when the leader exits, the rest of its tree is SIGKILLed at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any

from qinglong.worker.masking import Masker
from qinglong.worker.process_tree import (
    KILL_TREE,
    Launch,
    SpawnFailed,
    Supervised,
    is_supervisor,
    start,
)
from qinglong.worker.run_as import Sandbox

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_LANG = "C.UTF-8"
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
    "Sandbox",
    "SpawnFailed",
    "StopReason",
    "kill_orphan_group",
    "output_tail_text",
    "process_start_ticks",
    "spawn",
]


class StopReason(StrEnum):
    """Why the worker stopped a process (None: it exited on its own)."""

    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    SHUTDOWN = "worker_shutdown"


@dataclass(frozen=True)
class CommandSpec:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str | None
    timeout_s: int
    # SPEC §14.2: ENV_NAME -> secret name (names only; the values are fetched
    # after the starting ACK and passed to spawn(), never kept here).
    secrets: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_revision(cls, spec: Mapping[str, Any]) -> CommandSpec:
        # Validated against qinglong/command@v1 when the offer was admitted.
        return cls(
            argv=tuple(spec["argv"]),
            env=dict(spec.get("env") or {}),
            cwd=spec.get("cwd"),
            timeout_s=int(spec["timeoutS"]),
            secrets=dict(spec.get("secrets") or {}),
        )

    def child_env(self, home: str, secret_env: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(self.env)
        env.update(secret_env or {})
        env.setdefault("PATH", DEFAULT_PATH)
        env.setdefault("HOME", home)
        env.setdefault("LANG", DEFAULT_LANG)
        return env

    def cwd_parts(self) -> tuple[str, ...]:
        """``cwd`` as components inside the run directory, or SpawnFailed."""
        if not self.cwd:
            return ()
        if os.path.isabs(self.cwd) or "\0" in self.cwd:
            raise SpawnFailed("cwd_outside_work_dir")
        parts = tuple(p for p in os.path.normpath(self.cwd).split("/") if p not in ("", "."))
        if ".." in parts:
            raise SpawnFailed("cwd_outside_work_dir")
        return parts


@dataclass(frozen=True)
class ExitStatus:
    returncode: int  # Popen convention: negative = killed by that signal
    stopped_by: StopReason | None

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None


def spawn(
    spec: CommandSpec,
    work_dir: str,
    *,
    output_limit: int,
    sandbox: Sandbox | None = None,
    secret_env: Mapping[str, str] | None = None,
) -> Process:
    """Start ``spec`` under its own supervisor; raise :class:`SpawnFailed` if it cannot.

    ``work_dir`` (``WORK/<offerId>``, the worker's own) receives ``output.log``.
    ``secret_env``: the delivered secret values (ENV_NAME -> value, SPEC §14.3),
    added to the command's environment and masked in its output (§14.5)."""
    secret_env = secret_env or {}
    if any("\0" in value for value in secret_env.values()):
        raise SpawnFailed("secret_value_invalid")  # cannot be an environment value
    launch = _launch(spec, work_dir, sandbox, secret_env)
    try:
        log = _open_log(os.path.join(work_dir, OUTPUT_NAME))
    except OSError:
        raise SpawnFailed("work_dir_unusable") from None
    try:
        handle = _start(launch, sandbox)
    except SpawnFailed:
        log.close()
        raise
    return Process(handle, log, output_limit, deadline=time.monotonic() + spec.timeout_s,
                   masker=Masker(secret_env.values()))  # fmt: skip


def _launch(
    spec: CommandSpec, work_dir: str, sandbox: Sandbox | None, secret_env: Mapping[str, str]
) -> Launch:
    """Everything the supervisor needs, validated here (SpawnFailed otherwise)."""
    if sandbox is None:
        if os.geteuid() == 0:
            raise SpawnFailed("run_as_required")
        sandbox, run_name = Sandbox(work_dir), SCRATCH_NAME
    else:
        run_name = os.path.basename(os.path.normpath(work_dir))
    run_as = sandbox.run_as
    launch = Launch(
        argv=spec.argv,
        env=ChildEnv(spec.child_env(os.path.join(sandbox.runs_dir, run_name), secret_env)),
        runs_dir=sandbox.runs_dir,
        run_name=run_name,
        cwd_parts=spec.cwd_parts(),
        uid=None if run_as is None else run_as.uid,
        gid=None if run_as is None else run_as.gid,
        limits=sandbox.limits if sandbox.switches else None,
        private_places=sandbox.private_places,
    )
    texts = (*launch.argv, *launch.env, *launch.env.values())
    if not launch.argv or any("\0" in text for text in texts):
        raise SpawnFailed("invalid_argv")
    return launch


def _start(launch: Launch, sandbox: Sandbox | None) -> Supervised:
    """SPEC §14.4: with ``--run-as-range`` the run leases a uid of its own,
    given back (reclaimed, worker/uid_pool.py) once its supervisor is gone."""
    pool = None if sandbox is None else sandbox.pool
    if pool is None:
        return start(launch)
    user = pool.lease()
    if user is None:
        raise SpawnFailed("no_free_uid")
    try:
        handle = start(dataclasses.replace(launch, uid=user.uid, gid=user.gid))
    except SpawnFailed:
        pool.release(user.uid)
        raise
    handle.on_exit = functools.partial(pool.release, user.uid)
    return handle


class ChildEnv(dict[str, str]):
    """A command's environment: it may hold delivered secret values, so its repr
    (and that of the Launch holding it) names the variables only."""

    def __repr__(self) -> str:
        return f"ChildEnv(names={sorted(self)!r})"

    __str__ = __repr__


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


def _pump(source: IO[bytes], sink: IO[bytes], limit: int, tail: OutputTail, masker: Masker) -> None:
    """Copy the head of the output, keep the tail, and keep draining so the
    child never blocks (a failing log file only stops the copy). Everything
    passes the masker first (SPEC §14.5): the log, the tail and the byte count
    are of the masked stream; what it holds back at a read error is dropped."""
    head: _Head | None = _Head(sink, limit) if limit > 0 else None

    def emit(masked: bytes) -> None:
        nonlocal head
        if not masked:
            return
        tail.feed(masked)
        if head is not None and not head.write(masked):
            head = None

    try:
        while chunk := source.read1(_PUMP_CHUNK):  # type: ignore[attr-defined]
            emit(masker.feed(chunk))
        emit(masker.flush())
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
    """A running command: its supervisor, its deadline, its output pump."""

    handle: Supervised
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
    masker: Masker = field(default_factory=lambda: Masker(()), repr=False)
    _pump: threading.Thread | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._pump = threading.Thread(
            target=_pump,
            args=(self.handle.stdout, self.log, self.output_limit, self.tail, self.masker),
            name=f"output-{self.pid}", daemon=True,
        )  # fmt: skip
        self._pump.start()
        with contextlib.suppress(OSError, AttributeError):
            # Readable once the process exits: lets the run loop sleep until then.
            self.pidfd = os.pidfd_open(self.pid)
        self.start_ticks = process_start_ticks(self.pid)

    @property
    def pid(self) -> int:
        return self.handle.pid

    def timed_out(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.deadline

    def terminate(self, reason: StopReason, kill_grace_s: float) -> None:
        """SIGTERM the run's processes now, SIGKILL after ``kill_grace_s`` (first reason wins)."""
        if self.status is not None or self.stopped_by is not None:
            return
        self.stopped_by = reason
        self.kill_at = time.monotonic() + kill_grace_s
        self.handle.send(signal.SIGTERM)

    def kill(self) -> None:
        self.handle.send(KILL_TREE)

    def poll(self) -> ExitStatus | None:
        """Non-blocking: escalate a due SIGKILL, reap the supervisor (it exits
        only once its leader exited and the rest of the tree is dead)."""
        if self.status is not None:
            return self.status
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.kill_at = None
            self.kill()
        returncode = self.handle.poll()
        if returncode is None:
            return None
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
        limits = self.handle.limits_report()
        if limits is not None:
            doc["limits"] = limits  # SPEC §14.4: which limits applied, which were hit
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

    def _close_pidfd(self) -> None:
        fd, self.pidfd = self.pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Last resort (worker failing closed): kill the tree, reap, release fds."""
        if self.status is None:
            self.kill()
            if self.handle.wait(5) is None:  # a supervisor that hangs: it goes
                self.handle.send(signal.SIGKILL)
                self.handle.wait(5)
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
    """Kill what a dead predecessor left running, if it is provably the same process.

    After a worker restart its commands are no longer our children: we cannot
    reap them or learn their exit code. A process still alive with the same
    start time is that run (a recycled pid has another start time). A
    supervisor is told to kill its whole tree (it normally did so already when
    the worker died); anything else has its process group SIGKILLed, so it
    cannot race the retry the server is about to schedule.
    """
    if start_ticks is None or process_start_ticks(pid) != start_ticks:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if is_supervisor(pid):
            os.kill(pid, KILL_TREE)
        else:
            os.killpg(pid, signal.SIGKILL)
        return True
    return False
