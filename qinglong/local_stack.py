"""One local QingLong stack, started the same way by `qinglong dev up` and `qinglong demo`.

`LocalStack.start(plan)` runs the steps in one order:

    PostgreSQL (the plan starts or names it) -> database created + migrated
    -> login roles -> dev CA + server certificate -> KEK file
    -> the plan's identities (workers) -> ingress (+ admin) -> sweeper -> producer API

and keeps the facts the callers need in `StackFacts` (cluster, DSNs, PKI paths,
KEK, URLs, the services' pids). What differs between the callers is the plan
(`StackPlan`): where the cluster lives, each service's config and readiness,
what is printed. Every child runs in its own session (process group); its pid
and kernel start time go to `record` before anyone waits for it, so `dev up`'s
dev-state.json lets a later `dev down` (another process) rebuild the stack
(`LocalStack.from_record`) and tear it down.

Teardown is ordered and idempotent: `stop_services` (SIGTERM to every service
group still ours, then SIGKILL what is left; database clients before their
database), then `stop_postgres` (pg_ctl stop, SIGQUIT to a postmaster that
ignored it, remove the cluster's directory; on a server we did not start, drop
our database). Each forgets what it stopped, so a second call does nothing.
The callers' own files (dev up's state dir, the demo's working dirs) stay theirs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from qinglong.throwaway_postgres import Auth, ThrowawayPostgres, _run_as

STOP_TIMEOUT_S = 10.0
KEK_FILE = "kek.key"
SWEEP_EVERY = "1s"
# sockaddr_un.sun_path is 108 bytes including the NUL.
_MAX_SOCKET_PATH = 107
T = TypeVar("T")

# record(**facts): where a caller keeps what teardown from another process needs
# (dev up: dev-state.json); the demo tears down from memory and records nothing.
Record = Callable[..., None]


def _no_record(**_facts: Any) -> None:
    return None


# ----------------------------------------------------------------- processes


def proc_start_time(pid: int) -> str | None:
    """Kernel start time of pid (field 22 of /proc/pid/stat): tells pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def alive(pid: int) -> bool:
    """Running and not a zombie (a reaped-later child of a dead `up` is gone for us)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def popen(
    argv: list[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    pipe: bool = False,
) -> subprocess.Popen[bytes]:
    """A child in its own session (process group: a terminal's Ctrl-C reaches only
    us, and stopping it signals whatever it spawned); stdout (and stderr, unless
    `pipe`) appended to log_path."""
    with open(log_path, "ab") as log:  # the child has its own copy of the descriptor
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.PIPE if pipe else log,
            start_new_session=True,
            close_fds=True,
        )


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


@dataclass
class Service:
    """One child the stack started. `process` is set while we are its parent;
    a service rebuilt from a record has only its pid, start time and `marker`
    (the file its command line names), which tell it apart from a recycled pid."""

    name: str
    pid: int
    log_path: Path
    start_time: str | None = None
    marker: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def exited(self) -> bool:
        if self.process is not None:
            return self.process.poll() is not None
        return not alive(self.pid)

    def ours(self) -> bool:
        """Still running, and still the process we started."""
        if self.process is not None:
            return self.process.poll() is None
        if not alive(self.pid):
            return False
        if self.start_time is not None and proc_start_time(self.pid) != self.start_time:
            return False
        if self.marker is None:
            return True
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self.marker).encode() in cmdline

    def wait(self, timeout_s: float) -> None:
        if self.process is not None:  # also reaps it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout_s)
            return
        deadline = time.monotonic() + timeout_s
        while alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def stop_services(services: Sequence[Service], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every group still ours, in the given order; wait; SIGKILL what is left."""
    running = [service for service in services if service.ours()]
    for service in running:
        signal_group(service.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for service in running:
        service.wait(max(0.1, deadline - time.monotonic()))
    for service in running:
        if not service.exited():
            signal_group(service.pid, signal.SIGKILL)
            service.wait(5)


def log_tail(path: Path, max_bytes: int = 1500) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-max_bytes:]
    return ""


# ------------------------------------------------------------------ postgres


