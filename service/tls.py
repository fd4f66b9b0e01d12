"""Server TLS: TLS 1.3 only, client certificate required (R-ING).

Plaintext, TLS 1.2, missing, untrusted and expired client certificates all fail
in the handshake because OpenSSL verifies the chain against the worker CA bundle
before the connection reaches aiohttp.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

MIN_ANCHORS = 1
MAX_ANCHORS = 8

log = logging.getLogger("qinglong.ingress.tls")


class TlsConfigError(ValueError):
    """The certificate material cannot be used."""


def count_anchors(pem: bytes) -> int:
    """Number of certificates in a PEM bundle (refuses garbage between them)."""
    try:
        return len(x509.load_pem_x509_certificates(pem))
    except ValueError:
        raise TlsConfigError("worker CA bundle is not a valid PEM certificate list") from None


def load_anchor_bundle(path: str) -> str:
    """Read the worker CA bundle, enforcing 1..8 trust anchors."""
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"cannot read worker CA bundle: {exc.strerror}") from None
    count = count_anchors(pem)
    if not MIN_ANCHORS <= count <= MAX_ANCHORS:
        raise TlsConfigError(
            f"worker CA bundle must hold {MIN_ANCHORS}..{MAX_ANCHORS} certificates, has {count}"
        )
    return pem.decode("ascii")


@dataclass
class ServerTls:
    """The one server SSLContext plus the files it was built from.

    `reload()` loads a new chain into the *same* context: new handshakes use it,
    established connections keep theirs, and the listening socket is untouched.
    """

    context: ssl.SSLContext
    cert_file: str
    key_file: str

    def reload(self) -> None:
        try:
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            # Keep serving with the old chain rather than dropping the listener.
            log.error("certificate reload failed; keeping the previous chain",
                      extra={"event": "tls.reload_failed", "error": type(exc).__name__})
            raise TlsConfigError("certificate reload failed") from None
        log.info("certificate chain reloaded", extra={"event": "tls.reloaded"})


def server_tls(cert_file: str, key_file: str, client_ca_file: str) -> ServerTls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.verify_mode = ssl.CERT_REQUIRED
    # No resumption tickets: a resumed session skips certificate verification, so
    # an expired or re-issued worker certificate would outlive its validity.
    ctx.num_tickets = 0
    ctx.load_verify_locations(cadata=load_anchor_bundle(client_ca_file))
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load server certificate: {type(exc).__name__}") from None
    return ServerTls(context=ctx, cert_file=cert_file, key_file=key_file)
