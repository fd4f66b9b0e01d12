"""The drill's high-availability stack on loopback, from Debian packages (SPEC §17.3).

* etcd (`etcd-server`): one member, the DCS;
* two PostgreSQL 15 nodes under Patroni (`patroni`, run by the system's
  /usr/bin/python3, never the project's interpreter), `synchronous_mode: true`
  and `synchronous_mode_strict: true` — the supported topology (docs/OPERATIONS.md);
* HAProxy (`haproxy`) in TCP mode in front of the ingresses, with a health check
  on each ingress's admin `/healthz`.

Everything listens on free loopback ports under one temp dir; the nodes run as the
`postgres` OS user when we are root (initdb refuses root). `HaStack.stop` stops every
process it started (SIGTERM, then SIGKILL of its process group and of any postmaster
left behind), also after a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qinglong.throwaway_postgres import PG_BIN, free_loopback_port

PACKAGES = ("patroni", "etcd-server", "etcd-client", "haproxy")
BINARIES = {
    "patroni": "/usr/bin/patroni",
    "etcd-server": "/usr/bin/etcd",
    "haproxy": "/usr/sbin/haproxy",
}
SYSTEM_PYTHON = "/usr/bin/python3"
SCOPE = "qinglong-drill"
DATABASE = "qinglong"
# Patroni's timing: a dead leader's key expires after TTL; replicas look every LOOP_WAIT.
TTL_S = 10
LOOP_WAIT_S = 1
RETRY_TIMEOUT_S = 4
STOP_TIMEOUT_S = 15.0

__all__ = ["HaError", "HaStack", "PatroniNode", "ensure_packages", "multi_host_dsn"]


class HaError(Exception):
    """The stack could not be started or did not reach the state we waited for."""


def ensure_packages() -> None:
    """Install the Debian packages the drill needs when missing (as scripts/test.sh does)."""
    missing = [pkg for pkg, path in BINARIES.items() if not Path(path).exists()]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def multi_host_dsn(ports: list[int], dbname: str, user: str) -> str:
    """What ingresses, the API and sweepers use (SPEC §17.1): every node, and
    `target_session_attrs=read-write` so a connection lands on the primary only."""
    hosts = ",".join("127.0.0.1" for _ in ports)
    return (
        f"host={hosts} port={','.join(map(str, ports))} dbname={dbname} user={user}"
        " target_session_attrs=read-write connect_timeout=2"
    )


def _os_user() -> str | None:
    return "postgres" if os.geteuid() == 0 else None


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    user: str | None = None
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=self.env,
                user=self.user,
                start_new_session=True,
                close_fds=True,
                cwd=str(self.log.parent),
            )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if not self.alive:
            return
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class PatroniNode:
    name: str
    root: Path
    pg_port: int
    api_port: int
    proc: Proc | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def api(
        self, path: str, body: dict[str, Any] | None = None, timeout_s: float = 3.0
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            data=data,
            method="GET" if body is None else "POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                status, raw = reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (OSError, ValueError):
            return 0, None
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode(errors="replace")

    def is_primary(self) -> bool:
        return self.api("/primary", timeout_s=1.0)[0] == 200

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        return None


@dataclass
class HaStack:
    root: Path
    nodes: list[PatroniNode] = field(default_factory=list)
    etcd: Proc | None = None
    haproxy: Proc | None = None
    etcd_port: int = 0
    haproxy_port: int = 0

    # -- database ------------------------------------------------------------

    def start_database(self, timeout_s: float = 90.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        user = _os_user()
        self._start_etcd()
        for index in (1, 2):
            node_root = self.root / f"pg{index}"
            node_root.mkdir(mode=0o700)
            _chown(node_root, user)
            node = PatroniNode(f"pg{index}", node_root, free_loopback_port(), free_loopback_port())
            self.nodes.append(node)
            config = node_root / "patroni.yml"
            config.write_text(json.dumps(self._patroni_config(node)))  # JSON is YAML
            _chown(config, user)
            node.proc = Proc(
                node.name,
                [SYSTEM_PYTHON, BINARIES["patroni"], str(config)],
                node_root / "patroni.log",
                user=user,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(node_root)},
            )
            node.proc.start()
            if index == 1:  # the first bootstraps alone: no race for the initialize key
                self.wait_for(lambda: self.leader() is not None, timeout_s, "a leader")
        self.wait_for(self.replicating, timeout_s, "a synchronous standby")

    def _start_etcd(self) -> None:
        client, peer = free_loopback_port(), free_loopback_port()
        self.etcd_port = client
        data = self.root / "etcd"
        self.etcd = Proc(
            "etcd",
            [
                BINARIES["etcd-server"],
                "--name",
                "e1",
                "--data-dir",
                str(data),
                "--listen-client-urls",
                f"http://127.0.0.1:{client}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{client}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"e1=http://127.0.0.1:{peer}",
                "--log-level",
                "warn",
            ],
            self.root / "etcd.log",
        )
        self.etcd.start()

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{client}/health", timeout=1
                ) as reply:
                    return bool(json.loads(reply.read()).get("health") == "true")
            except (OSError, ValueError):
                return False

        self.wait_for(healthy, 30, "etcd")

    def _patroni_config(self, node: PatroniNode) -> dict[str, Any]:
        socket_dir = str(node.root)
        return {
            "scope": SCOPE,
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{node.api_port}",
                "connect_address": f"127.0.0.1:{node.api_port}",
            },
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S,
                    "loop_wait": LOOP_WAIT_S,
                    "retry_timeout": RETRY_TIMEOUT_S,
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "synchronous_mode_strict": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 5,
                            "max_replication_slots": 5,
                            "max_connections": 100,
                            "fsync": "off",
                            "wal_keep_size": "128MB",
                            # A standby whose walreceiver failed (the new primary had no slot
                            # for it yet, or was still starting) retries after this, not 5 s:
                            # with two nodes in strict mode every commit waits for that retry.
                            "wal_retrieve_retry_interval": "250ms",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}, "data-checksums"],
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data_dir),
                "bin_dir": str(PG_BIN),
                "pgpass": str(node.root / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "replicator"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": socket_dir},
            },
            "tags": {
                "nofailover": False,
                "noloadbalance": False,
                "clonefrom": False,
                "nosync": False,
            },
        }

    def leader(self) -> PatroniNode | None:
        for node in self.nodes:
            if node.proc is not None and node.proc.alive and node.is_primary():
                return node
        return None

    def replicating(self) -> bool:
        """A leader and a synchronous standby streaming from it (strict mode's commits
        wait for it)."""
        leader = self.leader()
        if leader is None:
            return False
        status, cluster = leader.api("/cluster")
        if status != 200 or not isinstance(cluster, dict):
            return False
        return any(
            m.get("role") == "sync_standby" and m.get("state") in ("streaming", "running")
            for m in cluster.get("members", [])
        )

    def dsn(self, user: str = "postgres", dbname: str = DATABASE) -> str:
        return multi_host_dsn([n.pg_port for n in self.nodes], dbname, user)

    def kill_leader(self) -> PatroniNode:
        """SIGKILL the leader's Patroni and its PostgreSQL (the postmaster: Patroni
        starts it detached, so it outlives Patroni unless killed too)."""
        leader = self.leader()
        if leader is None:
            raise HaError("no leader to kill")
        postmaster = leader.postmaster_pid()
        assert leader.proc is not None
        leader.proc.kill()
        if postmaster is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(postmaster, signal.SIGKILL)
        return leader

    def restart_node(self, node: PatroniNode) -> None:
        assert node.proc is not None
        node.proc.start()

    def switchover(self) -> tuple[PatroniNode, PatroniNode]:
        """A planned switchover through the leader's REST API."""
        leader = self.leader()
        if leader is None:
            raise HaError("no leader to switch over from")
        candidate = next(n for n in self.nodes if n is not leader)
        status, body = leader.api(
            "/switchover", {"leader": leader.name, "candidate": candidate.name}, timeout_s=30
        )
        if status != 200:
            raise HaError(f"switchover refused: {status} {body}")
        return leader, candidate

    # -- ingress front ---------------------------------------------------------

    def start_haproxy(self, backends: list[tuple[int, int]]) -> int:
        """HAProxy in TCP mode over (port, admin_port) pairs; its listening port."""
        self.haproxy_port = free_loopback_port()
        servers = "\n".join(
            f"    server ingress-{i} 127.0.0.1:{port} check port {admin} inter 500ms fall 2 rise 2"
            for i, (port, admin) in enumerate(backends, 1)
        )
        config = self.root / "haproxy.cfg"
        config.write_text(f"""global
    maxconn 512
defaults
    mode tcp
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
frontend ingress
    bind 127.0.0.1:{self.haproxy_port}
    default_backend ingresses
backend ingresses
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
{servers}
""")
        self.haproxy = Proc(
            "haproxy", [BINARIES["haproxy"], "-db", "-f", str(config)], self.root / "haproxy.log"
        )
        self.haproxy.start()
        time.sleep(0.3)
        if not self.haproxy.alive:
            raise HaError(f"haproxy exited: {(self.root / 'haproxy.log').read_text()[-800:]}")
        return self.haproxy_port

    # -- lifecycle -------------------------------------------------------------

    @staticmethod
    def wait_for(predicate: Any, timeout_s: float, what: str) -> float:
        started = time.monotonic()
        while not predicate():
            if time.monotonic() - started > timeout_s:
                raise HaError(f"no {what} after {timeout_s:.0f}s")
            time.sleep(0.2)
        return time.monotonic() - started

    def stop(self) -> None:
        """Stop everything this stack started, whatever state it is in."""
        if self.haproxy is not None:
            self.haproxy.stop(5)
        for node in self.nodes:
            if node.proc is not None:
                node.proc.stop()
            postmaster = node.postmaster_pid()
            if postmaster is not None and _is_postgres(postmaster):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(postmaster, signal.SIGKILL)
        if self.etcd is not None:
            self.etcd.stop(5)

    def cleanup(self, keep_logs: Path | None = None) -> None:
        self.stop()
        if keep_logs is not None:
            keep_logs.mkdir(parents=True, exist_ok=True)
            for log in [
                self.root / "etcd.log",
                self.root / "haproxy.log",
                *(n.root / "patroni.log" for n in self.nodes),
            ]:
                with contextlib.suppress(OSError):
                    name = log.name if log.parent == self.root else f"{log.parent.name}-{log.name}"
                    shutil.copy(log, keep_logs / name)
        shutil.rmtree(self.root, ignore_errors=True)


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False
