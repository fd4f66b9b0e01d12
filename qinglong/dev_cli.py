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

The steps `up` shares with `qinglong demo` (cluster, database, login roles,
PKI, KEK, starting and stopping the services) are `qinglong.local_stack`'s
LocalStack, with dev-state.json as its record; what is dev's own (the state
dir, the ingress config on ports chosen here, the readiness checks, the
worker identity, dev-env.json) is `_DevPlan` here.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.cli import Subparsers

if TYPE_CHECKING:
    from qinglong.local_stack import Dsns, LocalStack, LoginRole, Service

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
_DSN_KEYS = ("dsn", "runtimeDsn")
SWEEPER_DSN_FILE = "sweeper.dsn"
# The key-encryption key of secrets (SPEC §14.1): 0600, named by dev-env.json's
# kekFile and the ingress config's kekFile.
KEK_FILE = "kek.key"
_CREATED = (
    "ca",
    "server",
    "worker",
    "ingress.json",
    "ingress.pid",
    SWEEPER_DSN_FILE,
    "sweeper.pid",
    ENV_FILE,
    KEK_FILE,
    # the producer API (qinglong/dev_api.py)
    "api.json",
    "api.pid",
    "api.token",
    "api-ready.json",
    # certificates `admin worker renew-cert` wrote by default (beside ca/)
    "worker-certs",
)
PRODUCER_ROLE = "qinglong_api"
# The services `down` stops, in start order, each by the file its command line names.
_MARKERS = {"ingress": "ingress.json", "sweeper": SWEEPER_DSN_FILE, "api": "api.json"}


def _dev_roles() -> dict[str, LoginRole]:
    """The dev database's login roles, created in this order (SPEC §13.6)."""
    from qinglong.local_stack import LoginRole

    return {
        "ingress": LoginRole(INGRESS_ROLE, "ql_worker_ingress"),
        "runtime": LoginRole(RUNTIME_ROLE, "ql_runtime"),
        "sweeper": LoginRole(SWEEPER_ROLE, "ql_sweeper"),
        "producer": LoginRole(PRODUCER_ROLE, "ql_producer"),
    }


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


@dataclass(frozen=True)
class DevDsns:
    """The dev database's DSNs, each carrying its login's generated password
    when the cluster uses SCRAM (so never in a repr)."""

    superuser: str = field(repr=False)  # migrations, provisioning
    ingress: str = field(repr=False)  # IN ROLE ql_worker_ingress
    runtime: str = field(repr=False)  # IN ROLE ql_runtime: the operator's
    sweeper: str = field(repr=False)  # IN ROLE ql_sweeper only: sweep, promote, prune
    producer: str = field(repr=False)  # IN ROLE ql_producer only: the producer API

    @classmethod
    def of(cls, dsns: Dsns) -> DevDsns:
        return cls(superuser=dsns.admin, **{key: dsns.login(key) for key in _dev_roles()})


def prepare_database(cluster: Any) -> DevDsns:
    """Create + migrate the dev database and its login roles; return their DSNs."""
    from qinglong.local_stack import prepare_database as prepare

    return DevDsns.of(prepare(cluster, DATABASE, _dev_roles()))


# ------------------------------------------------------------------- ingress


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


# ------------------------------------------------------------------------ up


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


