"""One owner per journal root: ``ROOT/owner.lock``.

Why two mechanisms, and why two owners are impossible
----------------------------------------------------

**The kernel ``flock`` is the authority.** The owner holds ``flock(LOCK_EX)`` on
the open lock file for its whole lifetime. The kernel drops it when the process
dies (SIGKILL, OOM, crash), and keeps it while the process is merely stopped
(SIGSTOP, suspend, a debugger): a stopped owner is still the owner, so a
contender gets :class:`LockHeld` — no matter how old the record is. Taking over
"because the record looks stale" while the flock is held would create exactly the
two-owner state we must exclude, so we never do that.

**The content record** ``{pid, ownerId, host, refreshedAtMs, released}`` is
refreshed every ``stale/3`` (stale default 30 s, allowed 5 s to 5 min, SPEC §6.4). It
only matters when the flock is *free*: then the previous owner either released
(``released: true``) or died. A free flock with a fresh, unreleased record whose
pid is alive (or on another host, where a local flock proves nothing, e.g. a
network file system) is refused until the record goes stale; a dead local pid
(or a zombie) lets the takeover happen at once, so a crash-restart loop does not
wait 30 s.

**Identity (inode) check.** Acquiring never writes into the inode it locked:
the new owner creates a fresh file, flocks it *before* it becomes visible,
writes its record, and ``rename``-replaces ``owner.lock`` with it; only then it
drops the old inode. Consequences:

* a contender that opened the old inode and wins its flock after we drop it
  sees that the path no longer names that inode and retries (→ ``LockHeld``);
* an owner whose lock file was deleted/replaced behind its back (an operator,
  a buggy tool) sees, on its next refresh or before its next journal write, that
  the path is not the inode it holds, or that the record's ``ownerId`` is not
  its own → :class:`LockCompromised`, sticky, fail closed.

Every journal write calls :meth:`OwnerLock.check` first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from qinglong.worker.fsio import UnsafePermissions, check_private, uuid4_text

LOCK_NAME = "owner.lock"
STALE_DEFAULT_MS = 30_000
STALE_MIN_MS = 5_000
STALE_MAX_MS = 300_000
_RECORD_LIMIT = 4096
_ACQUIRE_RETRIES = 8

Clock = Callable[[], int]


class LockError(Exception):
    """Base class of owner-lock failures (all fail closed)."""


class LockHeld(LockError):
    """Another live process owns the journal root."""


class LockCompromised(LockError):
    """The lock we hold is no longer the lock at the path, or not ours."""


def wall_clock_ms() -> int:
    # Wall clock, not monotonic: the record is compared across processes.
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class LockRecord:
    pid: int
    owner_id: str
    host: str
    refreshed_at_ms: int
    released: bool = False

    def to_bytes(self) -> bytes:
        doc = {
            "host": self.host,
            "ownerId": self.owner_id,
            "pid": self.pid,
            "refreshedAtMs": self.refreshed_at_ms,
            "released": self.released,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LockRecord | None:
        """Parse a record; None for an empty or torn one (its writer died mid-write)."""
        try:
            doc = json.loads(data)
            return cls(
                pid=int(doc["pid"]),
                owner_id=str(doc["ownerId"]),
                host=str(doc["host"]),
                refreshed_at_ms=int(doc["refreshedAtMs"]),
                released=bool(doc.get("released", False)),
            )
        except (ValueError, TypeError, KeyError):
            return None


def _pid_dead(pid: int) -> bool:
    """True only if ``pid`` is provably not a running process on this host."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # "pid (comm) S ..." — comm may contain spaces/parens; state follows the last ')'.
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"Z", b"X")  # a zombie already released its files


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read_record(fd: int) -> LockRecord | None:
    return LockRecord.from_bytes(os.pread(fd, _RECORD_LIMIT, 0))


def validate_stale_ms(stale_ms: int) -> int:
    if not STALE_MIN_MS <= stale_ms <= STALE_MAX_MS:
        raise ValueError(f"stale period must be {STALE_MIN_MS}..{STALE_MAX_MS} ms")
    return stale_ms


