"""The per-process caps of the worker listener (SPEC §12), as plain bookkeeping.

Three stages, each bounded on its own so that one cannot starve another:

- hello waits: accepted connections whose ClientHello is not complete yet. They
  cost a socket and a timer; at `max_hello_waits` the *oldest* is closed to make
  room, so a flood of silent or dribbling connections only ever pushes out its
  own kind (a real worker sends its ClientHello within a round trip of
  connecting).
- handshakes: a complete ClientHello waits for a turn; at most `max_handshakes`
  TLS handshakes run at once, and handshakes plus established connections never
  exceed `max_connections`.
- established connections, at most `max_connections_per_worker` per certificate
  identity.

Nothing here touches a socket; service/tls_site.py drives it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Hashable


class HandshakeTurns:
    """FIFO turns for TLS handshakes under both the handshake cap and the
    connection cap. `acquire()` may be cancelled (deadline, eviction) at any point
    without leaking a turn."""

    def __init__(self, max_handshakes: int, max_connections: int) -> None:
        self._max_handshakes = max_handshakes
        self._max_connections = max_connections
        self.handshaking = 0
        self.established = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _free(self) -> bool:
        return (self.handshaking < self._max_handshakes
                and self.handshaking + self.established < self._max_connections)

    async def acquire(self) -> None:
        if not self._waiters and self._free():
            self.handshaking += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.handshake_done(established=False)  # granted, then cancelled
            else:
                self._waiters.remove(waiter)
            raise

    def handshake_done(self, *, established: bool) -> None:
        """A turn ends: the handshake failed, or the connection is now established."""
        self.handshaking -= 1
        if established:
            self.established += 1
        self._grant()

    def connection_closed(self) -> None:
        self.established -= 1
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self._free():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.handshaking += 1
                waiter.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class IdentityCounter:
    """Established connections per certificate identity, at most `limit` each."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._counts: dict[str, int] = {}

    def acquire(self, identity: str) -> bool:
        count = self._counts.get(identity, 0)
        if count >= self._limit:
            return False
        self._counts[identity] = count + 1
        return True

    def release(self, identity: str) -> None:
        count = self._counts.get(identity, 0) - 1
        if count > 0:
            self._counts[identity] = count
        else:
            self._counts.pop(identity, None)

    def count(self, identity: str) -> int:
        return self._counts.get(identity, 0)


class HelloWaits:
    """Connections waiting for their ClientHello (or for a handshake turn), oldest
    first. `make_room()` names the one to close when the cap is reached."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: OrderedDict[Hashable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def make_room(self) -> Hashable | None:
        """At the cap: remove and return the oldest entry (the caller closes it)."""
        if len(self._entries) < self._limit:
            return None
        key, _ = self._entries.popitem(last=False)
        return key

    def add(self, key: Hashable) -> None:
        self._entries[key] = None

    def discard(self, key: Hashable) -> None:
        self._entries.pop(key, None)
