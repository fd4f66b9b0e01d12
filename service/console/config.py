"""How a console is started: where it listens, which database it reads."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8088
DEFAULT_REFRESH_S = 5


class RemoteBindRefused(ValueError):
    """A non-loopback address without --allow-remote."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


@dataclass(frozen=True)
class ConsoleConfig:
    dsn: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    refresh_s: int = DEFAULT_REFRESH_S

    def __post_init__(self) -> None:
        if not self.allow_remote and not is_loopback(self.host):
            raise RemoteBindRefused(
                f"refusing to serve the console on {self.host!r}: it is not a loopback "
                "address; pass --allow-remote to expose it (it has no login of its own)")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")
        if not 0 <= self.refresh_s <= 3600:
            raise ValueError("refresh must be 0 (off) to 3600 seconds")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"