class OwnerLock:
    """A held owner lock. Create with :meth:`acquire`; ``release`` or use as a context."""

    def __init__(self, root: str, fd: int, owner_id: str, stale_ms: int, clock: Clock) -> None:
        self.root = root
        self.path = os.path.join(root, LOCK_NAME)
        self.owner_id = owner_id
        self.stale_ms = stale_ms
        self._fd: int | None = fd
        self._clock = clock
        self._host = os.uname().nodename
        self._mutex = threading.Lock()
        self._compromised: str | None = None
        self._last_refresh_ms = clock()
        # (size, mtime_ns, ctime_ns) of the held inode when its content was last
        # read and found ours: see _verify_locked.
        self._verified_stamp: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    # -- acquisition -------------------------------------------------------

    @classmethod
    def acquire(
        cls, root: str, *, stale_ms: int = STALE_DEFAULT_MS, clock: Clock = wall_clock_ms
    ) -> OwnerLock:
        validate_stale_ms(stale_ms)
        check_private(root, os.lstat(root), want_dir=True)
        path = os.path.join(root, LOCK_NAME)
        for _ in range(_ACQUIRE_RETRIES):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                lock = cls._try_take(root, path, fd, stale_ms, clock)
            finally:
                # Dropping the old inode also drops our flock on it (if any).
                os.close(fd)
            if lock is not None:
                return lock
        raise LockHeld("owner.lock keeps being replaced; another owner is active")

    @classmethod
    def _try_take(
        cls, root: str, path: str, fd: int, stale_ms: int, clock: Clock
    ) -> OwnerLock | None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld("journal root is owned by a live process") from None
        try:
            current = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        held = os.fstat(fd)
        if not _same_file(held, current):
            return None  # replaced between open and flock: retry on the new inode
        check_private(path, held, want_dir=False)
        cls._refuse_live_record(_read_record(fd), stale_ms, clock)
        return cls._install(root, path, stale_ms, clock)

    @staticmethod
    def _refuse_live_record(record: LockRecord | None, stale_ms: int, clock: Clock) -> None:
        if record is None or record.released:
            return
        if clock() - record.refreshed_at_ms >= stale_ms:
            return  # stale and the flock is free: the owner is gone
        if record.host == os.uname().nodename and record.pid != os.getpid():
            if _pid_dead(record.pid):
                return  # flock free + dead pid: it crashed; no need to wait
        raise LockHeld("lock record is fresh; retry after the stale period")

    @classmethod
    def _install(cls, root: str, path: str, stale_ms: int, clock: Clock) -> OwnerLock:
        owner_id = uuid4_text()
        temp = os.path.join(root, f".tmp-owner-{os.urandom(8).hex()}")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        new_fd = os.open(temp, flags, 0o600)
        try:
            os.fchmod(new_fd, 0o600)
            # Lock before the inode becomes visible, so nobody else can ever win it.
            fcntl.flock(new_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            record = LockRecord(os.getpid(), owner_id, os.uname().nodename, clock())
            os.write(new_fd, record.to_bytes())
            os.fsync(new_fd)
            os.rename(temp, path)
        except BaseException:
            os.close(new_fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(root)
        return cls(root, new_fd, owner_id, stale_ms, clock)

    # -- ownership checks --------------------------------------------------

    def check(self) -> None:
        """Raise :class:`LockCompromised` unless we still own the root. Call before writes."""
        with self._mutex:
            due = self._clock() - self._last_refresh_ms >= self.stale_ms // 3
            self._verify_locked(reread=due)
            if due:
                self._write_record_locked(released=False)

    def refresh(self) -> None:
        with self._mutex:
            self._verify_locked(reread=True)
            self._write_record_locked(released=False)

    def _fail(self, why: str) -> LockCompromised:
        self._compromised = why
        return LockCompromised(why)

    def _verify_locked(self, *, reread: bool = True) -> None:
        """The path still names the inode we hold, and its record is ours.

        The record is read again only when the inode changed since it was last
        found ours — any write changes its mtime/ctime (ctime cannot be set
        from user space) — or when ``reread`` asks: a journal write checks
        before every write (``check``, ~9 per delivered offer), and the read +
        parse was most of that check's cost. A foreign write landing in the
        same timestamp tick as the write we verified, at the same size, would
        not show in the stamp; the refresher (every stale/3) and ``release``
        always re-read, so such a write is found within one refresh period.
        """
        if self._compromised is not None:
            raise LockCompromised(self._compromised)
        if self._fd is None:
            raise LockCompromised("owner lock was released")
        held = os.fstat(self._fd)
        try:
            current = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            raise self._fail("owner.lock was removed") from None
        if held.st_nlink == 0 or not _same_file(held, current):
            raise self._fail("owner.lock was replaced by another inode")
        stamp = (held.st_size, held.st_mtime_ns, held.st_ctime_ns)
        if not reread and stamp == self._verified_stamp:
            return
        record = _read_record(self._fd)
        if record is None or record.owner_id != self.owner_id:
            raise self._fail("owner.lock names another owner")
        # Taken before the read: a write racing it changes the stamp, so the
        # next check reads again.
        self._verified_stamp = stamp

    def _write_record_locked(self, *, released: bool) -> None:
        assert self._fd is not None
        now = self._clock()
        data = LockRecord(os.getpid(), self.owner_id, self._host, now, released).to_bytes()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))
        os.fsync(self._fd)
        self._last_refresh_ms = now
        # Our own write: the next check re-reads it once (the stamp changed).
        self._verified_stamp = None

    # -- refresher ---------------------------------------------------------

    def start_refresher(self, interval_s: float | None = None) -> None:
        """Refresh every stale/3 on a daemon thread (the lock's only timer)."""
        if self._refresher is not None:
            return
        period = interval_s if interval_s is not None else self.stale_ms / 3000
        thread = threading.Thread(
            target=self._refresh_loop, args=(period,), name="ql-owner-lock", daemon=True
        )
        self._refresher = thread
        thread.start()

    def _refresh_loop(self, period: float) -> None:
        while not self._stop.wait(period):
            try:
                self.refresh()
            except LockError:
                return  # sticky: every later check() raises
            except OSError as exc:
                with self._mutex:
                    self._compromised = f"refresh failed: {exc.strerror}"
                return

    @property
    def compromised(self) -> bool:
        return self._compromised is not None

    # -- release -----------------------------------------------------------

    def release(self) -> None:
        """Mark the record released (instant takeover) and drop the flock."""
        self._stop.set()
        if self._refresher is not None and self._refresher is not threading.current_thread():
            self._refresher.join()
        with self._mutex:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                if self._compromised is None:
                    self._fd = fd
                    try:
                        self._verify_locked()
                        self._write_record_locked(released=True)
                    except (LockError, OSError):
                        pass  # not ours any more: leave the file alone
                    finally:
                        self._fd = None
            finally:
                os.close(fd)

    def __enter__(self) -> OwnerLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "LOCK_NAME",
    "STALE_DEFAULT_MS",
    "STALE_MAX_MS",
    "STALE_MIN_MS",
    "LockCompromised",
    "LockError",
    "LockHeld",
    "LockRecord",
    "OwnerLock",
    "UnsafePermissions",
]
