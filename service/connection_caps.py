"""The per-process caps of the worker listener (SPEC §12), as plain bookkeeping.

Three stages, each bounded on its own so that one cannot starve another:

- hello waits: accepted connections whose ClientHello is not complete yet. They
  cost a socket and a timer; at `max_hello_waits` the *oldest* is closed to make
  room, so a flood of silent or dribbling connections only ever pushes out its
  own kind (a real worker sends its ClientHello within a round trip of
  connecting).
- replayed ClientHellos: a complete ClientHello whose random or key share was
  seen before is closed before any TLS work (`SeenHellos`): a real client draws
  both afresh for every connection, a replay of a captured one cannot (and could
  never finish the key exchange anyway).
- handshakes: a complete ClientHello waits for a turn; at most `max_handshakes`
  handshakes wait on the server's part (its first flight: the key exchange and
  the signature, the CPU) at once. Once the server's flight is out the turn is
  returned: waiting for the client's reply (its certificate and Finished) costs
  no CPU, so a client that stalls there holds no turn (it still counts below
  `max_connections`, and the listener's short step deadline closes it).
  Handshakes plus established connections never exceed `max_connections`.
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
    without leaking a turn.

    `handshaking` counts the turns (handshakes waiting on the server's flight),
    `replying` the handshakes whose turn ended with the server's flight
    (`server_flight_sent`), now waiting on the client."""

    def __init__(self, max_handshakes: int, max_connections: int) -> None:
        self._max_handshakes = max_handshakes
        self._max_connections = max_connections
        self.handshaking = 0
        self.replying = 0
        self.established = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _free(self) -> bool:
        return (
            self.handshaking < self._max_handshakes
            and self.handshaking + self.replying + self.established < self._max_connections
        )

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

    def server_flight_sent(self) -> None:
        """The server's part of a handshake is done: its turn goes to the next."""
        self.handshaking -= 1
        self.replying += 1
        self._grant()

    def handshake_done(self, *, established: bool, replying: bool = False) -> None:
        """A handshake ends (holding its turn, or `replying` after its flight): it
        failed, or the connection is now established."""
        if replying:
            self.replying -= 1
        else:
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


class SeenHellos:
    """Fingerprints (service/client_hello.py `hello_fingerprints`) of the most
    recent ClientHellos, at most `limit`. A ClientHello sharing any fingerprint
    with one seen before is a replay; a replayed fingerprint is kept as if new, so
    a flood replaying a few captured ClientHellos cannot age them out."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def first_sight(self, fingerprints: tuple[bytes, ...]) -> bool:
        """Remember `fingerprints`; False if any of them was seen before."""
        replayed = False
        for fingerprint in fingerprints:
            if fingerprint in self._entries:
                self._entries.move_to_end(fingerprint)
                replayed = True
        if replayed:
            return False
        for fingerprint in fingerprints:
            self._entries[fingerprint] = None
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        return True
