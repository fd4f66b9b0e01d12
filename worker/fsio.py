"""Durable file primitives for the worker journal.

Every mutating system call goes through a :class:`FileSystem` object and is
reported as a named :class:`Step` before it runs. Production uses the default
(real ``os`` calls, no hook); fault-injection tests pass a hook that raises at
step N — an ``OSError`` to simulate a failing call, or a ``BaseException`` to
simulate the process dying on the spot (no cleanup runs).

Lifecycles (SPEC §6.4):

* first publish: CREATE_TEMP, WRITE_TEMP, FSYNC_TEMP, CLOSE_TEMP, LINK_FINAL,
  UNLINK_TEMP, FSYNC_DIR — ``link`` never replaces an existing final name.
* update: CREATE_TEMP, WRITE_TEMP, FSYNC_TEMP, CLOSE_TEMP, REPLACE_FINAL,
  FSYNC_DIR — ``rename`` is atomic, readers see the old or the new bytes.
* remove: UNLINK_FINAL, FSYNC_DIR.
* directory: MKDIR, FSYNC_DIR (of the parent, so the new name is durable).

Temporary files are named ``.tmp-*`` in the same directory as the final name
(``link``/``rename`` must not cross file systems) and are swept on open.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

TEMP_PREFIX = ".tmp-"
FILE_MODE = 0o600
DIR_MODE = 0o700


class Step(StrEnum):
    CREATE_TEMP = "create_temp"
    WRITE_TEMP = "write_temp"
    FSYNC_TEMP = "fsync_temp"
    CLOSE_TEMP = "close_temp"
    LINK_FINAL = "link_final"
    REPLACE_FINAL = "replace_final"
    UNLINK_TEMP = "unlink_temp"
    UNLINK_FINAL = "unlink_final"
    FSYNC_DIR = "fsync_dir"
    MKDIR = "mkdir"


StepHook = Callable[[Step, str], None]


class FileSystem:
    """The syscalls the journal needs; ``hook`` sees each step before it runs."""

    def __init__(self, hook: StepHook | None = None) -> None:
        self._hook = hook

    def _step(self, step: Step, path: str) -> None:
        if self._hook is not None:
            self._hook(step, path)

    def create_exclusive(self, path: str, mode: int = FILE_MODE) -> int:
        self._step(Step.CREATE_TEMP, path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, mode)
        # umask may have removed bits but never adds any; pin the exact mode.
        os.fchmod(fd, mode)
        return fd

    def write_all(self, fd: int, data: bytes, path: str) -> None:
        self._step(Step.WRITE_TEMP, path)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def fsync(self, fd: int, path: str) -> None:
        self._step(Step.FSYNC_TEMP, path)
        os.fsync(fd)

    def close(self, fd: int, path: str) -> None:
        self._step(Step.CLOSE_TEMP, path)
        os.close(fd)

    def link(self, src: str, dst: str) -> None:
        self._step(Step.LINK_FINAL, dst)
        os.link(src, dst, follow_symlinks=False)

    def replace(self, src: str, dst: str) -> None:
        self._step(Step.REPLACE_FINAL, dst)
        os.replace(src, dst)

    def unlink_temp(self, path: str) -> None:
        self._step(Step.UNLINK_TEMP, path)
        os.unlink(path)

    def unlink_final(self, path: str) -> None:
        self._step(Step.UNLINK_FINAL, path)
        os.unlink(path)

    def mkdir(self, path: str, mode: int = DIR_MODE) -> None:
        self._step(Step.MKDIR, path)
        os.mkdir(path, mode)
        os.chmod(path, mode)  # umask may have dropped owner bits

    def fsync_dir(self, path: str) -> None:
        self._step(Step.FSYNC_DIR, path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


REAL_FS = FileSystem()


def uuid4_text() -> str:
    """A random (version 4) UUID in canonical lowercase text, as ``str(uuid.uuid4())``
    makes it; ``uuid`` itself would load ``platform`` and libuuid (docs/EDGE.md)."""
    raw = bytearray(os.urandom(16))  # = secrets.token_bytes, without hashlib
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _temp_path(directory: str) -> str:
    return os.path.join(directory, f"{TEMP_PREFIX}{os.urandom(8).hex()}")


def _discard(fs: FileSystem, path: str) -> None:
    """Best-effort removal of a temp file after a failed step."""
    try:
        fs.unlink_temp(path)
    except OSError:
        pass  # the sweep on next open removes it


def write_temp(fs: FileSystem, directory: str, data: bytes) -> str:
    """Write ``data`` to a fresh 0600 temp file in ``directory``, fsynced and closed."""
    path = _temp_path(directory)
    fd = fs.create_exclusive(path)
    try:
        fs.write_all(fd, data, path)
        fs.fsync(fd, path)
    except Exception:
        os.close(fd)
        _discard(fs, path)
        raise
    try:
        fs.close(fd, path)
    except Exception:
        _discard(fs, path)
        raise
    return path


def publish_new(fs: FileSystem, directory: str, name: str, data: bytes) -> None:
    """Publish ``data`` under ``name``; ``FileExistsError`` if the name exists."""
    link_new(fs, directory, name, data)
    fs.fsync_dir(directory)


def link_new(fs: FileSystem, directory: str, name: str, data: bytes) -> None:
    """:func:`publish_new` without the directory fsync: the caller fsyncs
    ``directory`` once for several names (a batched pull, SPEC §18.2) before
    anything depends on them."""
    temp = write_temp(fs, directory, data)
    final = os.path.join(directory, name)
    try:
        fs.link(temp, final)
    except Exception:
        _discard(fs, temp)
        raise
    # The final name now holds complete, fsynced bytes; the temp name is garbage.
    _discard(fs, temp)


def update_file(fs: FileSystem, directory: str, name: str, data: bytes) -> None:
    """Atomically replace (or create) ``name`` with ``data``."""
    temp = write_temp(fs, directory, data)
    try:
        fs.replace(temp, os.path.join(directory, name))
    except Exception:
        _discard(fs, temp)
        raise
    fs.fsync_dir(directory)


def remove_file(fs: FileSystem, directory: str, name: str) -> bool:
    """Remove ``name`` durably; False if it did not exist."""
    try:
        fs.unlink_final(os.path.join(directory, name))
    except FileNotFoundError:
        return False
    fs.fsync_dir(directory)
    return True


def sweep_temp_files(fs: FileSystem, directory: str) -> list[str]:
    """Remove leftover ``.tmp-*`` files (from crashes); returns the names removed."""
    removed: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith(TEMP_PREFIX) and not entry.is_dir(follow_symlinks=False):
                try:
                    fs.unlink_temp(entry.path)
                except FileNotFoundError:
                    continue
                removed.append(entry.name)
    if removed:
        fs.fsync_dir(directory)
    return removed


@dataclass(frozen=True)
class FileRead:
    data: bytes
    mode: int
    uid: int
    size: int


class FileTooLarge(OSError):
    """A file is larger than the caller's limit (nothing past the limit is read)."""


