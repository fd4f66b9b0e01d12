"""Wait for a peer's complete ClientHello without reading it and without TLS state.

A TLS handshake costs the server an ECDHE key agreement and a signature (~4 ms
of CPU) and a TLS object per connection, so the listener starts one only for a
peer that has sent its whole first TLS record (the ClientHello). Until then a
connection is a socket and a timer: nothing is read, so the bytes stay in the
kernel and the TLS layer later reads them as if it had been there all along.

`SO_RCVLOWAT` makes the socket report readable only once the number of bytes
still missing has arrived, so a peer dripping a ClientHello byte by byte wakes
the event loop a handful of times, not once per byte; a peer that closes (FIN or
RST) wakes it at once whatever the low-water mark. The mark is a hint, not a
promise: under TCP memory pressure the kernel reports the socket readable below
it. So a wake with fewer bytes than asked for means "closed" only when the
socket says the peer hung up (POLLRDHUP/POLLHUP/POLLERR) — a slow live peer is
waited for, after a short pause so that repeated early wakes cannot spin.

The peeked record also names the ClientHello (`hello_fingerprints`): its random
and its key shares, which a real client draws afresh for every connection. A
replayed ClientHello repeats them, and the listener closes it before any TLS
work (service/connection_caps.py `SeenHellos`).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket

RECORD_HEADER_BYTES = 5
HANDSHAKE_RECORD = 0x16
# RFC 8446 §5.1: a plaintext record carries at most 2^14 bytes.
MAX_RECORD_BYTES = 2**14
# After a wake below the low-water mark from a live peer (memory pressure).
EARLY_WAKE_PAUSE_S = 0.01
_HUNG_UP = select.POLLRDHUP | select.POLLHUP | select.POLLERR
CLIENT_HELLO = 0x01
KEY_SHARE_EXTENSION = 0x0033
RANDOM_BYTES = 32


class PeerClosed(ConnectionError):
    """The peer closed (or reset) before its ClientHello was complete."""


def bytes_needed(head: bytes) -> int | None:
    """How many bytes the first record needs in total, given what has arrived;
    None when the bytes are not a TLS handshake record (or claim an impossible
    length): the TLS layer then refuses them at once, so there is nothing to wait
    for."""
    if not head:
        return 1
    if head[0] != HANDSHAKE_RECORD:
        return None
    if len(head) < RECORD_HEADER_BYTES:
        return RECORD_HEADER_BYTES
    length = int.from_bytes(head[3:5], "big")
    if length > MAX_RECORD_BYTES:
        return None
    return RECORD_HEADER_BYTES + length


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _set_low_water(sock: socket.socket, count: int) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, count)


def _peer_hung_up(sock: socket.socket) -> bool:
    """Has the peer sent its FIN, reset, or failed? A peek cannot tell while
    bytes are queued (it returns them, never b""); poll(2) can."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLRDHUP)
    return any(events & _HUNG_UP for _, events in poller.poll(0))


class _Reader:
    """Length-prefixed fields of a TLS handshake message; IndexError past its end."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def take(self, count: int) -> bytes:
        if self._at + count > len(self._data):
            raise IndexError("past the end")
        self._at += count
        return self._data[self._at - count : self._at]

    def vector(self, length_bytes: int) -> bytes:
        return self.take(int.from_bytes(self.take(length_bytes), "big"))

    @property
    def done(self) -> bool:
        return self._at >= len(self._data)


def hello_fingerprints(record: bytes) -> tuple[bytes, ...]:
    """The values a real client draws afresh for each ClientHello (RFC 8446
    §4.1.2): the 32-byte random, and each key share's (group, public key). Read
    from the first record as peeked; () when it holds no ClientHello, and as much
    as could be read when it is truncated or malformed (the TLS layer refuses
    those)."""
    if (
        len(record) < RECORD_HEADER_BYTES + 4
        or record[0] != HANDSHAKE_RECORD
        or record[RECORD_HEADER_BYTES] != CLIENT_HELLO
    ):
        return ()
    body = _Reader(record[RECORD_HEADER_BYTES + 4 :])
    found: list[bytes] = []
    try:
        body.take(2)  # legacy_version
        found.append(b"random:" + body.take(RANDOM_BYTES))
        body.vector(1)  # legacy_session_id
        body.vector(2)  # cipher_suites
        body.vector(1)  # legacy_compression_methods
        extensions = _Reader(body.vector(2))
        while not extensions.done:
            kind = int.from_bytes(extensions.take(2), "big")
            data = extensions.vector(2)
            if kind == KEY_SHARE_EXTENSION:
                shares = _Reader(_Reader(data).vector(2))
                while not shares.done:
                    group = shares.take(2)
                    found.append(b"share:" + group + shares.vector(2))
    except IndexError:
        pass
    return tuple(found)


async def wait_for_client_hello(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """Return the peeked bytes once the first TLS record is fully in the socket's
    receive queue (or once the bytes are evidently not TLS); they stay queued for
    the TLS layer. Raises PeerClosed if the peer goes away first. The caller bounds
    the wait (the handshake deadline)."""
    need = 1
    try:
        while True:
            _set_low_water(sock, need)
            await _readable(loop, sock)
            try:
                head = sock.recv(RECORD_HEADER_BYTES + MAX_RECORD_BYTES, socket.MSG_PEEK)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise PeerClosed(f"connection failed before its ClientHello: {exc}") from None
            if not head:
                raise PeerClosed("connection closed before its ClientHello")
            total = bytes_needed(head)
            if total is None or len(head) >= total:
                return head
            if len(head) < need:
                # Woken below the low-water mark: a close, or memory pressure.
                if _peer_hung_up(sock):
                    raise PeerClosed("connection closed inside its ClientHello")
                await asyncio.sleep(EARLY_WAKE_PAUSE_S)
            need = total
    finally:
        with contextlib.suppress(OSError):
            _set_low_water(sock, 1)  # the TLS layer reads normally from here
