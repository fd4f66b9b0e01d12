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
    try:
        # cryptography skips text around the PEM blocks (a bundle's "# Subject: …"
        # comments), but the ssl module's cadata must be ASCII.
        return pem.decode("ascii")
    except UnicodeDecodeError as exc:
        raise TlsConfigError(
            f"worker CA bundle holds a non-ASCII byte at offset {exc.start}"
        ) from None


def build_context(cert_file: str, key_file: str, client_ca_file: str) -> ssl.SSLContext:
    """A fresh server context: TLS 1.3 only, client certificate required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.verify_mode = ssl.CERT_REQUIRED
    # No resumption tickets: a resumed session skips certificate verification, so
    # an expired or re-issued worker certificate would outlive its validity.
    ctx.num_tickets = 0
    anchors = load_anchor_bundle(client_ca_file)
    try:
        ctx.load_verify_locations(cadata=anchors)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"cannot load worker CA bundle: {exc.reason}") from None
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load server certificate: {type(exc).__name__}") from None
    return ctx


@dataclass
class ServerTls:
    """The server SSLContext in use plus the files it was built from.

    `reload()` builds a *new* context from the files (server chain and worker CA
    bundle) and swaps it in: an SSLContext can gain trust anchors but never lose
    one, so a replaced or shortened CA bundle needs a fresh context. The listener
    reads `context` for every new handshake; established connections keep theirs
    and the listening socket is untouched. A file that cannot be used leaves the
    previous context in place.
    """

    context: ssl.SSLContext
    cert_file: str
    key_file: str
    client_ca_file: str

    def reload(self) -> None:
        try:
            fresh = build_context(self.cert_file, self.key_file, self.client_ca_file)
        except TlsConfigError as exc:
            # Keep serving with the old material rather than dropping the listener.
            log.error(
                "TLS reload failed; keeping the previous certificate and worker CA bundle",
                extra={"event": "tls.reload_failed", "detail": str(exc)},
            )
            raise
        self.context = fresh
        log.info("certificate chain and worker CA bundle reloaded", extra={"event": "tls.reloaded"})


def server_tls(cert_file: str, key_file: str, client_ca_file: str) -> ServerTls:
    return ServerTls(
        context=build_context(cert_file, key_file, client_ca_file),
        cert_file=cert_file,
        key_file=key_file,
        client_ca_file=client_ca_file,
    )
