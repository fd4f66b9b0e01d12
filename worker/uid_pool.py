"""A uid of its own for every concurrent run: ``--run-as-range FIRST-LAST`` (SPEC §14.4).

Decisions:

* **The range is the worker's alone.** A uid (or the gid of the same number)
  with a ``passwd`` (``group``) entry refuses the start, as does a range that
  holds 0, the worker's own uid, or is narrower than the worker's slots. Two
  workers on one machine need ranges that do not overlap.
* **Lease.** A run takes a free uid (its gid is the same number, no
  supplementary groups). A uid that owns a (live) process at start — whose,
  the worker cannot know — is skipped, never killed, and becomes usable once
  nothing runs as it (looked at when no other uid is free); a start with
  fewer uids free of processes than slots is refused (``run_as_range_busy``).
* **Reclaim.** When a run ends its uid is *draining*: a child that takes the
  uid for good SIGKILLs everything that uid runs (``kill(-1)``: with a uid of
  its own that is exactly the run's leftovers, never another run's or the
  worker's — a supervisor keeps the worker's real and saved uid) and removes
  what the uid owns at the top of the shared places (the runs directory,
  ``/tmp``, ``/var/tmp``, ``/dev/shm``: entries owned by it, whole, without
  following a symlink, bounded by :data:`SWEEP_LIMIT` entries per place).
  The uid is free again only once ``/proc`` shows no live process with it as
  real, effective, saved or filesystem uid (a zombie holds nothing but its
  pid). Files of a range's uid found at start (a crashed worker's runs) are
  swept the same way before the uid's first lease.
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import os
import pwd
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from qinglong.worker.process_tree import remove_entry
from qinglong.worker.run_as import RunAs, RunAsError, private_tree

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
EXIT_WAIT_S = 1.0  # after a reclaim's SIGKILL: how long to wait for the uid's processes to end


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
        raise RunAsError(
            "invalid_run_as_range",
            f"--run-as-range {text!r}: need 1 <= UID_FIRST <= UID_LAST <= {UID_MAX}",
        )
    return UidRange(first, last)


def check_range(uids: UidRange, *, slots: int, euid: int) -> None:
    """Refuse a range that is too narrow or not the worker's alone."""
    if len(uids) < slots:
        raise RunAsError(
            "run_as_range_too_small",
            f"--run-as-range {uids.text()} holds {len(uids)} uids, fewer than "
            f"the worker's {slots} slots: every concurrent run needs its own",
        )
    if euid in uids:
        raise RunAsError(
            "run_as_range_invalid",
            f"--run-as-range {uids.text()} holds the worker's own uid {euid}",
        )
    taken = [e.pw_uid for e in pwd.getpwall() if e.pw_uid in uids]
    if taken:
        raise RunAsError(
            "run_as_range_taken",
            f"--run-as-range {uids.text()} holds uid {min(taken)} of user "
            f"{pwd.getpwuid(min(taken)).pw_name}: the range must have no "
            "passwd entries (it is the worker's alone)",
        )
    groups = [e.gr_gid for e in grp.getgrall() if e.gr_gid in uids]
    if groups:
        raise RunAsError("run_as_range_taken",
                         f"--run-as-range {uids.text()} holds gid {min(groups)} of group "
                         f"{grp.getgrgid(min(groups)).gr_name}: the range must have no group "
                         "entries (a run's gid is its uid)")  # fmt: skip


def check_owners(uids: UidRange, named: Sequence[tuple[str, str]]) -> None:
    """Refuse when a file of the worker's (or anything below it) belongs to a
    uid or gid of the range: the probe as one uid would not speak for it."""
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
    """A live process's four uids (a zombie's: none — it holds nothing but its pid)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                    return set()
                if line.startswith("Uid:"):
                    return {int(v) for v in line.split()[1:]}
    except (OSError, ValueError, IndexError):
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
    _draining: set[int] = field(default_factory=set)  # a run of ours ended: reclaim
    _foreign: set[int] = field(default_factory=set)  # busy at start: not ours to kill
    _unswept: set[int] = field(default_factory=set)  # not swept since the start
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, uids: UidRange, runs_dir: str, *, slots: int) -> UidPool:
        """At start: busy uids skipped (never killed: whose processes they are is
        not known), the others swept before first use (a crashed worker's files)."""
        pool = cls(uids, (runs_dir, *PRIVATE_PLACES))
        busy = owners(uids)
        pool._foreign = set(busy)
        pool._free = [uid for uid in uids if uid not in busy]
        pool._unswept = set(pool._free)
        if len(pool._free) < slots:
            raise RunAsError("run_as_range_busy",
                             f"--run-as-range {uids.text()}: only {len(pool._free)} uids have "
                             f"no process running as them, fewer than {slots} slots")  # fmt: skip
        return pool

    def lease(self) -> RunAs | None:
        """A free uid for a run (None: every uid busy, which slots prevent)."""
        with self._lock:
            if not self._free:
                for uid in sorted(self._draining):
                    self._reclaim(uid)
                self._adopt_foreign()
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
            self._reclaim(uid)

    @property
    def free_count(self) -> int:
        return len(self._free)

    def _reclaim(self, uid: int) -> None:
        """Kill and sweep until nothing runs as ``uid`` (then free), a few rounds;
        still busy: it stays draining, tried again when no uid is free."""
        for _ in range(RECLAIM_ROUNDS):
            self._sweep(uid)
            if _gone(uid, EXIT_WAIT_S / RECLAIM_ROUNDS):
                self._draining.discard(uid)
                self._free.append(uid)
                return

    def _adopt_foreign(self) -> None:
        """Uids busy at start whose processes have all ended become usable."""
        idle = self._foreign - owners(self.uids)
        self._foreign -= idle
        self._free.extend(sorted(idle))
        self._unswept |= idle

    def _sweep(self, uid: int) -> None:
        """In a child that is ``uid`` for good: kill all its processes, remove its
        entries at the top of each place. The places are opened before the
        switch (the runs directory is not listable by the uid; a descriptor
        opened by the worker lists it), everything after it is done as the uid."""
        fds = [fd for fd in map(_open_place, self.places) if fd is not None]
        try:
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        if pid == 0:
            code = 1
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                _not_dumpable()  # the worker's memory: no ptrace by the uid's processes
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)  # every process of uid but this one
                for fd in fds:
                    sweep_owned(fd, uid)
                code = 0
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)


def _gone(uid: int, timeout_s: float) -> bool:
    """No live process runs as ``uid`` (waiting up to ``timeout_s`` for the killed)."""
    deadline = time.monotonic() + timeout_s
    while uid in owners(UidRange(uid, uid)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _open_place(place: str) -> int | None:
    try:
        return os.open(place, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def _not_dumpable() -> None:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def sweep_owned(fd: int, uid: int, limit: int = SWEEP_LIMIT) -> int:
    """Remove every entry directly in the directory ``fd`` owned by ``uid``
    (whole, by descriptors, no symlink followed); returns how many were removed.
    All it needs is imported already: the uid may not read the interpreter's files."""
    removed = 0
    os.lseek(fd, 0, os.SEEK_SET)
    with os.scandir(fd) as entries:
        names = [e.name for _n, e in zip(range(limit), entries, strict=False)
                 if _owned(e, uid)]  # fmt: skip
    for name in names:
        with contextlib.suppress(OSError):
            remove_entry(fd, name)
            removed += 1
    return removed


def _owned(entry: os.DirEntry[str], uid: int) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_uid == uid
    except OSError:
        return False
