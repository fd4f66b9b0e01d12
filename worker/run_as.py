"""Whom commands run as, and the start-time checks that make it safe (SPEC §11).

``qinglong worker run --execute --run-as USER``. The decisions, in order
(:func:`decide`); every refusal is a :class:`RunAsError` and the worker exits 2:

* ``--execute`` without ``--run-as``: refused, for every worker (a command
  run as the worker's own user could read its journal, credential, key and
  configuration).
* ``--run-as root`` (or 0) is the explicit way to accept running tasks as root;
  only a worker that is root may do it. ``--run-as`` the worker's own user (not
  root) is the explicit way to accept no isolation at all (development); the
  worker says so loudly at start (``worker.unisolated``).
* Switching needs root or both ``CAP_SETUID`` and ``CAP_SETGID`` in the
  effective set (a systemd unit's ``AmbientCapabilities=``); otherwise refused.
* The journal (with every file in it), the work directory of output logs, the
  credential file, the key and the configuration must not be readable by USER.
  This is probed for real: a forked child takes USER's identity and tries to
  open each one (modes, owners, ACLs and every parent directory count as the
  kernel counts them). Any success refuses the start, naming the file.
* The runs directory must be reachable by USER (every directory above it
  searchable, itself writable): ``HOME`` is the run's directory there. Probed
  as USER too; a 0700 ancestor (systemd's default ``StateDirectoryMode=``)
  refuses the start.
* Every directory the worker creates or re-modes at start (the work directory,
  :func:`prepare_private_dir`; the runs directory, :func:`prepare_runs_dir`)
  is prepared *before* these probes, so they judge the final permissions.

``--run-as-range FIRST-LAST`` instead gives every concurrent run a uid of its
own (SPEC §14.4, worker/uid_pool.py); the same probes then run as the range's
first uid (worker/cli.py says why that speaks for every uid of the range).

Light (``pwd``, ``os``): imported by the CLI before the executor loads.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qinglong.worker.run_limits import Limits
    from qinglong.worker.uid_pool import UidPool

__all__ = [
    "CAP_SETGID",
    "CAP_SETUID",
    "RUNS_MODE_PRIVATE",
    "RUNS_MODE_SHARED",
    "RunAs",
    "RunAsError",
    "Sandbox",
    "check_runs_dir_reachable",
    "check_unreadable",
    "decide",
    "effective_capabilities",
    "ensure_unprivileged_user",
    "local_run_as",
    "may_switch",
    "prepare_private_dir",
    "prepare_runs_dir",
    "readable_by",
    "resolve_user",
]

CAP_SETGID = 6
CAP_SETUID = 7
RUNS_MODE_SHARED = 0o1733  # run-as user: may create its run's directory, not list
RUNS_MODE_PRIVATE = 0o700  # commands run as the worker itself
DEFAULT_RUN_USER = "qlrun"


class RunAsError(Exception):
    """The worker must not start its executor; ``reason`` is a short category."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class RunAs:
    name: str
    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0


@dataclass(frozen=True)
class Sandbox:
    """Where and as whom the executor runs commands.

    ``run_as`` None: the worker's own identity (a non-root worker without
    ``--run-as``, or ``--run-as root`` by root). ``runs_dir``: the parent of the
    per-run directories. ``pool`` (``--run-as-range``, SPEC §14.4): every run
    leases a uid of its own instead of ``run_as``. ``limits``: the per-run
    limits of a switching sandbox (worker/run_limits.py). ``private_places``:
    the shared places (``/tmp``, ``/var/tmp``, ``/dev/shm``) a run gets fresh
    in a mount namespace of its own (empty: not permitted, or no range)."""

    runs_dir: str
    run_as: RunAs | None = None
    pool: UidPool | None = None
    limits: Limits | None = None
    private_places: tuple[str, ...] = ()

    @property
    def switches(self) -> bool:
        return self.run_as is not None or self.pool is not None


def resolve_user(text: str) -> RunAs:
    """A user by name, or by numeric uid."""
    try:
        entry = pwd.getpwuid(int(text, 10)) if text.isdigit() else pwd.getpwnam(text)
    except (KeyError, ValueError, OverflowError):
        raise RunAsError("unknown_user", f"--run-as {text!r}: no such user") from None
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)