@dataclass
class _DevPlan:
    """dev up's side of LocalStack.start: a persistent cluster in the state dir,
    the nested ingress config on ports chosen here, a sweeper reading its DSN
    file, the dev API; one worker identity."""

    state: State
    worker: Any = None  # control_plane.WorkerIdentity
    api_section: dict[str, Any] = field(default_factory=dict)  # dev-env.json's `api`

    def start_postgres(self, stack: LocalStack) -> None:
        from qinglong.local_stack import cluster_base_dir

        base_dir = cluster_base_dir(self.state.directory)
        try:
            stack.start_persistent(base_dir)
        except Exception as exc:
            raise DevError("postgres_start_failed", str(exc)[-2000:]) from None

    def database_ready(self, stack: LocalStack) -> None:
        return None

    def pki_ready(self, stack: LocalStack) -> None:
        from qinglong.service import control_plane

        state_dir = self.state.directory
        with control_plane.connect(stack.dsns.admin) as conn:
            self.worker = control_plane.provision_worker(
                conn,
                WORKER_NAME,
                state_dir / "ca",
                state_dir / "worker",
                self_labels=True,  # a development worker declares its own labels (SPEC §13.2)
                pools=("*",),  # and takes every pool, present and future (SPEC §13.1)
            )
            # `admin worker renew-cert --worker ID` finds the dev CA through the database.
            _name_dev_ca(conn, state_dir / "ca")

    def start_ingress(self, stack: LocalStack) -> None:
        """Start the ingress on free ports; retry if a port was taken meanwhile."""
        from qinglong.local_stack import log_tail
        from qinglong.throwaway_postgres import free_loopback_port

        config_file = self.state.directory / "ingress.json"
        for _ in range(3):
            ports = (free_loopback_port(), free_loopback_port())
            if ports[0] == ports[1]:
                continue
            _write_ingress_config(
                config_file,
                _ingress_config(
                    self.state.directory, stack.dsns.login("ingress"), ports, stack.pki.tls()
                ),
            )
            self.state.update(ingressPort=ports[0], adminPort=ports[1])
            if self._wait_ingress(stack, stack.launch_ingress(config_file), ports):
                stack.facts.ingress_url = f"https://127.0.0.1:{ports[0]}"
                stack.facts.admin_url = f"http://127.0.0.1:{ports[1]}"
                return
            stack.stop_service("ingress")  # it exited: forget it
            self.state.update(ingressPid=None)
        raise DevError(
            "ingress_start_failed", log_tail(self.state.directory / "logs" / "ingress.log")
        )

    def _wait_ingress(self, stack: LocalStack, service: Service, ports: tuple[int, int]) -> bool:
        """True once TLS and /readyz answer; False if the process died first."""
        cert = (self.worker.cert_file, self.worker.key_file)

        def ready() -> bool | None:
            ok = _tls_ready(ports[0], stack.pki.ca_file, cert) and _admin_ready(ports[1])
            return True if ok else None

        try:
            return stack.wait_ready(service, ready, READY_TIMEOUT_S, 0.2) is not None
        except TimeoutError:
            raise DevError("ingress_not_ready", f"not ready after {READY_TIMEOUT_S:.0f}s") from None

    def start_sweeper(self, stack: LocalStack) -> None:
        """Start the sweeper; wait until its log shows a first completed pass."""
        service = stack.launch_sweeper(self.state.directory / SWEEPER_DSN_FILE)

        def passed() -> bool | None:
            with contextlib.suppress(OSError):
                if '"event":"sweep.pass"' in service.log_path.read_text(errors="replace"):
                    return True
            return None

        with contextlib.suppress(TimeoutError):
            if stack.wait_ready(service, passed, READY_TIMEOUT_S) is not None:
                return
        try:
            tail = service.log_path.read_text(errors="replace")[-1500:]
        except OSError:
            tail = "no sweeper log"
        raise DevError("sweeper_start_failed", tail)

    def start_api(self, stack: LocalStack) -> None:
        """The producer API and a token of project `dev` with every scope (dev_api.py)."""
        from qinglong.dev_api import start_dev_api

        try:
            self.api_section = start_dev_api(stack)
        except RuntimeError as exc:
            raise DevError("api_start_failed", str(exc)) from None


def _dev_stack(state: State) -> LocalStack:
    from qinglong.local_stack import LocalStack

    return LocalStack(
        state.directory,
        DATABASE,
        _dev_roles(),
        record=state.update,
        cwd=state.directory,
        pid_files=True,
    )


def _up(state_dir: Path) -> dict[str, Any]:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    state_dir = state_dir.resolve()
    state = _claim_state_dir(state_dir)
    stack = _dev_stack(state)
    plan = _DevPlan(state)
    facts = stack.start(plan)
    env = {
        "dsn": stack.dsns.admin,
        "runtimeDsn": stack.dsns.login("runtime"),
        "ingressUrl": facts.ingress_url,
        "adminUrl": facts.admin_url,
        "caFile": str(stack.pki.ca_file),
        "caDir": str(stack.pki.ca_dir),
        "kekFile": str(stack.kek_file),
        "worker": plan.worker.as_json(),
        "api": plan.api_section,
    }
    _write_json(state_dir / ENV_FILE, env)
    return env


def _name_dev_ca(conn: Any, ca_dir: Path) -> None:
    from qinglong.service.certificates import set_dev_ca_dir

    set_dev_ca_dir(conn, DATABASE, ca_dir)
    conn.commit()


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
    shown = {
        key: _without_password(value) if key in _DSN_KEYS else value for key, value in env.items()
    }
    shown["envFile"] = str(env_file)
    return shown


def _without_password(dsn: str) -> str:
    """`dsn` (URI or key=value) without its password, as key=value conninfo."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params.pop("password", None)
    return make_conninfo("", **params)


# ---------------------------------------------------------------------- down


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
    from qinglong.local_stack import LocalStack

    if not state_dir.is_dir():
        return False
    state_dir = state_dir.resolve()
    state = State.load(state_dir)
    data = state.data if state is not None else {}
    if (
        state is None
        and not (state_dir / "ingress.pid").exists()
        and not (state_dir / "sweeper.pid").exists()
    ):
        return False
    LocalStack.from_record(state_dir, DATABASE, data, _MARKERS).teardown()
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
