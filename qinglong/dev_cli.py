"""`qinglong dev up|down --state-dir DIR` (SPEC §8): a local environment that outlives us.

`up` starts a private PostgreSQL cluster, migrates it, creates the login roles,
a dev CA, the ingress server certificate and one worker identity, starts the
ingress detached and waits until it answers, starts the lease sweeper detached
(`qinglong runtime sweep --every 1s` as its own login `qinglong_sweeper`, a
member of ql_sweeper only — it can sweep, promote and prune, not publish or
enqueue — as a deployment runs it: expired offers come back, lost leases are
retried, scheduled runs are promoted, retention prunes) and waits for its first
pass, then writes
`DIR/dev-env.json`, and prints it with the DSNs' passwords removed (plus
`envFile`, the path of the full file). `down` stops everything `up` started and
removes it.

Everything `down` needs is recorded in `DIR/dev-state.json` as soon as it
exists, so a `down` after a half-failed `up` (or after `up` was killed) still
cleans up. Layout of DIR:

    dev-state.json  what we started (cluster dir, pids + start times, ports)
    dev-env.json    the public description (SPEC §8), written last
    ingress.json    ingress config;  ingress.pid
    sweeper.dsn     the sweeper login's DSN (0600; read via --dsn-file);  sweeper.pid
    kek.key         the key-encryption key of secrets (0600; dev-env.json kekFile)
    ca/ server/ worker/   dev PKI (worker/ holds the credential file, 0600); the
                    database names ca/ (setting qinglong.dev_ca_dir) for renewals
    worker-certs/   certificates `admin worker renew-cert --worker ID` issued
    pg/             the cluster, unless the `postgres` OS user cannot reach DIR
                    (root + a 0700 parent) or the socket path would be too long;
                    then a private dir under the system temp dir, recorded in state
    logs/           ingress.log, audit.log, sweeper.log — kept by `down` for post-mortems

Choices: `up` on a DIR that is already up fails (error `already_up`), it does
not adopt or restart it; `down` is idempotent (nothing recorded => exit 0).

Secrets: the cluster authenticates every TCP client with `scram-sha-256` (peer
on its private unix socket); the superuser's and the login roles' passwords are
generated at `up` and exist only inside the DSNs of `dev-env.json` and
`ingress.json` (and the sweeper's in `sweeper.dsn`), all 0600 from creation.
No child process gets a DSN on its command line (the ingress reads its config
file, the sweeper its DSN file), so `ps` never shows one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.cli import Subparsers

if TYPE_CHECKING:
    import subprocess

# Only cheap imports at module level: cli.py imports this module to build its
# parser for every `qinglong` command, including the worker's.
LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

DATABASE = "qinglong"
INGRESS_ROLE = "qinglong_ingress"
RUNTIME_ROLE = "qinglong_runtime"
SWEEPER_ROLE = "qinglong_sweeper"
WORKER_NAME = "dev-worker-1"
STATE_FILE = "dev-state.json"
ENV_FILE = "dev-env.json"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
# sockaddr_un.sun_path is 108 bytes including the NUL.
_MAX_SOCKET_PATH = 107
_DSN_KEYS = ("dsn", "runtimeDsn")
SWEEP_EVERY = "1s"
SWEEPER_DSN_FILE = "sweeper.dsn"
# The key-encryption key of secrets (SPEC §14.1): 0600, named by dev-env.json's
# kekFile and the ingress config's kekFile.
KEK_FILE = "kek.key"
_CREATED = ("ca", "server", "worker", "ingress.json", "ingress.pid", SWEEPER_DSN_FILE,
            "sweeper.pid", ENV_FILE, KEK_FILE,
            # the producer API (qinglong/dev_api.py)
            "api.json", "api.pid", "api.token", "api-ready.json",
            # certificates `admin worker renew-cert` wrote by default (beside ca/)
            "worker-certs")
PRODUCER_ROLE = "qinglong_api"


class DevError(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    dev = sub.add_parser("dev", help="local development environment")
    commands = dev.add_subparsers(dest="dev_command", required=True)
    up = commands.add_parser("up", help="start PostgreSQL + ingress, write DIR/dev-env.json")
    up.add_argument("--state-dir", required=True, type=Path)
    up.set_defaults(handler=lazy("qinglong.dev_cli:up_command"))
    down = commands.add_parser("down", help="stop and remove what `dev up` started")
    down.add_argument("--state-dir", required=True, type=Path)
    down.set_defaults(handler=lazy("qinglong.dev_cli:down_command"))


# -------------------------------------------------------------------- state


@dataclass
class State:
    """dev-state.json: rewritten atomically after every step of `up`."""

    directory: Path
    data: dict[str, Any]

    @classmethod
    def load(cls, directory: Path) -> State | None:
        try:
            raw = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:
            raw = {}  # a torn/garbled file: still clean up whatever we can find
        return cls(directory, raw if isinstance(raw, dict) else {})

    def update(self, **values: Any) -> None:
        self.data.update(values)
        _write_json(self.directory / STATE_FILE, self.data)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Atomically replace `path`; 0600 from creation (mkstemp), never widened:
    dev-env.json and ingress.json hold DSNs with passwords."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ------------------------------------------------------------------ postgres


def _dev_cluster_class() -> type:
    from qinglong.throwaway_postgres import ThrowawayPostgres, _run_as

    class DevPostgres(ThrowawayPostgres):
        """A ThrowawayPostgres in a directory we choose, which nobody deletes at exit.

        The harness's start() always uses a fresh mkdtemp and honours
        QL_TEST_DSN; the dev env needs a known, persistent location instead.
        """

        def start_in(self, base_dir: Path) -> DevPostgres:
            self.existing_dsn = None
            self._owned = True
            self.base_dir = base_dir
            base_dir.mkdir(mode=0o700, exist_ok=True)
            self.socket_dir.mkdir(mode=0o700, exist_ok=True)
            os_user = _run_as()
            if os_user is not None:
                import pwd

                entry = pwd.getpwnam(os_user)
                for path in (self.base_dir, self.socket_dir):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
                self.superuser = os_user
            else:
                import pwd

                self.superuser = pwd.getpwuid(os.geteuid()).pw_name
            self._initdb(os_user)
            self._pg_ctl_start(os_user)
            return self

    return DevPostgres


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


def _cluster_base_dir(state_dir: Path) -> Path:
    import tempfile

    from qinglong.throwaway_postgres import _run_as

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


def _cluster_from_state(data: dict[str, Any]) -> Any:
    cluster = _dev_cluster_class()()
    cluster.base_dir = Path(data["pgBaseDir"])
    cluster._owned = True
    cluster.port = int(data.get("pgPort") or 0)
    cluster.superuser = data.get("pgSuperuser") or cluster.superuser
    return cluster


def _start_postgres(state: State) -> Any:
    from qinglong.throwaway_postgres import Auth

    base_dir = _cluster_base_dir(state.directory)
    # Record the location before initdb so `down` can remove a half-made cluster.
    state.update(pgBaseDir=str(base_dir))
    cluster = _dev_cluster_class()(auth=Auth.SCRAM)
    try:
        cluster.start_in(base_dir)
    except Exception as exc:
        raise DevError("postgres_start_failed", str(exc)[-2000:]) from None
    state.update(
        pgPort=cluster.port, pgSuperuser=cluster.superuser, pgPid=_postmaster_pid(base_dir)
    )
    return cluster


def _postmaster_pid(base_dir: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((base_dir / "data" / "postmaster.pid").read_text().splitlines()[0])
    return None


@dataclass(frozen=True)
class DevDsns:
    """The dev database's DSNs, each carrying its login's generated password
    when the cluster uses SCRAM (so never in a repr)."""

    superuser: str = field(repr=False)  # migrations, provisioning
    ingress: str = field(repr=False)  # IN ROLE ql_worker_ingress
    runtime: str = field(repr=False)  # IN ROLE ql_runtime: the operator's
    sweeper: str = field(repr=False)  # IN ROLE ql_sweeper only: sweep, promote, prune
    producer: str = field(repr=False)  # IN ROLE ql_producer only: the producer API


def _prepare_database(cluster: Any) -> DevDsns:
    """Create + migrate the dev database and its login roles; return their DSNs."""
    from qinglong.db.migrator import migrate

    dsn = cluster.create_database(DATABASE)
    migrate(dsn)
    return DevDsns(
        superuser=dsn,
        ingress=cluster.ensure_login_role(INGRESS_ROLE, "ql_worker_ingress", DATABASE),
        runtime=cluster.ensure_login_role(RUNTIME_ROLE, "ql_runtime", DATABASE),
        sweeper=cluster.ensure_login_role(SWEEPER_ROLE, "ql_sweeper", DATABASE),
        producer=cluster.ensure_login_role(PRODUCER_ROLE, "ql_producer", DATABASE))


# ------------------------------------------------------------------- ingress


def _proc_start_time(pid: int) -> str | None:
    """Kernel start time of pid (field 22 of /proc/pid/stat): tells pid reuse apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _alive(pid: int) -> bool:
    """Running and not a zombie (a reaped-later child of a dead `up` is gone for us)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _ingress_config(
    state_dir: Path, ingress_dsn: str, ports: tuple[int, int], tls: dict[str, str]
) -> dict[str, Any]:
    listen_port, admin_port = ports
    return {
        "listen": {"host": "127.0.0.1", "port": listen_port},
        "admin": {"host": "127.0.0.1", "port": admin_port},
        "dsn": ingress_dsn,
        "tls": tls,
        "database": {
            "poolMin": 1,
            "poolMax": 8,
            "statementTimeoutMs": 2000,
            "preparedStatements": True,
        },
        "limits": {
            "ratePerSecond": 50,
            "burst": 100,
            "maxConnections": 1024,
            "headerTimeoutS": 10,
            "bodyTimeoutS": 10,
        },
        "auditLog": str(state_dir / "logs" / "audit.log"),
        "kekFile": str(state_dir / KEK_FILE),
    }


def _flat_ingress_config(nested: dict[str, Any]) -> dict[str, Any]:
    """The agreed nested config in the flat keys of service/config.py's loader."""
    database, limits, tls = nested["database"], nested["limits"], nested["tls"]
    return {
        "host": nested["listen"]["host"],
        "port": nested["listen"]["port"],
        "adminHost": nested["admin"]["host"],
        "adminPort": nested["admin"]["port"],
        "dsn": nested["dsn"],
        "certFile": tls["certFile"],
        "keyFile": tls["keyFile"],
        "clientCaFile": tls["workerCaFile"],
        "poolMinSize": database["poolMin"],
        "poolMaxSize": database["poolMax"],
        "statementTimeoutMs": database["statementTimeoutMs"],
        "prepareThreshold": 0 if database["preparedStatements"] else None,
        "ratePerS": limits["ratePerSecond"],
        "rateBurst": limits["burst"],
        "maxConnections": limits["maxConnections"],
        "headerTimeoutS": limits["headerTimeoutS"],
        "bodyTimeoutS": limits["bodyTimeoutS"],
        "auditLog": nested["auditLog"] or "stderr",
        "kekFile": nested["kekFile"],
    }