class PersistentPostgres(ThrowawayPostgres):
    """A ThrowawayPostgres in a directory we choose, which nobody deletes at exit.

    The harness's start() always uses a fresh mkdtemp and honours QL_TEST_DSN;
    `dev up` needs a known, persistent location instead.
    """

    def start_in(self, base_dir: Path) -> PersistentPostgres:
        import pwd

        self.existing_dsn = None
        self._owned = True
        self.base_dir = base_dir
        base_dir.mkdir(mode=0o700, exist_ok=True)
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        os_user = _run_as()
        if os_user is not None:
            entry = pwd.getpwnam(os_user)
            for path in (self.base_dir, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            self.superuser = os_user
        else:
            self.superuser = pwd.getpwuid(os.geteuid()).pw_name
        self._initdb(os_user)
        self._pg_ctl_start(os_user)
        return self


def _reachable_by(path: Path, uid: int, gid: int) -> bool:
    """Can OS user uid/gid traverse every directory down to `path`?"""
    for directory in (path, *path.parents):
        st = directory.stat()
        if st.st_uid == uid:
            bit = 0o100
        elif st.st_gid == gid:
            bit = 0o010
        else:
            bit = 0o001
        if not st.st_mode & bit:
            return False
    return True


def cluster_base_dir(state_dir: Path) -> Path:
    """state_dir/pg, unless the `postgres` OS user cannot reach it (root + a 0700
    parent) or its socket path would be too long: then a private temp dir."""
    preferred = state_dir / "pg"
    fits = len(str(preferred / "sock" / ".s.PGSQL.65535")) <= _MAX_SOCKET_PATH
    os_user = _run_as()
    reachable = True
    if os_user is not None:
        import pwd

        entry = pwd.getpwnam(os_user)
        reachable = _reachable_by(state_dir, entry.pw_uid, entry.pw_gid)
    if fits and reachable:
        return preferred
    return Path(tempfile.mkdtemp(prefix="qinglong-dev-pg-"))


def postmaster_pid(base_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((base_dir / "data" / "postmaster.pid").read_text().splitlines()[0])
    return None


def _ours_postmaster(pid: int, base_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(base_dir / "data").encode() in cmdline


@dataclass(frozen=True)
class LoginRole:
    """A LOGIN role the stack creates, a member of `group` only."""

    name: str
    group: str


@dataclass(frozen=True)
class Dsns:
    """The database's DSNs; under SCRAM each carries its login's generated
    password (so never in a repr)."""

    admin: str = field(repr=False)  # the superuser's (or the caller's --dsn)
    logins: Mapping[str, str] = field(repr=False)  # purpose -> its login's DSN

    def login(self, purpose: str) -> str:
        return self.logins[purpose]


def prepare_database(cluster: Any, database: str, roles: Mapping[str, LoginRole]) -> Dsns:
    """Create + migrate `database`, then its login roles in order; their DSNs.
    `cluster` needs create_database and ensure_login_role (a ThrowawayPostgres)."""
    from qinglong.db.migrator import migrate

    dsn = cluster.create_database(database)
    migrate(dsn)
    return Dsns(
        dsn,
        {
            purpose: cluster.ensure_login_role(role.name, role.group, database)
            for purpose, role in roles.items()
        },
    )


# ----------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class Pki:
    """The dev CA and the server certificate of the ingress and the API."""

    ca_dir: Path
    ca_file: Path
    cert_file: Path
    key_file: Path

    def tls(self) -> dict[str, str]:
        return {
            "certFile": str(self.cert_file),
            "keyFile": str(self.key_file),
            "workerCaFile": str(self.ca_file),
        }


def provision_pki(root: Path) -> Pki:
    """root/ca (the dev CA) and root/server (its server certificate, localhost)."""
    from qinglong.service import pki

    ca = pki.init_ca(root / "ca")
    server = pki.issue_server_cert(root / "ca", root / "server")
    return Pki(root / "ca", ca.cert_file, server.cert_file, server.key_file)


def create_kek(root: Path) -> Path:
    """A fresh key-encryption key of secrets (0600, never over an existing file)."""
    from qinglong.service.secrets_crypto import create_kek_file

    path = root / KEK_FILE
    create_kek_file(path)
    return path


# --------------------------------------------------------------------- stack


@dataclass
class StackFacts:
    """What a started (or recorded) stack is: what the callers need, what
    teardown stops. `cluster` None: a server we did not start (--dsn)."""

    root: Path
    database: str
    cluster: ThrowawayPostgres | None = None
    pg_pid: int | None = None
    dsns: Dsns | None = None
    pki: Pki | None = None
    kek_file: Path | None = None
    ingress_url: str = ""
    admin_url: str = ""
    services: list[Service] = field(default_factory=list)

    def service(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)


class StackPlan(Protocol):
    """What differs between the callers, at the seams of LocalStack.start."""

    def start_postgres(self, stack: LocalStack) -> None:
        """Start (stack.start_throwaway / start_persistent) or name (use_dsn) it."""

    def database_ready(self, stack: LocalStack) -> None:
        """Migrated, login roles made."""

    def pki_ready(self, stack: LocalStack) -> None:
        """CA, server certificate and KEK exist: identities (workers) now."""

    def start_ingress(self, stack: LocalStack) -> None:
        """Config + stack.launch_ingress + readiness; set the URLs in stack.facts."""

    def start_sweeper(self, stack: LocalStack) -> None:
        """stack.launch_sweeper + readiness."""

    def start_api(self, stack: LocalStack) -> None:
        """The producer API (stack.launch)."""


@dataclass
class LocalStack:
    """The stack of one caller: `start(plan)` in order, `facts`, `teardown()`."""

    root: Path  # configs, PKI, KEK, logs/
    database: str
    roles: Mapping[str, LoginRole]  # purpose -> login, created in this order
    record: Record = _no_record
    cwd: Path | None = None  # the children's working directory
    pid_files: bool = False  # also write root/<name>.pid
    facts: StackFacts = field(init=False)

    def __post_init__(self) -> None:
        self.facts = StackFacts(self.root, self.database)

    @property
    def dsns(self) -> Dsns:
        assert self.facts.dsns is not None, "the database is not prepared yet"
        return self.facts.dsns

    @property
    def pki(self) -> Pki:
        assert self.facts.pki is not None, "no PKI yet"
        return self.facts.pki

    @property
    def kek_file(self) -> Path:
        assert self.facts.kek_file is not None, "no KEK yet"
        return self.facts.kek_file

    # -- start ---------------------------------------------------------------

    def start(self, plan: StackPlan) -> StackFacts:
        """Every step in order; on failure the facts so far are what teardown stops."""
        plan.start_postgres(self)
        if self.facts.dsns is None:
            self.facts.dsns = prepare_database(self.facts.cluster, self.database, self.roles)
        plan.database_ready(self)
        self.facts.pki = provision_pki(self.root)
        self.facts.kek_file = create_kek(self.root)
        plan.pki_ready(self)
        plan.start_ingress(self)
        plan.start_sweeper(self)
        plan.start_api(self)
        return self.facts

    def start_throwaway(self) -> ThrowawayPostgres:
        """A throwaway cluster in a temp dir (honours QL_TEST_DSN: then a database
        on that server, dropped at teardown); scram on TCP with generated passwords."""
        cluster = ThrowawayPostgres(auth=Auth.SCRAM)
        self.facts.cluster = cluster  # before start: teardown removes a half-made one
        cluster.start()
        if cluster.base_dir is not None:
            self.facts.pg_pid = postmaster_pid(cluster.base_dir)
        return cluster

    def start_persistent(self, base_dir: Path) -> PersistentPostgres:
        """A cluster in base_dir that outlives us; its location is recorded first."""
        self.record(pgBaseDir=str(base_dir))  # so a later teardown removes a half-made one
        cluster = PersistentPostgres(auth=Auth.SCRAM)
        self.facts.cluster = cluster
        cluster.start_in(base_dir)
        self.facts.pg_pid = postmaster_pid(base_dir)
        self.record(pgPort=cluster.port, pgSuperuser=cluster.superuser, pgPid=self.facts.pg_pid)
        return cluster

    def use_dsn(self, dsn: str, purposes: Sequence[str]) -> None:
        """A server we did not start: migrate it; every login is that DSN."""
        from qinglong.db.migrator import migrate

        self.facts.dsns = Dsns(dsn, dict.fromkeys(purposes, dsn))
        migrate(dsn)

    def launch(
        self,
        name: str,
        argv: list[str],
        *,
        marker: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Service:
        """Start a service (log: root/logs/<name>.log); recorded before anyone waits."""
        log_path = self.root / "logs" / f"{name}.log"
        log_path.parent.mkdir(mode=0o700, exist_ok=True)
        process = popen(argv, log_path, env=env, cwd=self.cwd)
        service = Service(
            name, process.pid, log_path, proc_start_time(process.pid), marker, process
        )
        self.facts.services.append(service)
        self.record(**{f"{name}Pid": service.pid, f"{name}StartTime": service.start_time})
        if self.pid_files:
            write_text(self.root / f"{name}.pid", f"{service.pid}\n", 0o644)
        return service

    def launch_ingress(self, config_file: Path) -> Service:
        # One process, so the one admin URL sees all of it.
        return self.launch(
            "ingress",
            [
                sys.executable,
                "-m",
                "qinglong",
                "ingress",
                "serve",
                "--processes",
                "1",
                "--config",
                str(config_file),
            ],
            marker=config_file,
        )

    def launch_sweeper(self, dsn_file: Path | None = None) -> Service:
        """`runtime sweep --every 1s` as the sweeper login; its DSN from `dsn_file`
        (0600) or else the environment (QINGLONG_DSN), never its command line."""
        argv = [sys.executable, "-m", "qinglong", "runtime", "sweep"]
        if dsn_file is not None:
            write_text(dsn_file, self.dsns.login("sweeper") + "\n", 0o600)
            return self.launch(
                "sweeper",
                [*argv, "--dsn-file", str(dsn_file), "--every", SWEEP_EVERY],
                marker=dsn_file,
            )
        env = {**os.environ, "QINGLONG_DSN": self.dsns.login("sweeper")}
        return self.launch("sweeper", [*argv, "--every", SWEEP_EVERY], env=env)

    @staticmethod
    def wait_ready(
        service: Service, probe: Callable[[], T | None], timeout_s: float, interval_s: float = 0.1
    ) -> T | None:
        """Poll `probe` until it answers; None if the service exited first.
        TimeoutError when neither happened within timeout_s."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if service.exited():
                return None
            answer = probe()
            if answer is not None:
                return answer
            time.sleep(interval_s)
        raise TimeoutError(f"{service.name} not ready after {timeout_s:.0f}s")

    # -- teardown ------------------------------------------------------------

    def teardown(self) -> None:
        """Services, then PostgreSQL; idempotent."""
        self.stop_services()
        self.stop_postgres()

    def stop_services(self) -> None:
        """Every service, last started first (all signalled before any wait)."""
        services, self.facts.services = self.facts.services, []
        stop_services(services[::-1])

    def stop_service(self, name: str) -> None:
        service = self.facts.service(name)
        if service is not None:
            self.facts.services.remove(service)
            stop_services([service])

    def stop_postgres(self) -> None:
        """Stop and remove a cluster we started; drop our database on a server we
        only used (QL_TEST_DSN); nothing for --dsn."""
        cluster, self.facts.cluster = self.facts.cluster, None
        if cluster is None:
            return
        if cluster.existing_dsn is not None:
            with contextlib.suppress(Exception):
                cluster.drop_database(self.database)
            return
        cluster.stop("fast")
        pid, base = self.facts.pg_pid, cluster.base_dir
        if pid is not None and base is not None and alive(pid) and _ours_postmaster(pid, base):
            os.kill(pid, signal.SIGQUIT)  # pg_ctl failed: immediate shutdown
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)

    @classmethod
    def from_record(
        cls, root: Path, database: str, data: Mapping[str, Any], markers: Mapping[str, str]
    ) -> LocalStack:
        """The stack a `record` describes (its services named by `markers`:
        name -> the file in root their command line names), for teardown."""
        stack = cls(root, database, {})
        base = data.get("pgBaseDir")
        if base:
            cluster = PersistentPostgres()
            cluster.base_dir = Path(base)
            cluster._owned = True
            cluster.port = int(data.get("pgPort") or 0)
            cluster.superuser = data.get("pgSuperuser") or cluster.superuser
            stack.facts.cluster = cluster
            pid = data.get("pgPid")
            stack.facts.pg_pid = pid if isinstance(pid, int) else None
        for name, marker in markers.items():
            pid = data.get(f"{name}Pid")
            if pid is None:
                with contextlib.suppress(OSError, ValueError):
                    pid = int((root / f"{name}.pid").read_text().strip())
            if isinstance(pid, int):
                stack.facts.services.append(
                    Service(
                        name,
                        pid,
                        root / "logs" / f"{name}.log",
                        data.get(f"{name}StartTime"),
                        root / marker,
                    )
                )
        return stack


def write_text(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
