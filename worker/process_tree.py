"""One supervisor process per run: nothing a command starts outlives its run (SPEC §11).

Loaded only by the executor (R-LAY-1: ``ctypes`` is imported here, never by a
worker that does not execute).

The worker forks a **supervisor** for every run; the supervisor forks the
command. Why a process of its own, and not the worker:

* **Subreaper.** The supervisor sets ``PR_SET_CHILD_SUBREAPER``, so whatever the
  command leaves behind — a child that called ``setsid()``, a double fork —
  is re-parented to the supervisor, never to init. When the command's leader
  exits, is timed out or cancelled, the supervisor walks ``/proc`` for its
  descendants, SIGKILLs them all, waits on their pidfds until they have exited
  and reaps every child that is ready, then scans again until it has no child
  left (only a process forked meanwhile needs another pass: :func:`kill_tree`).
  Only this run's processes are its descendants, so other runs and the
  worker's own children are never hit. (A run cgroup, where one is used for
  limits, is killed as a whole as well.)
* **Identities.** With a run-as user U the supervisor clears its supplementary
  groups, takes U's group, and sets ``ruid=suid=worker, euid=U``: it may signal
  U's processes (its euid is theirs), they may not signal it (its real and saved
  uid are not theirs), and its memory — a copy of the worker's — is not
  dumpable, so U cannot ptrace or read it. The command then sets all three
  uids to U, clears every capability set with ``capset`` (a worker that
  switches by ambient CAP_SETUID/CAP_SETGID never passes through uid 0, so the
  kernel would clear nothing; the bounding set is emptied before the switch
  where the worker may), ``no_new_privs`` stops setuid binaries and file
  capabilities from giving any back, and it ``execve``\\s.
* **Work directory.** The supervisor creates the run's directory (0700, owned
  by U) as U, through a descriptor of the runs directory the worker opened
  (creating it needs no search of the ancestors; using it as ``HOME`` does,
  which the worker checks at start, worker/run_as.py); ``cwd`` components
  are created the same way with ``O_NOFOLLOW`` (no symlink escape), and the
  command starts with ``fchdir``. After the tree is dead the supervisor removes
  the directory, again as U (the files are U's).
* **Status.** The supervisor exits with its leader's status: the same code, or
  death by the same signal (it is not dumpable: no core file). A spawn failure
  is reported as a reason code over a close-on-exec pipe (EOF: exec succeeded).
* **Signals from the worker.** SIGTERM: forwarded to every descendant (polite
  stop). :data:`KILL_TREE` (SIGUSR1): SIGKILL every descendant now. The worker's
  death sends :data:`KILL_TREE` too (``PR_SET_PDEATHSIG``, armed — with
  ``PR_SET_DUMPABLE`` 0 — only after the identity switch, since a change of
  the effective ids resets both). Signals go through pidfds of the /proc
  snapshot's processes, never to a pid reused meanwhile.
* Everything the worker had open (journal, lock, sockets) is closed in the
  supervisor before anything else; the command gets /dev/null, the output pipe
  and nothing more.
* **Per-run isolation** (SPEC §14.4, ``Launch.private_places``/``limits``).
  Before the identity switch the supervisor may enter a mount and IPC
  namespace of the run's own with a fresh tmpfs on each shared place
  (:func:`_private_mounts`), and create the run's cgroup. The leader, with the
  worker's identity back for a moment (its real uid), moves into that cgroup
  and sets its rlimits (worker/run_limits.py), then takes the run's uid for
  good. Under rlimits the supervisor samples the run while waiting (reaping at
  once: a zombie still counts for ``RLIMIT_NPROC``) and kills it at its memory
  limit. What the run hit goes back to the worker over a pipe just before the
  supervisor exits (:attr:`Supervised.exceeded`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: this module also runs standalone (tests)
    from qinglong.worker.run_limits import Cgroup, Exceeded, Limits

__all__ = [
    "KILL_TREE",
    "SUPERVISOR_NAME",
    "Launch",
    "SpawnFailed",
    "Supervised",
    "descendants",
    "is_supervisor",
    "kill_tree",
    "remove_entry",
    "start",
]

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

KILL_TREE = signal.SIGUSR1
SUPERVISOR_NAME = "ql-supervisor"
# A supervisor that neither execs its command nor reports a failure by then is
# killed: spawn() must not hang the run loop.
START_TIMEOUT_S = 10.0
LOST_STATUS = 255  # a supervisor someone else reaped: exit status unknown
_REASON_MAX = 64
_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, KILL_TREE)
# kill_tree: how long one pass waits for the processes it killed to exit.
EXIT_WAIT_S = 5.0

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


class SpawnFailed(Exception):
    """The command could not be started; ``reason`` is a low-cardinality code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Launch:
    """What the supervisor needs, all decided (and validated) in the worker."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    runs_dir: str  # parent of the run's directory (worker-owned)
    run_name: str  # the run directory's name inside runs_dir
    cwd_parts: tuple[str, ...]  # relative path components inside the run directory
    uid: int | None = None  # run-as user; None: keep the worker's identity
    gid: int | None = None
    limits: Limits | None = None  # SPEC §14.4 (worker/run_limits.py); None: none
    # A private mount (and IPC) namespace with fresh tmpfs on these places
    # (SPEC §14.4): what the run leaves there vanishes with it. Empty: none.
    private_places: tuple[str, ...] = ()


class _Prctl:
    """``prctl(2)`` through libc (no Python API for the options used here)."""

    def __init__(self) -> None:
        import ctypes

        self._call = ctypes.CDLL(None, use_errno=True).prctl

    def __call__(self, option: int, arg: int | bytes = 0) -> bool:
        return int(self._call(option, arg, 0, 0, 0)) == 0


@dataclass
class Supervised:
    """The worker's handle on one supervisor (Popen-like, without Popen)."""

    pid: int
    stdout: IO[bytes]
    returncode: int | None = field(default=None)
    report_fd: int | None = field(default=None, repr=False)  # what the supervisor saw
    exceeded: frozenset[Exceeded] = field(default=frozenset())
    limits: Limits | None = None  # the run's (SPEC §14.4), None: none applied
    uid: int | None = None  # the run's uid (None: the worker's)
    on_exit: Callable[[], None] | None = field(default=None, repr=False)  # once reaped

    def limits_report(self) -> dict[str, object] | None:
        """``result.limits``: the mechanism, the limits, what the run hit."""
        if self.limits is None:
            return None
        return self.limits.report(self.uid, self.exceeded)

    def send(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signum)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = LOST_STATUS
                self.close_report()
                self._exited()
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self._read_report()
                self._exited()
        return self.returncode

    def _exited(self) -> None:
        hook, self.on_exit = self.on_exit, None
        if hook is not None:
            hook()

    def _read_report(self) -> None:
        """The limits the run hit (the supervisor's last words: names, one line)."""
        fd, self.report_fd = self.report_fd, None
        if fd is None:
            return
        try:
            os.set_blocking(fd, False)
            data = os.read(fd, _REASON_MAX)
        except OSError:
            data = b""
        finally:
            os.close(fd)
        words = data.decode("ascii", "replace").split()
        if not words:
            return
        from qinglong.worker.run_limits import Exceeded

        known = {e.value: e for e in Exceeded}
        self.exceeded = frozenset(known[w] for w in words if w in known)

    def close_report(self) -> None:
        fd, self.report_fd = self.report_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.returncode