def effective_capabilities(status_path: str = "/proc/self/status") -> int:
    """The CapEff bit mask of this process (0 when unknown)."""
    try:
        with open(status_path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def may_switch(euid: int, capabilities: int) -> bool:
    """Root, or both CAP_SETUID and CAP_SETGID effective."""
    wanted = (1 << CAP_SETUID) | (1 << CAP_SETGID)
    return euid == 0 or capabilities & wanted == wanted


def decide(run_as: str | None, *, euid: int, capabilities: int) -> RunAs | None:
    """The identity commands switch to (None: keep the worker's), or refuse."""
    if run_as is None:
        raise RunAsError(
            "run_as_required",
            "--execute needs --run-as USER, an unprivileged user that is not the worker's "
            "(--run-as root, or the worker's own user, accepts running tasks unisolated)",
        )
    target = resolve_user(run_as)
    if target.is_root:
        if euid != 0:
            raise RunAsError("run_as_root_refused", "--run-as root needs a worker running as root")
        return None  # explicit: tasks run as root
    if target.uid == euid:
        return None  # explicit: tasks run as the worker itself, unisolated
    if not may_switch(euid, capabilities):
        raise RunAsError(
            "no_privilege_to_switch",
            f"--run-as {target.name} needs root or CAP_SETUID+CAP_SETGID "
            "(systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID)",
        )
    return target


def readable_by(user: RunAs, paths: Sequence[str]) -> list[str]:
    """The paths ``user`` can open for reading, probed in a child with its identity."""
    return [paths[i] for i in _probe_as(user, paths, _opens)]


def _probe_as(user: RunAs, paths: Sequence[str], test: Callable[[str], bool]) -> list[int]:
    """Indexes of the paths passing ``test`` in a child that took ``user``'s identity."""
    if not paths:
        return []
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: drop to the user for good, try, report indexes
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            hits = [str(i) for i, path in enumerate(paths) if test(path)]
            os.write(write_fd, " ".join(hits).encode() + b"\n")
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        data = reader.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not data.endswith(b"\n"):
        raise RunAsError("probe_failed", f"could not take the identity of {user.name}")
    return [int(i) for i in data.split()]


def _usable_dir(path: str) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def check_runs_dir_reachable(user: RunAs, path: str) -> None:
    """Refuse unless ``user`` can reach the runs directory and create in it."""
    if not _probe_as(user, [path], _usable_dir):
        raise RunAsError(
            "runs_dir_unreachable",
            f"{path} is not reachable by {user.name}, so its runs' directories (their HOME) "
            "would be unusable: every directory above it must be searchable by others "
            "(mode 0711; systemd: StateDirectoryMode=0711)",
        )


def _opens(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def private_tree(root: str) -> list[str]:
    """``root`` and everything below it (no symlink followed); missing: []."""
    if not os.path.lexists(root):
        return []
    found = [root]
    for parent, dirs, files in os.walk(root):
        found.extend(os.path.join(parent, name) for name in (*dirs, *files))
    return found


def check_unreadable(user: RunAs, named: Sequence[tuple[str, str]]) -> None:
    """Refuse when ``user`` can read any (what, path) given, or anything below it."""
    paths: list[str] = []
    owner: dict[str, str] = {}
    for what, path in named:
        for item in private_tree(path):
            paths.append(item)
            owner.setdefault(item, what)
    leaked = readable_by(user, paths)
    if leaked:
        path = leaked[0]
        mode = os.lstat(path).st_mode & 0o7777
        raise RunAsError(
            "readable_by_run_as",
            f"the {owner[path]} {path} (mode {mode:04o}) is readable by {user.name}: "
            "make it and its directories private to the worker",
        )


def prepare_private_dir(path: str) -> None:
    """Create the work directory (0700), or tighten an existing one of ours that is
    too open (umask) — what the executor does when it starts, done first."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid():
            raise RunAsError("work_dir_unusable", f"{path} is not a directory owned by the worker")
        if st.st_mode & 0o077:
            os.chmod(path, 0o700)  # tighten, never loosen
    except OSError as exc:
        raise RunAsError("work_dir_unusable", f"{path}: {exc.strerror}") from None


def prepare_runs_dir(path: str, *, shared: bool) -> None:
    """Create or adopt the runs directory: ours, a real directory, the right mode."""
    mode = RUNS_MODE_SHARED if shared else RUNS_MODE_PRIVATE
    try:
        # Missing parents: private to the worker, but searchable (not listable)
        # by the run-as user, who must reach its run's directory.
        os.makedirs(os.path.dirname(path), mode=0o711 if shared else 0o700, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise RunAsError("runs_dir_unusable", f"{path}: {exc.strerror}") from None
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.geteuid():
        raise RunAsError("runs_dir_unusable", f"{path} is not a directory owned by the worker")
    os.chmod(path, mode)


def local_run_as() -> str:
    """The ``--run-as`` of a demo, benchmark or test worker on this machine: as
    root an unprivileged user (:func:`ensure_unprivileged_user`); otherwise the
    worker's own user, which accepts running tasks unisolated (development)."""
    if os.geteuid() == 0:
        return ensure_unprivileged_user()
    return pwd.getpwuid(os.geteuid()).pw_name


def ensure_unprivileged_user(name: str = DEFAULT_RUN_USER) -> str:
    """For root-run demos and tests: ``name`` (created as a permanent system
    user when missing — README says so), else ``nobody``. Never root."""
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        pass
    import subprocess

    try:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", "--user-group", name],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        pwd.getpwnam(name)
        return name
    except (OSError, subprocess.SubprocessError, KeyError):
        return "nobody"
