"""Transport error classes, importable without loading ``ssl``/``http.client``.

The claim coordinator classifies these; keeping them here lets it do so without
importing the transport (R-LAY-1). ``worker.transport`` re-exports them.
"""

from __future__ import annotations

__all__ = [
    "CredentialError",
    "InvalidOrigin",
    "NetworkError",
    "ProtocolViolation",
    "RequestTooLarge",
    "TimeoutError_",
    "TlsClientRejected",
    "TlsHandshakeFailed",
    "TransportError",
]


class InvalidOrigin(ValueError):
    """The ingress origin is not a bare ``https://host[:port]``."""


class CredentialError(Exception):
    """Local TLS material or the credential file is unusable (configuration)."""


class RequestTooLarge(ValueError):
    """The request body exceeds its limit (4 KiB; a lease completion 16 KiB): never sent."""


class TransportError(Exception):
    """A request did not produce an acceptable response."""


class TlsClientRejected(TransportError):
    """The server refused our client certificate: an authentication failure."""


class TlsHandshakeFailed(TransportError):
    """Handshake failed on our side or for protocol reasons (untrusted server, TLS < 1.3)."""


class NetworkError(TransportError):
    """Connection refused/reset/closed: transient."""


class TimeoutError_(TransportError):  # trailing _ : do not shadow the builtin
    """The exchange did not finish before its deadline."""


class ProtocolViolation(TransportError):
    """The server answered outside the contract (redirect, gzip, bad length...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
