"""`qinglong console --dsn DSN [--host 127.0.0.1] [--port 8088] [--allow-remote
--tls-cert F --tls-key F --auth-token-file F --allowed-host H ...]` (SPEC §10):
the read-only operator console, a process of its own.

It binds loopback (plain HTTP, no login) unless --allow-remote, which serves
HTTPS only, wants the access token of --auth-token-file on every request
(Bearer or the login form's session cookie) and answers only the
--allowed-host names; without all of them it refuses to start (exit 2). It
prints its URL as its first line once it listens, and serves until
SIGINT/SIGTERM. aiohttp and psycopg are imported inside the handler (cli.py
imports this module for every command's parser; the config module it imports
for its defaults needs neither).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable

from qinglong.cli import Subparsers
from qinglong.dsn_option import add_dsn_argument

Handler = Callable[[argparse.Namespace], int]
EXIT_USAGE = 2
# Where `qinglong demo` runs its console.
LOOPBACK = "127.0.0.1"


def register(sub: Subparsers, lazy: Callable[[str], Handler]) -> None:
    console = sub.add_parser("console", help="the read-only web operator console")
    add_dsn_argument(console, help="PostgreSQL DSN (a role with ql_readonly is enough)")
    console.add_argument(
        "--host",
        default=None,
        help="address to listen on (default 127.0.0.1; a non-loopback "
        "address needs --allow-remote)",
    )
    console.add_argument(
        "--port", type=_port, default=None, help="TCP port (default 8088; 0 = any free port)"
    )
    console.add_argument(
        "--allow-remote",
        action="store_true",
        help="serve beyond loopback: HTTPS with an access token; needs "
        "--tls-cert, --tls-key, --auth-token-file and --allowed-host",
    )
    console.add_argument(
        "--tls-cert",
        metavar="FILE",
        default=None,
        help="server certificate chain, PEM (with --allow-remote)",
    )
    console.add_argument(
        "--tls-key", metavar="FILE", default=None, help="its private key, PEM (with --allow-remote)"
    )
    console.add_argument(
        "--auth-token-file",
        metavar="FILE",
        default=None,
        help="file (mode 0600) holding the access token every request "
        "presents (with --allow-remote)",
    )
    console.add_argument(
        "--allowed-host",
        metavar="HOST",
        action="append",
        default=[],
        help="a Host name the console answers (repeatable; others get 421; with --allow-remote)",
    )
    console.add_argument(
        "--refresh-s",
        type=_refresh,
        default=None,
        help="seconds between in-page refreshes (default 5; 0 = off)",
    )
    console.set_defaults(handler=lazy("qinglong.console_cli:console_command"))


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be 0..65535")
    return value


def _refresh(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be 0..3600")
    return value


def console_command(args: argparse.Namespace) -> int:
    from qinglong.service.console.config import ConsoleConfig, RemoteBindRefused
    from qinglong.service.console.serve import serve_forever

    try:
        # Flags left out take ConsoleConfig's defaults (the parser has none of its
        # own: building it must not import the service package).
        given = {"host": args.host, "port": args.port, "refresh_s": args.refresh_s}
        config = ConsoleConfig(
            dsn=args.dsn,
            allow_remote=args.allow_remote,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            auth_token_file=args.auth_token_file,
            allowed_hosts=tuple(args.allowed_host),
            **{k: v for k, v in given.items() if v is not None},
        )
    except RemoteBindRefused as exc:
        sys.stderr.write(f"qinglong console: {exc}\n")
        return EXIT_USAGE
    return serve_forever(config)


# ------------------------------------------------------------ for `qinglong demo`


def pick_port(preferred: int, host: str = LOOPBACK) -> int:
    """`preferred` when it is free on `host`, else any free port (0 = any)."""
    import socket

    for candidate in (preferred, 0) if preferred else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError(f"no free TCP port on {host}")


def ensure_console_role(admin_dsn: str, role: str, group: str = "ql_readonly") -> str:
    """A LOGIN role that is a member of `group` (ql_readonly; the demo's producer API
    login: ql_producer), made over `admin_dsn`; its DSN.

    For `qinglong demo --dsn` (no throwaway cluster whose helper would do it): the
    console must not read as the admin. A fresh generated password is sent as a
    SCRAM verifier computed here (the server and its log never see the
    plaintext); it lives only in the returned DSN (which the demo writes to a
    0600 file). psycopg.Error when the admin may not create roles.
    """
    import secrets

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    password = secrets.token_urlsafe(24)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        name = sql.Identifier(role)
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(name, sql.Identifier(group))
            )
        else:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), name))
        verifier = conn.pgconn.encrypt_password(
            password.encode(), role.encode(), b"scram-sha-256"
        ).decode()
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(name, sql.Literal(verifier)))
    return make_conninfo(admin_dsn, user=role, password=password)


def console_argv(dsn_file: str, port: int, refresh_s: int = 2) -> list[str]:
    """The command line of a console reading the DSN from a 0600 file (no secret in argv)."""
    return [
        sys.executable,
        "-m",
        "qinglong",
        "console",
        "--dsn-file",
        dsn_file,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--refresh-s",
        str(refresh_s),
    ]


def wait_listening(
    process: subprocess.Popen[bytes], port: int, timeout_s: float, host: str = LOOPBACK
) -> None:
    """Until `port` accepts connections; RuntimeError if `process` exits or time runs out."""
    import socket
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the console exited with status {process.returncode}")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex((host, port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the console did not listen on {host}:{port} within {timeout_s:.0f} s")
