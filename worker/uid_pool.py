"""A uid of its own for every concurrent run: ``--run-as-range FIRST-LAST`` (SPEC §14.4).

Decisions:

* **The range is the worker's alone.** A uid (or the gid of the same number)
  with a ``passwd`` (``group``) entry refuses the start, as does a range that
  holds 0, the worker's own uid, or is narrower than the worker's slots. Two
  workers on one machine need ranges that do not overlap.
* **Lease.** A run takes a free uid (its gid is the same number, no
  supplementary groups). A uid that owns a process — a previous worker's run
  still dying, anyone's — is skipped and looked at again at the next lease; a
  start with fewer usable uids than slots is refused.
* **Reclaim.** When a run ends its uid is *draining*: a child that takes the
  uid for good SIGKILLs everything that uid runs (``kill(-1)``: with a uid of
  its own that is exactly the run's leftovers, never another run's or the
  worker's — a supervisor keeps the worker's real and saved uid) and removes
  what the uid owns at the top of the shared places (the runs directory,
  ``/tmp``, ``/dev/shm``: entries owned by it, whole, without following a
  symlink, bounded by :data:`SWEEP_LIMIT` entries per place). The uid is free
  again only once ``/proc`` shows no process with it as real, effective, saved
  or filesystem uid. Leftovers of a range's uids found at start (a crashed
  worker's) are reclaimed the same way before first use.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from qinglong.worker.run_as import RunAs, RunAsError

__all__ = [
    "PRIVATE_PLACES",
    "SWEEP_LIMIT",
    "UidPool",
    "UidRange",
    "check_owners",
    "check_range",
    "owners",
    "parse_range",
]

# The world-writable places a run could leave files in: a private tmpfs each
# where permitted (worker/process_tree.py), else swept after the run.
PRIVATE_PLACES = ("/tmp", "/var/tmp", "/dev/shm")
SWEEP_LIMIT = 100_000
UID_MAX = 2**32 - 2  # (uid_t)-1 means "unchanged"
RECLAIM_ROUNDS = 3


@dataclass(frozen=True)
class UidRange:
    first: int
    last: int

    def __len__(self) -> int:
        return self.last - self.first + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.last + 1))

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.first <= uid <= self.last

    def text(self) -> str:
        return f"{self.first}-{self.last}"


def parse_range(text: str) -> UidRange:
    first_text, sep, last_text = text.partition("-")
    if not sep or not first_text.isdigit() or not last_text.isdigit():
        raise RunAsError("invalid_run_as_range",
                         f"--run-as-range {text!r}: expected UID_FIRST-UID_LAST")  # fmt: skip
    first, last = int(first_text, 10), int(last_text, 10)
    if not 1 <= first <= last <= UID_MAX:
        raise RunAsError("invalid_run_as_range",
                         f"--run-as-range {text!r}: need 1 <= UID_FIRST <= UID_LAST <= {UID_MAX}")
    return UidRange(first, last)


def check_range(uids: UidRange, *, slots: int, euid: int) -> None:
    """Refuse a range that is too narrow or not the worker's alone."""
    if len(uids) < slots:
        raise RunAsError("run_as_range_too_small",
                         f"--run-as-range {uids.text()} holds {len(uids)} uids, fewer than "
                         f"the worker's {slots} slots: every concurrent run needs its own")
    if euid in uids:
        raise RunAsError("run_as_range_invalid",
                         f"--run-as-range {uids.text()} holds the worker's own uid {euid}")
    taken = [e.pw_uid for e in pwd.getpwall() if e.pw_uid in uids]
    if taken:
        raise RunAsError("run_as_range_taken",
                         f"--run-as-range {uids.text()} holds uid {min(taken)} of user "
                         f"{pwd.getpwuid(min(taken)).pw_name}: the range must have no "
                         "passwd entries (it is the worker's alone)")
    groups = [e.gr_gid for e in grp.getgrall() if e.gr_gid in uids]
    if groups:
        raise RunAsError("run_as_range_taken",
                         f"--run-as-range {uids.text()} holds gid {min(groups)} of group "
                         f"{grp.getgrgid(min(groups)).gr_name}: the range must have no group "
                         "entries (a run's gid is its uid)")  # fmt: skip


