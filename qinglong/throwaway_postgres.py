"""A throwaway PostgreSQL cluster for tests, the demo, dev env and benchmarks.

`initdb` refuses to run as root, so when we are root the cluster is created and
run as an unprivileged OS user (default `postgres`) in a private temp dir. The
server listens on a unix socket in that dir and on a free loopback port, with
`fsync=on` so durability claims are measured against a real disk contract.

Set `QL_TEST_DSN` (or pass `existing_dsn`) to use a running server instead; then
nothing is started or stopped and databases are created on that server.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN = Path(os.environ.get("QL_PG_BIN", "/usr/lib/postgresql/15/bin"))
DEFAULT_OS_USER = "postgres"


class PostgresStartError(RuntimeError):
    """The throwaway cluster could not be initialised or started."""


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> str | None:
    """The OS user to run the server as: None when we are not root."""
    if os.geteuid() != 0:
        return None
    return os.environ.get("QL_PG_OS_USER", DEFAULT_OS_USER)


@dataclass
class ThrowawayPostgres:
    """A private PostgreSQL 15 cluster living in a temp dir."""

    settings: dict[str, str] = field(default_factory=dict)
    existing_dsn: str | None = None
    base_dir: Path | None = None
    port: int = 0
    superuser: str = "postgres"
    _owned: bool = False

    @property
    def data_dir(self) -> Path:
        assert self.base_dir is not None
        return self.base_dir / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.base_dir is not None
        return self.base_dir / "sock"

    @property
    def log_file(self) -> Path:
        assert self.base_dir is not None
        return self.base_dir / "postgres.log"

    def dsn(self, dbname: str = "postgres", user: str | None = None) -> str:
        if self.existing_dsn is not None:
            from psycopg.conninfo import make_conninfo

            overrides = {"dbname": dbname}
            if user is not None:
                overrides["user"] = user
            return make_conninfo(self.existing_dsn, **overrides)
        return (
            f"host=127.0.0.1 port={self.port} dbname={dbname} "
            f"user={user or self.superuser} connect_timeout=10"
        )

    def start(self) -> ThrowawayPostgres:
        self.existing_dsn = self.existing_dsn or os.environ.get("QL_TEST_DSN") or None
        if self.existing_dsn is not None:
            return self
        self._owned = True
        self.base_dir = Path(tempfile.mkdtemp(prefix="qinglong-pg-"))
        self.socket_dir.mkdir()
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

    def _initdb(self, os_user: str | None) -> None:
        cmd = [
            str(PG_BIN / "initdb"), "-D", str(self.data_dir), "-U", self.superuser,
            "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions",
        ]
        self._check(cmd, os_user, "initdb")

    def _config_lines(self) -> list[str]:
        base = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": "200",
            "shared_buffers": "'256MB'",
            "logging_collector": "off",
            "log_min_messages": "warning",
        }
        base.update(self.settings)
        return [f"{key} = {value}" for key, value in base.items()]

    def _pg_ctl_start(self, os_user: str | None) -> None:
        last_error = ""
        for _ in range(5):  # the chosen port can be taken between probe and bind
            self.port = free_loopback_port()
            conf = self.data_dir / "postgresql.auto.conf"
            with open(conf, "w", encoding="utf-8") as handle:
                handle.write("\n".join(self._config_lines()) + "\n")
            cmd = [
                str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
                "-w", "-t", "60", "start",
            ]
            result = self._run(cmd, os_user)
            if result.returncode == 0:
                return
            last_error = result.stderr + self.log_tail()
        raise PostgresStartError(f"pg_ctl start failed: {last_error[-2000:]}")

    def restart(self, mode: str = "fast") -> None:
        """Restart in place (chaos tests use mode='immediate')."""
        cmd = [
            str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
            "-m", mode, "-w", "-t", "60", "restart",
        ]
        self._check(cmd, _run_as(), "pg_ctl restart")

    def stop(self, mode: str = "fast") -> None:
        if not self._owned or self.base_dir is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            cmd = [str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-m", mode, "-w", "stop"]
            self._run(cmd, _run_as())

    def cleanup(self) -> None:
        self.stop()
        if self._owned and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def log_tail(self, max_bytes: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return self.log_file.read_text(errors="replace")[-max_bytes:]
        return ""

    def create_database(self, name: str, template: str | None = None) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template is not None:
                stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            conn.execute(stmt)
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def _run(self, cmd: list[str], os_user: str | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cmd, user=os_user, capture_output=True, text=True, check=False,
            cwd=str(self.base_dir), env={**os.environ, "LC_ALL": "C.UTF-8"},
        )

    def _check(self, cmd: list[str], os_user: str | None, what: str) -> None:
        result = self._run(cmd, os_user)
        if result.returncode != 0:
            raise PostgresStartError(
                f"{what} failed ({result.returncode}): {result.stderr[-2000:]}"
            )


@contextlib.contextmanager
def throwaway_postgres(**settings: str) -> Iterator[ThrowawayPostgres]:
    """Start a cluster, yield it, always stop and delete it (also on failure)."""
    cluster = ThrowawayPostgres(settings=dict(settings))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.cleanup()


def wait_ready(dsn: str, deadline_s: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