def read_file_capped(path: str, limit: int) -> FileRead:
    """Read a regular file (no symlinks) of at most ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file: {os.path.basename(path)}")
        if st.st_size > limit:
            raise FileTooLarge(f"file exceeds {limit} bytes: {os.path.basename(path)}")
        chunks: list[bytes] = []
        remaining = limit + 1  # one extra byte detects growth after fstat
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise FileTooLarge(f"file exceeds {limit} bytes: {os.path.basename(path)}")
        return FileRead(data=data, mode=stat.S_IMODE(st.st_mode), uid=st.st_uid, size=len(data))
    finally:
        os.close(fd)


class UnsafePermissions(Exception):
    """A journal path is not private to this user (fail closed, never chmod it)."""


def check_private(path: str, st: os.stat_result, *, want_dir: bool) -> None:
    """Refuse anything not owned by us, with group/other bits, or of the wrong type."""
    name = os.path.basename(path) or path
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise UnsafePermissions(f"not a directory (or a symlink): {name}")
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise UnsafePermissions(f"not a regular file: {name}")
    if st.st_uid != os.geteuid():
        raise UnsafePermissions(f"not owned by this user: {name}")
    if st.st_mode & 0o077:
        raise UnsafePermissions(f"group/other permission bits set: {name}")


def ensure_private_dir(fs: FileSystem, path: str) -> None:
    """Create ``path`` as 0700 if missing; refuse an existing unsafe one."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        fs.mkdir(path, DIR_MODE)
        fs.fsync_dir(os.path.dirname(os.path.abspath(path)))
        st = os.lstat(path)
    check_private(path, st, want_dir=True)