def check_owners(uids: UidRange, named: Sequence[tuple[str, str]]) -> None:
    """Refuse when a file of the worker's (or anything below it) belongs to a
    uid or gid of the range: the probe as one uid would not speak for it."""
    from qinglong.worker.run_as import private_tree

    for what, path in named:
        for item in private_tree(path):
            try:
                st = os.lstat(item)
            except OSError:
                continue
            if st.st_uid in uids or st.st_gid in uids:
                raise RunAsError("run_as_range_owns_worker_file",
                                 f"the {what} {item} belongs to uid {st.st_uid} / gid "
                                 f"{st.st_gid}, inside --run-as-range {uids.text()}")  # fmt: skip


def _status_uids(pid: str) -> set[int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return {int(v) for v in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def owners(uids: UidRange) -> set[int]:
    """The uids of the range that some live process runs as (any of its four uids)."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            found.update(uid for uid in _status_uids(name) if uid in uids)
    return found


@dataclass
class UidPool:
    """The range's uids: free, leased to a run, or draining (see the module)."""

    uids: UidRange
    places: tuple[str, ...]  # where a run's leftovers are swept: runs dir + SHARED_PLACES
    _free: list[int] = field(default_factory=list)
    _leased: set[int] = field(default_factory=set)
    _draining: set[int] = field(default_factory=set)
    _unswept: set[int] = field(default_factory=set)  # not swept since the start
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, uids: UidRange, runs_dir: str, *, slots: int) -> UidPool:
        """At start: leftovers of the range's uids reclaimed, busy uids skipped."""
        pool = cls(uids, (runs_dir, *PRIVATE_PLACES))
        busy = owners(uids)
        pool._draining = set(busy)
        pool._free = [uid for uid in uids if uid not in busy]
        pool._unswept = set(pool._free)  # swept before first use (a crashed worker's files)
        pool._reclaim_draining()
        if len(pool._free) < slots:
            raise RunAsError("run_as_range_busy",
                             f"--run-as-range {uids.text()}: only {len(pool._free)} uids have "
                             f"no process running as them, fewer than {slots} slots")  # fmt: skip
        return pool

    def lease(self) -> RunAs | None:
        """A free uid for a run (None: every uid busy, which slots prevent)."""
        with self._lock:
            if not self._free:
                self._reclaim_draining()
            if not self._free:
                return None
            uid = self._free.pop(0)
            self._leased.add(uid)
            if uid in self._unswept:
                self._unswept.discard(uid)
                self._sweep(uid)
        return RunAs(f"uid {uid}", uid, uid)

    def release(self, uid: int) -> None:
        """The run's supervisor is gone: reclaim the uid (free once nothing runs as it)."""
        with self._lock:
            self._leased.discard(uid)
            self._draining.add(uid)
            self._reclaim_draining()

    @property
    def free_count(self) -> int:
        return len(self._free)

    def _reclaim_draining(self) -> None:
        for uid in sorted(self._draining):
            for _ in range(RECLAIM_ROUNDS):
                self._sweep(uid)
                if uid not in owners(UidRange(uid, uid)):
                    self._draining.discard(uid)
                    self._free.append(uid)
                    break

    def _sweep(self, uid: int) -> None:
        """In a child that is ``uid`` for good: kill all its processes, remove its
        entries at the top of each place."""
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                _not_dumpable()  # the worker's memory: no ptrace by the uid's processes
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)  # every process of uid but this one
                for place in self.places:
                    sweep_owned(place, uid)
                code = 0
            finally:
                os._exit(code)
        os.waitpid(pid, 0)


def _not_dumpable() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def sweep_owned(place: str, uid: int, limit: int = SWEEP_LIMIT) -> int:
    """Remove every entry directly in ``place`` owned by ``uid`` (whole, by
    descriptors, no symlink followed); returns how many were removed."""
    from qinglong.worker.process_tree import remove_entry

    try:
        fd = os.open(place, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0
    removed = 0
    try:
        with os.scandir(fd) as entries:
            names = [e.name for n, e in zip(range(limit), entries, strict=False)
                     if _owned(e, uid)]  # fmt: skip
        for name in names:
            with contextlib.suppress(OSError):
                remove_entry(fd, name)
                removed += 1
    finally:
        os.close(fd)
    return removed


def _owned(entry: os.DirEntry[str], uid: int) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_uid == uid
    except OSError:
        return False
