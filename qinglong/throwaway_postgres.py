"""A throwaway PostgreSQL cluster for tests, the demo, dev env and benchmarks.

`initdb` refuses to run as root, so when we are root the cluster is created and
run as an unprivileged OS user (default `postgres`) in a private temp dir. The
server listens on a unix socket in that dir and on a free loopback port, with
`fsync=on` so durability claims are measured against a real disk contract.

Set `QL_TEST_DSN` (or pass `existing_dsn`) to use a running server instead; then
nothing is started or stopped and databases are created on that server.

Authentication (`auth`):

* `Auth.TRUST` (tests, benchmarks): no password exists anywhere, so none can
  leak through argv, a file or a log; the cluster lives only for one run.
* `Auth.SCRAM` (`qinglong dev up`, the demo): `scram-sha-256` on TCP for every
  role, `peer` on the unix socket. The superuser's password is generated here
  and handed to `initdb --pwfile` through a 0600 file that is removed right
  after; login roles get theirs as a SCRAM verifier computed client-side, so
  no plaintext password reaches the server, its log or any command line. The
  passwords live in this object (never in its repr) and in the DSNs `dsn()`
  builds, which callers must only write to 0600 files or pass through the
  environment.
"""

from __future__ import annotations

import contextlib
import enum
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN = Path(os.environ.get("QL_PG_BIN", "/usr/lib/postgresql/15/bin"))
DEFAULT_OS_USER = "postgres"


class Auth(enum.Enum):
    """How clients authenticate (see the module docstring)."""

    TRUST = "trust"
    SCRAM = "scram"


PASSWORD_BYTES = 32


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
    existing_dsn: str | None = field(default=None, repr=False)
    base_dir: Path | None = None
    port: int = 0
    superuser: str = "postgres"
    auth: Auth = Auth.TRUST
    # role -> generated password (Auth.SCRAM only); never in a repr.
    passwords: dict[str, str] = field(default_factory=dict, repr=False)
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
        role = user or self.superuser
        dsn = f"host=127.0.0.1 port={self.port} dbname={dbname} user={role} connect_timeout=10"
        password = self.passwords.get(role)
        # token_urlsafe passwords need no conninfo quoting.
        return dsn if password is None else f"{dsn} password={password}"

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
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.superuser,
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-instructions",
        ]
        if self.auth is Auth.TRUST:
            self._check([*cmd, "--auth=trust"], os_user, "initdb")
            return
        password = secrets.token_urlsafe(PASSWORD_BYTES)
        pwfile = self._write_pwfile(password, os_user)
        try:
            self._check(
                [*cmd, "--auth-local=peer", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"],
                os_user,
                "initdb",
            )
        finally:
            pwfile.unlink(missing_ok=True)
        self.passwords[self.superuser] = password

    def _write_pwfile(self, password: str, os_user: str | None) -> Path:
        """The superuser password for `initdb --pwfile`: 0600 from creation, owned by
        the OS user initdb runs as (never on initdb's command line)."""
        assert self.base_dir is not None
        path = self.base_dir / "initdb.pwfile"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if os_user is not None:
                entry = pwd.getpwnam(os_user)
                os.fchown(fd, entry.pw_uid, entry.pw_gid)
            os.write(fd, f"{password}\n".encode())
        finally:
            os.close(fd)
        return path

    def ensure_login_role(self, role: str, member_of: str, dbname: str = "postgres") -> str:
        """Create LOGIN role `role` in group `member_of` if missing; return its DSN.

        Under Auth.SCRAM the role gets a fresh generated password, sent as a SCRAM
        verifier computed here (the server, its log and pg_stat_activity never see
        the plaintext). Roles are cluster-wide, `dbname` only picks the DSN's database.
        """
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if exists is None:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(role), sql.Identifier(member_of)
                    )
                )
            if self.auth is Auth.SCRAM and self.existing_dsn is None:
                password = secrets.token_urlsafe(PASSWORD_BYTES)
                verifier = conn.pgconn.encrypt_password(
                    password.encode(), role.encode(), b"scram-sha-256"
                ).decode()
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(verifier)
                    )
                )
                self.passwords[role] = password
        return self.dsn(dbname, user=role)

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
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                "60",
                "start",
            ]
            result = self._run(cmd, os_user)
            if result.returncode == 0:
                return
            last_error = result.stderr + self.log_tail()
        raise PostgresStartError(f"pg_ctl start failed: {last_error[-2000:]}")

    def restart(self, mode: str = "fast") -> None:
        """Restart in place (chaos tests use mode='immediate')."""
        cmd = [
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-m",
            mode,
            "-w",
            "-t",
            "60",
            "restart",
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
            cmd,
            user=os_user,
            capture_output=True,
            text=True,
            check=False,
            cwd=str(self.base_dir),
            env={**os.environ, "LC_ALL": "C.UTF-8"},
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
