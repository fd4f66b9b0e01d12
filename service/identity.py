"""The worker identity of a TLS peer: its certificate's SAN URI.

The handshake already verified the chain; this only reads who the peer is. A
certificate must carry exactly one `urn:qinglong:worker:<uuid>` URI with a
lowercase canonical UUID, otherwise it names no worker and requests are refused.
"""

from __future__ import annotations

import re

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


def peer_worker_id(request: web.Request) -> str | None:
    """Worker id of the verified client certificate of this request's connection."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return worker_id_from_der(der)
