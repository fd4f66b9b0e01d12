"""How a console is started: where it listens, which database it reads, and —
with --allow-remote — its TLS material, access token file and allowed hosts."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088
DEFAULT_REFRESH_S = 5
# An --allowed-host: a DNS name or an IP literal (IPv6 with or without brackets), no port.
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")


class RemoteBindRefused(ValueError):
    """The flags do not make a console that may start: a non-loopback address
    without --allow-remote, --allow-remote without its TLS, token file and
    allowed hosts, or those without --allow-remote."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def normal_host(value: str) -> str:
    """An --allowed-host as the Host check compares it: lower case, IPv6 unbracketed.

    ValueError when it is neither a DNS name nor an IP literal (a port, a
    scheme, a path or a wildcard is refused: the check is exact).
    """
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if len(name) > 253 or not _HOST_NAME.fullmatch(name):
        raise ValueError(
            f"--allowed-host {value!r} is not a host name or IP address "
            "(no port, scheme or wildcard)"
        )
    return name


def redacted_dsn(dsn: str) -> str:
    """`dsn` (URI or key=value) with its password replaced, for reprs and messages."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # psycopg.ProgrammingError: any text that does not parse
        return "<unparsable DSN>"
    if "password" in params:
        params["password"] = "<redacted>"
    return make_conninfo("", **params)


@dataclass(frozen=True)
class ConsoleConfig:
    dsn: str = field(repr=False)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    refresh_s: int = DEFAULT_REFRESH_S
    tls_cert: str | None = None
    tls_key: str | None = None
    auth_token_file: str | None = None
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.allow_remote and not is_loopback(self.host):
            raise RemoteBindRefused(
                f"refusing to serve the console on {self.host!r}: it is not a loopback "
                "address; pass --allow-remote (with --tls-cert, --tls-key, "
                "--auth-token-file and --allowed-host) to expose it"
            )
        self._check_remote_flags()
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")
        if not 0 <= self.refresh_s <= 3600:
            raise ValueError("refresh must be 0 (off) to 3600 seconds")
        try:
            hosts = tuple(normal_host(h) for h in self.allowed_hosts)
        except ValueError as exc:
            raise RemoteBindRefused(str(exc)) from None
        object.__setattr__(self, "allowed_hosts", hosts)

    def _remote_flags(self) -> dict[str, bool]:
        return {
            "--tls-cert FILE": bool(self.tls_cert),
            "--tls-key FILE": bool(self.tls_key),
            "--auth-token-file FILE": bool(self.auth_token_file),
            "--allowed-host HOST": bool(self.allowed_hosts),
        }

    def _check_remote_flags(self) -> None:
        flags = self._remote_flags()
        if self.allow_remote:
            missing = [flag for flag, given in flags.items() if not given]
            if missing:
                raise RemoteBindRefused(
                    "--allow-remote requires " + ", ".join(missing) + " (missing): a remote "
                    "console is served only over TLS, to requests that present the access "
                    "token and name an allowed host"
                )
            return
        stray = [flag.split()[0] for flag, given in flags.items() if given]
        if stray:
            raise RemoteBindRefused(
                ", ".join(stray) + " apply only with --allow-remote "
                "(a loopback console is plain HTTP without a token)"
            )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in (
                "host",
                "port",
                "allow_remote",
                "refresh_s",
                "tls_cert",
                "tls_key",
                "auth_token_file",
                "allowed_hosts",
            )
        )
        return f"ConsoleConfig(dsn={redacted_dsn(self.dsn)!r}, {shown})"

    __str__ = __repr__

    @property
    def scheme(self) -> str:
        return "https" if self.allow_remote else "http"

    @property
    def url(self) -> str:
        """Where to open it: a remote console by its first --allowed-host."""
        name = self.allowed_hosts[0] if self.allow_remote else self.host
        host = f"[{name}]" if ":" in name else name
        return f"{self.scheme}://{host}:{self.port}/"