def start(launch: Launch) -> Supervised:
    """Fork the supervisor; return once the command exec'd, else raise SpawnFailed."""
    prctl = _Prctl()
    try:
        runs_fd = os.open(launch.runs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise SpawnFailed("work_dir_unusable") from None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    worker_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        for fd in (runs_fd, out_r, out_w, err_r, err_w, rep_r, rep_w):
            os.close(fd)
        raise SpawnFailed("process_limit") from None
    if pid == 0:  # the supervisor: never returns
        code = 127
        try:
            os.close(rep_r)
            fds = _Fds(runs_fd, out_w, err_w, rep_w)
            code = _Supervisor(launch, prctl, worker_pid, fds).run()
        finally:
            os._exit(code)
    for fd in (runs_fd, out_w, err_w, rep_w):
        os.close(fd)
    reason = _read_reason(err_r)
    handle = Supervised(pid, os.fdopen(out_r, "rb"), report_fd=rep_r, limits=launch.limits,
                        uid=launch.uid)  # fmt: skip
    if reason is not None:
        if reason == "start_timeout":
            handle.send(signal.SIGKILL)
        handle.wait(START_TIMEOUT_S)
        handle.stdout.close()
        handle.close_report()
        raise SpawnFailed(reason)
    return handle


def _read_reason(fd: int) -> str | None:
    """EOF at once: the command exec'd. Bytes: the reason it did not."""
    data = b""
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "start_timeout"
            chunk = os.read(fd, _REASON_MAX)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return data.decode("ascii", "replace")[:_REASON_MAX] or None


def is_supervisor(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().strip() == SUPERVISOR_NAME.encode()
    except OSError:
        return False


def _ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        return int(data[data.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[tuple[int, int]]:
    """Every live process below ``root`` as (pid, parent pid): a /proc snapshot."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = _ppid(name)
            if ppid is not None:
                children.setdefault(ppid, []).append(int(name))
    found: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        parent = stack.pop()
        for child in children.get(parent, ()):
            found.append((child, parent))
            stack.append(child)
    return found


Scan = Callable[[int], list[tuple[int, int]]]


def _signal_tree(root: int, signum: int, scan: Scan = descendants,
                 keep: list[int] | None = None) -> None:  # fmt: skip
    """Signal every descendant of ``root``, never a stranger that reused a pid.

    Each pid of the snapshot is pinned with a pidfd, then its parent is read
    again: still the parent the snapshot saw, it is the same process (a pid is
    reused only after its process was reaped, which re-parents nothing here).
    ``keep``: the pidfds of the processes signalled go there (the caller waits
    on and closes them) instead of being closed."""
    for pid, parent in scan(root):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except (AttributeError, OSError):  # no pidfds (old kernel, fd limit): the pid
            _signal_all([pid], signum)
            continue
        sent = False
        try:
            if _ppid(str(pid)) == parent:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(pidfd, signum)
                    sent = True
        finally:
            if sent and keep is not None:
                keep.append(pidfd)
            else:
                os.close(pidfd)


def kill_tree(root: int, scan: Scan = descendants) -> int:
    """SIGKILL every descendant of ``root`` (a subreaper: the caller) and reap
    until none is left; returns the number of ``/proc`` scans it took.

    One scan kills everything it found, waits (pidfds) until those processes
    have exited — by then the orphans of each were re-parented to ``root`` —
    and reaps every child that is ready. Only a process forked after the scan
    (or one the kernel is slow to end) needs another scan, so a run that left
    800 processes behind costs one or two scans, not one per process."""
    scans = 0
    while True:
        scans += 1
        pidfds: list[int] = []
        _signal_tree(root, signal.SIGKILL, scan, keep=pidfds)
        _await_exits(pidfds, EXIT_WAIT_S)
        if _reap_ready() is None:
            return scans
        if not pidfds:
            # Nothing pinned to wait on (no pidfds): block for one child, as
            # before, rather than rescanning in a busy loop.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, 0)


def _await_exits(pidfds: list[int], timeout_s: float) -> None:
    """Wait until every pidfd is readable (its process exited), then close them."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left = len(pidfds)
    deadline = time.monotonic() + timeout_s
    try:
        while left:
            wait_ms = int((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0:
                break
            for fd, _event in poller.poll(wait_ms):
                poller.unregister(fd)
                left -= 1
    finally:
        for fd in pidfds:
            os.close(fd)


def _reap_ready() -> int | None:
    """Reap every child that has exited; None when no child is left at all, else
    how many were reaped."""
    reaped = 0
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return reaped
        reaped += 1


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


@dataclass(frozen=True)
class _Fds:
    runs: int  # the runs directory
    out_w: int  # the output pipe
    err_w: int  # spawn failure reason (EOF: exec'd)
    report_w: int  # the limits the run hit, written just before the supervisor exits


class _Supervisor:
    """Runs in the forked child; every method ends in the child's own exit."""

    def __init__(self, launch: Launch, prctl: _Prctl, worker_pid: int, fds: _Fds) -> None:
        self.launch = launch
        self.prctl = prctl
        self.worker_pid = worker_pid
        self.runs_fd = fds.runs
        self.out_w = fds.out_w
        self.err_w = fds.err_w
        self.report_w = fds.report_w
        self.leader: int | None = None
        self.killing = False
        self.created = False  # the run directory is ours to remove
        self.cgroup: Cgroup | None = None
        self.exceeded: set[Exceeded] = set()
        self.exec_r: int | None = None  # EOF once the leader exec'd (or died)

    def run(self) -> int:
        try:
            self._setup()
            cwd_fd = self._make_dirs()
        except (SpawnFailed, OSError) as exc:
            self._report(exc.reason if isinstance(exc, SpawnFailed) else "work_dir_unusable")
            if self.created:
                with contextlib.suppress(OSError):
                    _remove_entry(self.runs_fd, self.launch.run_name)
            self._end_cgroup()
            return 127
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (*_HANDLED, signal.SIGCHLD))
        self.exec_r, exec_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.leader = os.fork()
        if self.leader == 0:
            self._exec(cwd_fd)  # never returns
        os.close(exec_w)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked | {signal.SIGCHLD})
        os.close(cwd_fd)
        os.close(self.err_w)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)  # only the command's tree holds the output pipe now
        os.close(devnull)
        if self.killing:
            _signal_all([self.leader], signal.SIGKILL)
        status = self._wait_leader()
        self._kill_tree()
        with contextlib.suppress(OSError):
            _remove_entry(self.runs_fd, self.launch.run_name)
        self._end_cgroup()
        with contextlib.suppress(OSError):
            os.write(self.report_w, " ".join(sorted(self.exceeded)).encode("ascii"))
        return _relay(status)

    def _end_cgroup(self) -> None:
        """With the worker's identity again (its saved uid): read what the run
        hit, kill what is left inside, remove the cgroup."""
        group = self.cgroup
        if group is None:
            return
        with contextlib.suppress(OSError):
            os.seteuid(os.getuid())
        self.exceeded.update(group.exceeded())
        group.kill_and_remove()

    def _setup(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)  # the worker's wake-up pipe is not ours
        for signum in _HANDLED:
            signal.signal(signum, self._on_signal)
        os.setsid()
        self.prctl(PR_SET_NAME, SUPERVISOR_NAME.encode())
        self.prctl(PR_SET_DUMPABLE, 0)  # at once, and again after the switch below
        if not self.prctl(PR_SET_CHILD_SUBREAPER, 1):
            raise SpawnFailed("subreaper_unavailable")
        self._fds()
        launch = self.launch
        if launch.private_places:
            _private_mounts(launch)
            self.runs_fd = _reopen(self.runs_fd, launch.runs_dir)
        if launch.limits is not None and launch.limits.mechanism == "cgroup":
            from qinglong.worker.run_limits import Cgroup

            try:
                self.cgroup = Cgroup.create(launch.limits, launch.run_name)
            except OSError:
                raise SpawnFailed("cgroup_unusable") from None
        if launch.uid is not None and launch.gid is not None:
            _drop_bounding_set(self.prctl)  # root can; a capability-only worker cannot
            try:
                os.setgroups([])
                os.setresgid(launch.gid, launch.gid, launch.gid)
                real = os.getuid()
                os.setresuid(real, launch.uid, real)
            except OSError:
                raise SpawnFailed("run_as_failed") from None
        # Only now: a change of the effective ids resets both (the kernel's
        # commit_creds), so armed earlier alone they would be gone for a run-as user.
        self.prctl(PR_SET_DUMPABLE, 0)
        self.prctl(PR_SET_PDEATHSIG, KILL_TREE)
        if os.getppid() != self.worker_pid:
            raise SpawnFailed("worker_gone")  # died before PDEATHSIG was armed

    def _fds(self) -> None:
        """stdin /dev/null, stdout+stderr the output pipe; close everything else."""
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(self.out_w, 1)
        os.dup2(self.out_w, 2)
        keep = {0, 1, 2, self.err_w, self.runs_fd, self.report_w}
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _make_dirs(self) -> int:
        """The run directory (as the run-as user), then cwd inside it; its fd."""
        name = self.launch.run_name
        try:
            os.mkdir(name, 0o700, dir_fd=self.runs_fd)
        except FileExistsError:  # left by a supervisor that was killed
            _remove_entry(self.runs_fd, name)
            os.mkdir(name, 0o700, dir_fd=self.runs_fd)
        self.created = True
        fd = _open_dir(name, self.runs_fd)
        os.fchmod(fd, 0o700)
        for part in self.launch.cwd_parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            try:
                inner = _open_dir(part, fd)
            except OSError:
                raise SpawnFailed("cwd_outside_work_dir") from None
            os.close(fd)
            fd = inner
        return fd

    def _exec(self, cwd_fd: int) -> None:
        reason = "spawn_failed"
        try:
            for signum in (*_HANDLED, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            supervisor = os.getppid()
            self._limit()
            if self.launch.uid is not None:
                os.setresuid(self.launch.uid, self.launch.uid, self.launch.uid)
            # After the uid change (which resets it): should the supervisor die
            # unexpectedly, its leader goes with it.
            self.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != supervisor:
                raise SpawnFailed("supervisor_gone")
            self.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)  # old kernels: no ambient set
            if self.launch.uid is not None and not _clear_capabilities():
                raise SpawnFailed("run_as_failed")
            if not self.prctl(PR_SET_NO_NEW_PRIVS, 1):
                raise SpawnFailed("run_as_failed")
            os.close(self.runs_fd)
            os.close(self.report_w)
            os.fchdir(cwd_fd)
            argv = list(self.launch.argv)
            os.execvpe(argv[0], argv, dict(self.launch.env))
        except SpawnFailed as exc:
            reason = exc.reason
        except OSError as exc:
            reason = _SPAWN_REASONS.get(exc.errno or 0, "spawn_failed")
        except (ValueError, TypeError, IndexError):
            reason = "invalid_argv"
        finally:
            self._report(reason)
            os._exit(127)

    def _limit(self) -> None:
        """In the leader, with the worker's identity back for a moment (its
        real uid; raising a hard limit or entering a cgroup may need it)."""
        limits = self.launch.limits
        if limits is None:
            return
        try:
            os.seteuid(os.getuid())
            if self.cgroup is not None:
                self.cgroup.enter()
            from qinglong.worker.run_limits import apply_rlimits

            apply_rlimits(limits)
        except OSError:
            raise SpawnFailed("limits_failed") from None

    def _report(self, reason: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.err_w, reason.encode("ascii")[:_REASON_MAX])

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGTERM:
            _signal_tree(os.getpid(), signal.SIGTERM)
            return
        self.killing = True  # KILL_TREE, the worker's death, or a hang-up
        _signal_tree(os.getpid(), signal.SIGKILL)

    def _wait_leader(self) -> int:
        limits = self.launch.limits
        sampling = limits is not None and limits.mechanism == "rlimit"
        wait_s = 1.0
        if sampling:
            from qinglong.worker.run_limits import SAMPLE_S

            wait_s = SAMPLE_S
        while True:
            # Reaps orphans too, at once (a zombie still counts for RLIMIT_NPROC).
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid = 0
                if pid == self.leader:
                    return status
                if pid == 0:
                    break
            if sampling:
                assert limits is not None
                self._sample(limits)
            signal.sigtimedwait([signal.SIGCHLD], wait_s)

    def _sample(self, limits: Limits) -> None:
        """rlimit mechanism: the run's tasks at the cap, its memory over it (killed)."""
        from qinglong.worker.run_limits import Exceeded, sample_tree

        execd = self._leader_execd()  # asked first: the sample below is then after it
        seen = sample_tree(os.getpid())
        if limits.max_processes is not None and seen.tasks >= limits.max_processes:
            self.exceeded.add(Exceeded.PROCESSES)
        if not execd:
            return  # its memory is still a copy of the worker's, not the run's
        if seen.resident_bytes >= limits.max_memory_bytes and not self.killing:
            self.exceeded.add(Exceeded.MEMORY)
            self.killing = True
            _signal_tree(os.getpid(), signal.SIGKILL)

    def _leader_execd(self) -> bool:
        """Whether the leader exec'd the command: until then it is a fork of
        the supervisor (the worker's memory, unreadable as PSS to the run-as
        supervisor, so counted by its whole RSS) and holds the pipe's
        close-on-exec write end."""
        if self.exec_r is None:
            return True
        try:
            os.read(self.exec_r, 1)
        except BlockingIOError:
            return False
        os.close(self.exec_r)
        self.exec_r = None
        return True

    def _kill_tree(self) -> None:
        """SIGKILL every descendant and reap until none is left."""
        kill_tree(os.getpid())


def _drop_bounding_set(prctl: _Prctl) -> None:
    """Empty the capability bounding set where allowed (needs CAP_SETPCAP)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        if not prctl(PR_CAPBSET_DROP, cap):
            return  # no CAP_SETPCAP: none of them can be dropped


def _clear_capabilities() -> bool:
    """``capset(2)``: empty effective, permitted and inheritable sets.

    A worker that switches by capabilities alone (a systemd unit's ambient
    CAP_SETUID/CAP_SETGID) changes uids without passing through 0, so the
    kernel clears nothing: without this the command would keep them
    (inheritable survives ``execve``)."""
    import ctypes

    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}: all zero
    return int(ctypes.CDLL(None, use_errno=True).capset(header, data)) == 0


CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _libc_call(name: str, *args: object) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int,
           data: bytes | None = None) -> None:  # fmt: skip
    _libc_call("mount", source, target.encode(), fstype, flags, data)


def _private_mounts(launch: Launch) -> None:
    """A mount and IPC namespace of the run's own (as root, before the identity
    switch): nothing propagates back, and each shared place gets a fresh tmpfs
    (sized like the run's memory limit). A runs directory below one of them is
    bound back to its path, so the run's HOME still resolves."""
    try:
        _libc_call("unshare", CLONE_NEWNS | CLONE_NEWIPC)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        size = launch.limits.max_memory_bytes if launch.limits is not None else 64 << 20
        runs = os.path.realpath(launch.runs_dir)
        runs_fd = os.open(runs, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for place in launch.private_places:
                if not os.path.isdir(place) or os.path.islink(place):
                    continue
                options = f"mode=1777,size={size}".encode()
                _mount(b"tmpfs", place, b"tmpfs", MS_NOSUID | MS_NODEV, options)
                if os.path.commonpath([runs, place]) == place:
                    _searchable_path(place, runs)
                    _mount(f"/proc/self/fd/{runs_fd}".encode(), runs, None, MS_BIND)
        finally:
            os.close(runs_fd)
    except OSError:
        raise SpawnFailed("private_mounts_failed") from None


def _searchable_path(top: str, path: str) -> None:
    """Every directory from ``top`` (exclusive) down to ``path``, created in the
    fresh tmpfs with mode 0711 whatever the umask: the run must reach its HOME."""
    current = top
    for part in os.path.relpath(path, top).split("/"):
        current = os.path.join(current, part)
        with contextlib.suppress(FileExistsError):
            os.mkdir(current)
        os.chmod(current, 0o711)


def _reopen(old_fd: int, path: str) -> int:
    """The runs directory opened again inside the new mount namespace (a cwd
    reached through the old one would be unreachable there), checked to be the
    same directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise SpawnFailed("private_mounts_failed") from None
    old, new = os.fstat(old_fd), os.fstat(fd)
    if (old.st_dev, old.st_ino) != (new.st_dev, new.st_ino):
        os.close(fd)
        raise SpawnFailed("private_mounts_failed")
    os.dup2(fd, old_fd)  # keep the number: the fd bookkeeping stays as it was
    os.close(fd)
    return old_fd


def private_mounts_permitted() -> bool:
    """Whether this worker may give runs a private mount namespace (probed in a
    child: unshare, a tmpfs mount)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _libc_call("unshare", CLONE_NEWNS | CLONE_NEWIPC)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount(b"tmpfs", "/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _open_dir(name: str, dir_fd: int) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _enter(parent_fd: int, name: str) -> int:
    """Open a directory to empty it, first making it ours to write (the command
    may have made it read-only)."""
    try:
        os.chmod(name, 0o700, dir_fd=parent_fd, follow_symlinks=False)
    except NotImplementedError:  # a libc without fchmodat(AT_SYMLINK_NOFOLLOW)
        os.chmod(name, 0o700, dir_fd=parent_fd)
    return _open_dir(name, parent_fd)


def _clear_files(dir_fd: int) -> list[str]:
    """Unlink every non-directory in ``dir_fd`` (one listing); its subdirectories."""
    with os.scandir(dir_fd) as it:
        entries = list(it)
    subdirs: list[str] = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            subdirs.append(entry.name)
        else:
            os.unlink(entry.name, dir_fd=dir_fd)
    return subdirs


def _remove_entry(parent_fd: int, name: str) -> None:
    """rm -rf of one entry, by descriptors, without recursion (any depth, two fds).

    Going down opens the child relative to the current directory (``O_NOFOLLOW``);
    going up opens ``..`` and checks it is the directory it came from (device
    and inode), so a directory moved meanwhile stops the walk instead of
    leading it elsewhere. Each directory is listed once."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    fd = _enter(parent_fd, name)
    pending = [_clear_files(fd)]  # per level: the subdirectories still to remove
    below: list[tuple[str, tuple[int, int]]] = []  # (name entered, identity of its parent)
    try:
        while True:
            if pending[-1]:
                child = pending[-1].pop()
                here = os.fstat(fd)
                inner = _enter(fd, child)
                os.close(fd)
                fd = inner
                below.append((child, (here.st_dev, here.st_ino)))
                pending.append(_clear_files(fd))
                continue
            if not below:
                break
            pending.pop()
            child, expected = below.pop()
            up = _open_dir("..", fd)
            os.close(fd)
            fd = up
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != expected:
                raise OSError(errno.ESTALE, "a directory moved during removal")
            os.rmdir(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


remove_entry = _remove_entry


def _relay(status: int) -> int:
    """Exit like the leader: its code, or death by its signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.kill(os.getpid(), signum)
        return 128 + signum
    return os.waitstatus_to_exitcode(status)
