"""The worker identity of a TLS peer: its certificate's SAN URI.

The handshake already verified the chain; this only reads who the peer is. A
certificate must carry exactly one `urn:qinglong:worker:<uuid>` URI with a
lowercase canonical UUID, otherwise it names no worker and requests are refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from aiohttp import web

from qinglong.service.pki import worker_id_from_cert_der

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def worker_id_from_der(der: bytes) -> str | None:
    """The worker id named by the certificate, or None if it names none, several,
    or something that is not a canonical UUID."""
    found = worker_id_from_cert_der(der)
    if found is None or not _UUID.match(found):
        return None
    return found


def peer_certificate(request: web.Request) -> bytes | None:
    """DER bytes of the verified client certificate of this request's connection."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True) or None


@dataclass
class PeerIdentities:
    """The worker ids of the client certificates a replica has seen, by the
    SHA-256 of their DER bytes.

    Parsing the certificate was a tenth of an idle pull's CPU in the ingress
    (12 µs of 0.8-1.1 ms, docs/BENCHMARKS.md), repeated for every request of a
    kept-alive connection. The answer is a pure function of the certificate's
    bytes (the handshake already verified the chain and validity), so it is
    cached by them: a different certificate — re-issued, or another worker's —
    is a different key. Bounded: the oldest entry goes when `max_entries` are
    held (32 bytes of key each, not the certificate).
    """

    max_entries: int = 16384
    _known: dict[bytes, str | None] = field(default_factory=dict)

    def worker_id(self, der: bytes) -> str | None:
        key = hashlib.sha256(der).digest()
        try:
            return self._known[key]
        except KeyError:
            pass
        found = worker_id_from_der(der)
        if len(self._known) >= self.max_entries:
            del self._known[next(iter(self._known))]
        self._known[key] = found
        return found

    def __len__(self) -> int:
        return len(self._known)

    def of(self, request: web.Request) -> str | None:
        """Worker id of the verified client certificate of this request's connection."""
        der = peer_certificate(request)
        return None if der is None else self.worker_id(der)