def _write_ingress_config(path: Path, nested: dict[str, Any]) -> None:
    """Write the agreed nested config; if the ingress's own loader refuses it
    (its loader is flat today), write the same settings in its flat keys.

    Checking with the real loader here also turns a config mistake into a clear
    `up` error instead of an ingress that dies at start.
    """
    try:
        from qinglong.service.config import ConfigError, load_config
    except ImportError:  # no loader to ask: the agreed format is all we know
        _write_json(path, nested)
        return
    for doc in (nested, _flat_ingress_config(nested)):
        _write_json(path, doc)
        try:
            load_config(path, environ={})
            return
        except ConfigError as exc:
            error = str(exc)
    raise DevError("invalid_ingress_config", error)


def _launch_ingress(state: State, config_file: Path) -> subprocess.Popen[bytes]:
    import subprocess

    log_dir = state.directory / "logs"
    log_dir.mkdir(mode=0o700, exist_ok=True)
    with open(log_dir / "ingress.log", "ab") as log:
        process = subprocess.Popen(
            # One process, so dev-env.json's one adminUrl sees all of it.
            [sys.executable, "-m", "qinglong", "ingress", "serve", "--processes", "1",
             "--config", str(config_file)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # survives us, and `down` can signal its whole group
            cwd=state.directory,
            close_fds=True,
        )
    state.update(ingressPid=process.pid, ingressStartTime=_proc_start_time(process.pid))
    _write_text(state.directory / "ingress.pid", f"{process.pid}\n", 0o644)
    return process


def _write_text(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _tls_ready(port: int, ca_file: Path, cert: tuple[Path, Path]) -> bool:
    import socket
    import ssl

    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _admin_ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _wait_ingress(
    process: subprocess.Popen[bytes], ports: tuple[int, int], ca_file: Path, cert: tuple[Path, Path]
) -> bool:
    """True once TLS and /readyz answer; False if the process died first."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if _tls_ready(ports[0], ca_file, cert) and _admin_ready(ports[1]):
            return True
        time.sleep(0.2)
    raise DevError("ingress_not_ready", f"not ready after {READY_TIMEOUT_S:.0f}s")


def _log_tail(state_dir: Path, max_bytes: int = 1500) -> str:
    with contextlib.suppress(OSError):
        return (state_dir / "logs" / "ingress.log").read_text(errors="replace")[-max_bytes:]
    return ""


def _start_ingress(
    state: State, ingress_dsn: str, tls: dict[str, str], worker: Any
) -> tuple[int, int]:
    """Start the ingress on free ports; retry if a port was taken meanwhile."""
    from qinglong.throwaway_postgres import free_loopback_port

    config_file = state.directory / "ingress.json"
    for _ in range(3):
        ports = (free_loopback_port(), free_loopback_port())
        if ports[0] == ports[1]:
            continue
        _write_ingress_config(
            config_file, _ingress_config(state.directory, ingress_dsn, ports, tls)
        )
        state.update(ingressPort=ports[0], adminPort=ports[1])
        process = _launch_ingress(state, config_file)
        cert = (worker.cert_file, worker.key_file)
        if _wait_ingress(process, ports, Path(tls["workerCaFile"]), cert):
            return ports
        state.update(ingressPid=None)
    raise DevError("ingress_start_failed", _log_tail(state.directory))


# ------------------------------------------------------------------- sweeper


def _launch_sweeper(state: State, sweeper_dsn: str) -> subprocess.Popen[bytes]:
    import subprocess

    dsn_file = state.directory / SWEEPER_DSN_FILE
    _write_text(dsn_file, sweeper_dsn + "\n", 0o600)
    log_dir = state.directory / "logs"
    log_dir.mkdir(mode=0o700, exist_ok=True)
    with open(log_dir / "sweeper.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "qinglong", "runtime", "sweep", "--dsn-file", str(dsn_file),
             "--every", SWEEP_EVERY],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd=state.directory,
            close_fds=True,
        )
    state.update(sweeperPid=process.pid, sweeperStartTime=_proc_start_time(process.pid))
    _write_text(state.directory / "sweeper.pid", f"{process.pid}\n", 0o644)
    return process


def _start_sweeper(state: State, sweeper_dsn: str) -> None:
    """Start the sweeper; wait until its log shows a first completed pass."""
    process = _launch_sweeper(state, sweeper_dsn)
    log = state.directory / "logs" / "sweeper.log"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError):
            if '"event":"sweep.pass"' in log.read_text(errors="replace"):
                return
        time.sleep(0.1)
    try:
        tail = log.read_text(errors="replace")[-1500:]
    except OSError:
        tail = "no sweeper log"
    raise DevError("sweeper_start_failed", tail)


# ------------------------------------------------------------------------ up


def _provision_pki(state_dir: Path) -> tuple[dict[str, str], Path]:
    from qinglong.service import pki

    ca = pki.init_ca(state_dir / "ca")
    server = pki.issue_server_cert(state_dir / "ca", state_dir / "server")
    tls = {
        "certFile": str(server.cert_file),
        "keyFile": str(server.key_file),
        "workerCaFile": str(ca.cert_file),
    }
    return tls, ca.cert_file


def _create_kek(state_dir: Path) -> Path:
    """A fresh key-encryption key for `admin secret …` and the ingress (0600)."""
    from qinglong.service.secrets_crypto import create_kek_file

    path = state_dir / KEK_FILE
    create_kek_file(path)
    return path


def _claim_state_dir(state_dir: Path) -> State:
    """Create dev-state.json exclusively: a second `up` (even a concurrent one) fails."""
    leftovers = [name for name in _CREATED if (state_dir / name).exists()]
    if leftovers and not (state_dir / STATE_FILE).exists():
        # Not ours to clean up (no state file): refuse rather than overwrite or delete.
        raise DevError("state_dir_not_empty", f"{state_dir} already holds {', '.join(leftovers)}")
    try:
        fd = os.open(state_dir / STATE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise DevError(
            "already_up", f"{state_dir} is in use; run `qinglong dev down` first"
        ) from None
    os.close(fd)
    state = State(state_dir, {"version": 1})
    state.update()
    return state


def _up(state_dir: Path) -> dict[str, Any]:
    from qinglong.service import control_plane

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    state_dir = state_dir.resolve()
    state = _claim_state_dir(state_dir)
    cluster = _start_postgres(state)
    dsns = _prepare_database(cluster)
    tls, ca_file = _provision_pki(state_dir)
    kek_file = _create_kek(state_dir)
    with control_plane.connect(dsns.superuser) as conn:
        worker = control_plane.provision_worker(
            conn, WORKER_NAME, state_dir / "ca", state_dir / "worker",
            self_labels=True,  # a development worker declares its own labels (SPEC §13.2)
            pools=("*",),  # and takes every pool, present and future (SPEC §13.1)
        )
        # `admin worker renew-cert --worker ID` finds the dev CA through the database.
        _name_dev_ca(conn, state_dir / "ca")
    listen_port, admin_port = _start_ingress(state, dsns.ingress, tls, worker)
    _start_sweeper(state, dsns.sweeper)
    api_section = _start_api(state, dsns, ca_file)
    env = {
        "dsn": dsns.superuser,
        "runtimeDsn": dsns.runtime,
        "ingressUrl": f"https://127.0.0.1:{listen_port}",
        "adminUrl": f"http://127.0.0.1:{admin_port}",
        "caFile": str(ca_file),
        "caDir": str(state_dir / "ca"),
        "kekFile": str(kek_file),
        "worker": worker.as_json(),
        "api": api_section,
    }
    _write_json(state_dir / ENV_FILE, env)
    return env


def _name_dev_ca(conn: Any, ca_dir: Path) -> None:
    from qinglong.service.certificates import set_dev_ca_dir

    set_dev_ca_dir(conn, DATABASE, ca_dir)
    conn.commit()


def _start_api(state: State, dsns: DevDsns, ca_file: Path) -> dict[str, Any]:
    """The producer API and a token of project `dev` with every scope (dev_api.py)."""
    from qinglong.dev_api import start_dev_api

    def record(pid: int) -> None:
        state.update(apiPid=pid, apiStartTime=_proc_start_time(pid))
        _write_text(state.directory / "api.pid", f"{pid}\n", 0o644)

    try:
        return start_dev_api(state.directory, dsns.producer, dsns.runtime, ca_file, record)
    except RuntimeError as exc:
        raise DevError("api_start_failed", str(exc)) from None


def up_command(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir
    try:
        env = _up(state_dir)
    except (Exception, KeyboardInterrupt) as exc:  # clean up, one JSON line, no traceback
        reason = getattr(exc, "reason", type(exc).__name__)
        detail = getattr(exc, "detail", "") or str(exc)
        if reason not in ("already_up", "state_dir_not_empty"):
            # Leave nothing running behind a failed `up`.
            with contextlib.suppress(Exception):
                _down(state_dir)
        return _fail("dev_up_failed", reason, detail)
    print(json.dumps(public_env(env, state_dir.resolve() / ENV_FILE)))
    return 0


def public_env(env: dict[str, Any], env_file: Path) -> dict[str, Any]:
    """What `up` prints: dev-env.json's fields with every DSN's password removed
    (stdout ends up in terminals and CI logs; the passwords stay in the 0600 file),
    plus `envFile`, where the full description is."""
    shown = {key: _without_password(value) if key in _DSN_KEYS else value
             for key, value in env.items()}
    shown["envFile"] = str(env_file)
    return shown


def _without_password(dsn: str) -> str:
    """`dsn` (URI or key=value) without its password, as key=value conninfo."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params.pop("password", None)
    return make_conninfo("", **params)


# ---------------------------------------------------------------------- down


def _ours(pid: int, start_time: str | None, config_file: Path) -> bool:
    """Is pid still the child we started (not a recycled pid)? `config_file` is
    the file its command line names (ingress.json, sweeper.dsn)."""
    if not _alive(pid):
        return False
    if start_time is not None and _proc_start_time(pid) != start_time:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(config_file).encode() in cmdline


def _signal_group(pid: int, signum: int) -> None:
    # The ingress leads its own session/group (start_new_session): signal the
    # group so helper processes it may have spawned go too.
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _stop_child(state_dir: Path, data: dict[str, Any], name: str, marker: str) -> None:
    """SIGTERM (then SIGKILL) the process group of the child `name` (ingress,
    sweeper) if its recorded pid is still the process we started."""
    import signal

    pid = data.get(f"{name}Pid")
    if pid is None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((state_dir / f"{name}.pid").read_text().strip())
    if not isinstance(pid, int) or not _ours(
        pid, data.get(f"{name}StartTime"), state_dir / marker
    ):
        return
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        _signal_group(pid, signal.SIGKILL)
        while _alive(pid) and time.monotonic() < deadline + 5:
            time.sleep(0.05)


def _stop_postgres(data: dict[str, Any]) -> None:
    import shutil
    import signal

    base = data.get("pgBaseDir")
    if not base:
        return
    cluster = _cluster_from_state(data)
    cluster.stop("fast")
    pid = data.get("pgPid")
    if isinstance(pid, int) and _alive(pid) and _ours_postmaster(pid, Path(base)):
        os.kill(pid, signal.SIGQUIT)  # pg_ctl failed: immediate shutdown
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    shutil.rmtree(base, ignore_errors=True)


def _ours_postmaster(pid: int, base_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(base_dir / "data").encode() in cmdline


def _remove_created(state_dir: Path) -> None:
    import shutil

    for name in _CREATED:
        path = state_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    with contextlib.suppress(FileNotFoundError):
        (state_dir / STATE_FILE).unlink()


def _down(state_dir: Path) -> bool:
    """Stop and remove; False when there was nothing to stop."""
    if not state_dir.is_dir():
        return False
    state_dir = state_dir.resolve()
    state = State.load(state_dir)
    data = state.data if state is not None else {}
    if state is None and not (state_dir / "ingress.pid").exists() \
            and not (state_dir / "sweeper.pid").exists():
        return False
    _stop_child(state_dir, data, "sweeper", SWEEPER_DSN_FILE)
    _stop_child(state_dir, data, "api", "api.json")
    _stop_child(state_dir, data, "ingress", "ingress.json")
    _stop_postgres(data)
    _remove_created(state_dir)
    return True


def down_command(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir
    try:
        stopped = _down(state_dir)
    except OSError as exc:
        return _fail("dev_down_failed", type(exc).__name__, str(exc))
    print(json.dumps({"stateDir": str(state_dir.absolute()), "stopped": stopped}))
    return 0


def _fail(error: str, reason: str, detail: str) -> int:
    sys.stderr.write(json.dumps({"error": error, "reason": reason, "detail": detail}) + "\n")
    return 1
