"""Per-run limits: processes, open files, memory (SPEC §14.4).

Two mechanisms, chosen per worker at start (:func:`choose`):

* ``cgroup`` — a cgroup v2 directory the worker may create children in, with
  the ``pids`` and ``memory`` controllers enabled for its children
  (``executor.cgroupParent``, else the worker's own cgroup or its parent when
  one of them qualifies). Every run gets ``<parent>/ql-run-<name>`` with
  ``pids.max`` and ``memory.max`` (``memory.swap.max`` 0); the command's leader
  moves itself in before it takes the run's identity, so everything it starts
  is inside. The limits hold for the whole run. ``exceeded`` is read from the
  kernel's own counters when the run ends (``pids.events`` ``max``,
  ``memory.events`` ``oom``/``oom_kill``); the directory is removed afterwards.
* ``rlimit`` — everywhere else. ``RLIMIT_NPROC`` = maxProcesses (counted per
  real uid, threads included: with ``--run-as-range`` every run has a uid of
  its own, so it bounds that run; one ``--run-as`` user is shared by every run
  and by whatever else runs as it, so there processes are not limited —
  ``maxProcesses`` null — unless by cgroup), ``RLIMIT_NOFILE`` = maxOpenFiles
  (per process), ``RLIMIT_DATA`` = maxMemoryBytes (per process: heap and
  private writable mappings). The supervisor also samples the run every
  :data:`SAMPLE_S` (one ``/proc`` pass over its processes): the sum of their
  memory (proportional set size) reaching maxMemoryBytes kills the run and
  reports ``memory``; their tasks reaching maxProcesses reports ``processes``
  (forks fail from there on). What a sample cannot see is not reported: a
  fork refused between two samples, one allocation refused by ``RLIMIT_DATA``
  (the process sees ``ENOMEM``) or an ``EMFILE`` from ``RLIMIT_NOFILE`` happen
  inside the process — ``openFiles`` is therefore never reported under
  ``rlimit``. Files a run keeps in its private ``/tmp`` (a tmpfs as large as
  maxMemoryBytes) are not in any process's memory: under ``rlimit`` a run may
  hold up to twice maxMemoryBytes that way.

The completion's ``result.limits`` says which applied (:meth:`Limits.report`).
Light (``os`` only): the CLI and the configuration import it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_MAX_MEMORY_BYTES",
    "DEFAULT_MAX_OPEN_FILES",
    "DEFAULT_MAX_PROCESSES",
    "Cgroup",
    "Exceeded",
    "Limits",
    "Mechanism",
    "RunSample",
    "apply_rlimits",
    "choose",
    "sample_tree",
]

DEFAULT_MAX_PROCESSES = 1024
DEFAULT_MAX_OPEN_FILES = 4096
DEFAULT_MAX_MEMORY_BYTES = 2 * 1024 * 1024 * 1024
MAX_PROCESSES_RANGE = (8, 1_000_000)
MAX_OPEN_FILES_RANGE = (16, 1_048_576)
MAX_MEMORY_RANGE = (16 * 1024 * 1024, 1 << 50)
SAMPLE_S = 0.25  # one /proc pass per run per sample: cheap enough, quick enough
CGROUP_PREFIX = "ql-run-"
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Mechanism(StrEnum):
    CGROUP = "cgroup"
    RLIMIT = "rlimit"


class Exceeded(StrEnum):
    PROCESSES = "processes"
    MEMORY = "memory"
    OPEN_FILES = "openFiles"


@dataclass(frozen=True)
class Limits:
    """The limits of every run of one worker, and how they are enforced."""

    max_processes: int | None = DEFAULT_MAX_PROCESSES  # None: not limited
    max_open_files: int = DEFAULT_MAX_OPEN_FILES
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES
    mechanism: Mechanism = Mechanism.RLIMIT
    cgroup_parent: str | None = None  # with Mechanism.CGROUP: where runs' cgroups go

    def report(self, uid: int | None, exceeded: frozenset[Exceeded]) -> dict[str, object]:
        """``result.limits`` of a completion."""
        return {
            "mechanism": self.mechanism.value,
            "uid": uid,
            "maxProcesses": self.max_processes,
            "maxOpenFiles": self.max_open_files,
            "maxMemoryBytes": self.max_memory_bytes,
            "exceeded": sorted(e.value for e in exceeded),
        }


# ------------------------------------------------------------------ rlimits


def apply_rlimits(limits: Limits) -> None:
    """In the command's process, before it takes the run's identity: soft = hard."""
    pairs = [(resource.RLIMIT_NOFILE, limits.max_open_files)]
    if limits.mechanism is Mechanism.RLIMIT:
        pairs.append((resource.RLIMIT_DATA, limits.max_memory_bytes))
        if limits.max_processes is not None:
            pairs.append((resource.RLIMIT_NPROC, limits.max_processes))
    for which, value in pairs:
        resource.setrlimit(which, (value, value))


@dataclass(frozen=True)
class RunSample:
    tasks: int  # processes and their threads
    resident_bytes: int


def sample_tree(root: int) -> RunSample:
    """One /proc pass: the tasks and the memory of every descendant of ``root``
    (proportional set size: pages shared between the run's processes — a
    fork's copy-on-write memory — count once, not once per process)."""
    stats: dict[int, tuple[int, int, int]] = {}  # pid -> (ppid, threads, rss pages)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
            fields = data[data.rindex(b")") + 2 :].split()
            stats[int(name)] = (int(fields[1]), int(fields[17]), int(fields[21]))
        except (OSError, ValueError, IndexError):
            continue
    children: dict[int, list[int]] = {}
    for pid, (ppid, _threads, _rss) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tasks = memory = 0
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        _ppid, threads, rss = stats[pid]
        tasks += threads
        memory += _pss(pid, rss * _PAGE)
        stack.extend(children.get(pid, ()))
    return RunSample(tasks, memory)


def _pss(pid: int, fallback: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return fallback


# ------------------------------------------------------------------ cgroup v2


def _cgroup2_mount(mountinfo: str = "/proc/self/mountinfo") -> str | None:
    try:
        with open(mountinfo, encoding="utf-8") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return left.split()[4]
    except OSError:
        pass
    return None


def _own_cgroup(path: str = "/proc/self/cgroup") -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _delegated(directory: str) -> bool:
    """Children of ``directory`` get pids and memory, and the worker may make them."""
    try:
        with open(os.path.join(directory, "cgroup.subtree_control"), encoding="ascii") as f:
            enabled = set(f.read().split())
    except OSError:
        return False
    return {"pids", "memory"} <= enabled and os.access(directory, os.W_OK | os.X_OK)


def cgroup_candidates(configured: str | None) -> list[str]:
    if configured is not None:
        return [configured]
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return []
    here = os.path.normpath(os.path.join(mount, own.lstrip("/")))
    return [here] if here == mount else [here, os.path.dirname(here)]


def choose(limits: Limits, configured_parent: str | None) -> Limits:
    """cgroup v2 where a delegated parent is usable, else rlimits."""
    from dataclasses import replace

    for parent in cgroup_candidates(configured_parent):
        if _delegated(parent):
            return replace(limits, mechanism=Mechanism.CGROUP, cgroup_parent=parent)
    return replace(limits, mechanism=Mechanism.RLIMIT, cgroup_parent=None)


@dataclass(frozen=True)
class Cgroup:
    """One run's cgroup (created by the supervisor, removed after the run)."""

    path: str

    @classmethod
    def create(cls, limits: Limits, run_name: str) -> Cgroup:
        assert limits.cgroup_parent is not None
        path = os.path.join(limits.cgroup_parent, CGROUP_PREFIX + run_name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
        group = cls(path)
        group.write("pids.max", str(limits.max_processes or "max"))
        group.write("memory.max", str(limits.max_memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
            group.write("memory.swap.max", "0")
        return group

    def write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w", encoding="ascii") as handle:
            handle.write(value)

    def enter(self) -> None:
        """Move the calling process in (the command's leader, before exec)."""
        self.write("cgroup.procs", "0")

    def exceeded(self) -> frozenset[Exceeded]:
        found: set[Exceeded] = set()
        if self._event("pids.events", "max") > 0:
            found.add(Exceeded.PROCESSES)
        if self._event("memory.events", "oom") > 0 or self._event("memory.events", "oom_kill"):
            found.add(Exceeded.MEMORY)
        return frozenset(found)

    def _event(self, name: str, key: str) -> int:
        try:
            with open(os.path.join(self.path, name), encoding="ascii") as handle:
                for line in handle:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            pass
        return 0

    def kill_and_remove(self) -> None:
        """Kill whatever is left inside (``cgroup.kill``), then remove it."""
        with contextlib.suppress(OSError):
            self.write("cgroup.kill", "1")
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return
            import time

            time.sleep(0.01)
