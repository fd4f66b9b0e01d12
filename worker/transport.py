"""HTTPS transport to the ingress (SPEC §6.5, §6.6; ADR-0110 §4).

Standard library only (``ssl`` + ``http.client``) and imported lazily by its
users (R-LAY-1): a worker that never pulls never loads TLS.

Contract:

* origin ``https://host[:port]`` only — no userinfo, path, query or fragment;
* TLS 1.3 exactly, server verified (chain + host name) against 1-8 trust
  anchors, client certificate + key presented; material comes from a
  :class:`CredentialProvider` on every request, each file at most 1 MiB;
* JSON POST with ``Authorization: Bearer ql3w_…``, ``Accept-Encoding: identity``;
  request body at most 4 KiB; timeout 15 s by default, 60 s hard cap, enforced as
  one deadline for the whole exchange;
* the response must be ``application/json``, identity-encoded, not a redirect,
  with a ``Content-Length`` within the caller's limit that matches the bytes read;
* one connection, kept alive at most once idle, closed explicitly by ``close()``
  (and on any error, since its state is then unknown).

Failures are typed so the coordinator can classify them. A TLS 1.3 client
certificate rejection arrives as an alert on the first read after the handshake
and is an *authentication* failure (:class:`TlsClientRejected`), not a network
blip. No exception message carries the credential or a token.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from worker.errors import (
    CredentialError,
    InvalidOrigin,
    NetworkError,
    ProtocolViolation,
    RequestTooLarge,
    TimeoutError_,
    TlsClientRejected,
    TlsHandshakeFailed,
    TransportError,
)

DEFAULT_TIMEOUT_S = 15.0
MAX_TIMEOUT_S = 60.0
REQUEST_LIMIT = 4 * 1024
OFFER_RESPONSE_LIMIT = 128 * 1024
RESPONSE_HARD_LIMIT = 1024 * 1024
MATERIAL_LIMIT = 1024 * 1024
CREDENTIAL_FILE_LIMIT = 1024
MAX_TRUST_ANCHORS = 8

_AUTHORIZATION = re.compile(r"^ql3w_[a-z0-9]{16}_[A-Za-z0-9_-]{43}$")
_PEM_CERT = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----"
)
_PATH = re.compile(r"^/[A-Za-z0-9/_.-]*$")
_HOST = re.compile(r"^[a-z0-9.-]+$|^[0-9a-f:.]+$")  # urlsplit lower-cases, strips [ ]

# TLS alerts by which a server refuses *our* certificate (OpenSSL reason codes).
_CLIENT_CERT_ALERTS = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED",
        "SSLV3_ALERT_CERTIFICATE_REVOKED",
        "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "TLSV1_ALERT_ACCESS_DENIED",
        "TLSV1_ALERT_DECRYPT_ERROR",
    }
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "OFFER_RESPONSE_LIMIT",
    "REQUEST_LIMIT",
    "CredentialError",
    "CredentialProvider",
    "Credentials",
    "FileCredentialProvider",
    "HttpsTransport",
    "InvalidOrigin",
    "NetworkError",
    "Origin",
    "ProtocolViolation",
    "RequestTooLarge",
    "Response",
    "TimeoutError_",
    "TlsClientRejected",
    "TlsHandshakeFailed",
    "TransportError",
    "parse_origin",
]


@dataclass(frozen=True)
class Origin:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"


def parse_origin(origin: str) -> Origin:
    """Accept only ``https://host[:port]`` (an optional trailing ``/`` is tolerated)."""
    if not isinstance(origin, str) or any(c.isspace() or ord(c) < 0x21 for c in origin):
        raise InvalidOrigin("origin must be a printable string without spaces")
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        raise InvalidOrigin("origin is not a valid URL") from None
    if parts.scheme != "https":
        raise InvalidOrigin("origin must use https")
    if "@" in parts.netloc:
        raise InvalidOrigin("origin must not carry userinfo")
    if parts.path not in ("", "/") or "?" in origin or "#" in origin:
        raise InvalidOrigin("origin must not carry a path, query or fragment")
    host = parts.hostname
    if not host or _HOST.fullmatch(host) is None or port == 0:
        raise InvalidOrigin("origin host or port is malformed")
    return Origin(host=host, port=port or 443)


@dataclass(frozen=True)
class Credentials:
    cert_file: str
    key_file: str
    ca_file: str
    authorization: str = field(repr=False)  # ql3w_<credentialId>_<secret>


class CredentialProvider(Protocol):
    def credentials(self) -> Credentials: ...


@dataclass(frozen=True)
class FileCredentialProvider:
    """Reads the ``ql3w_…`` credential file on every call (rotation needs no restart)."""

    cert_file: str
    key_file: str
    ca_file: str
    credential_file: str

    def credentials(self) -> Credentials:
        return Credentials(
            self.cert_file, self.key_file, self.ca_file, read_credential_file(self.credential_file)
        )


def read_credential_file(path: str) -> str:
    name = os.path.basename(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CredentialError(f"cannot open credential file {name}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077:
            raise CredentialError(f"credential file {name} is readable by group/other")
        raw = os.read(fd, CREDENTIAL_FILE_LIMIT + 1)
    finally:
        os.close(fd)
    value = raw.decode("ascii", "replace").strip()
    if len(raw) > CREDENTIAL_FILE_LIMIT or _AUTHORIZATION.fullmatch(value) is None:
        raise CredentialError(f"credential file {name} does not hold a ql3w credential")
    return value


def _check_material(path: str, what: str) -> None:
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise CredentialError(f"{what} {os.path.basename(path)}: {exc.strerror}") from None
    if size > MATERIAL_LIMIT:
        raise CredentialError(f"{what} {os.path.basename(path)} exceeds 1 MiB")


def _load_anchors(path: str) -> str:
    _check_material(path, "CA bundle")
    with open(path, "rb") as f:
        data = f.read(MATERIAL_LIMIT + 1)
    if len(data) > MATERIAL_LIMIT:
        raise CredentialError("CA bundle exceeds 1 MiB")
    anchors = _PEM_CERT.findall(data.decode("ascii", "replace"))
    if not 1 <= len(anchors) <= MAX_TRUST_ANCHORS:
        raise CredentialError(f"CA bundle must hold 1..{MAX_TRUST_ANCHORS} certificates")
    return "\n".join(anchors) + "\n"


def build_ssl_context(creds: Credentials) -> ssl.SSLContext:
    """TLS 1.3 only, server chain + host name verified, our client certificate loaded."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED + check_hostname
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    try:
        ctx.load_verify_locations(cadata=_load_anchors(creds.ca_file))
        _check_material(creds.cert_file, "certificate")
        _check_material(creds.key_file, "private key")
        ctx.load_cert_chain(creds.cert_file, creds.key_file)
    except ssl.SSLError as exc:
        raise CredentialError(f"unusable TLS material: {exc.reason or 'ssl error'}") from None
    except OSError as exc:
        raise CredentialError(f"unreadable TLS material: {exc.strerror}") from None
    return ctx


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: Mapping[str, str]  # lower-cased subset: content-type, content-length, retry-after
    retry_after_ms: int | None

    def json(self) -> Any:
        return json.loads(self.body)


def _retry_after_ms(value: str | None) -> int | None:
    # Only delta-seconds; an HTTP-date from our own ingress would be a bug.
    if value is None or not value.strip().isdigit():
        return None
    return min(int(value.strip()), 3600) * 1000


def _classify_ssl(exc: ssl.SSLError) -> TransportError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TlsHandshakeFailed("server certificate not trusted")
    reason = exc.reason or ""
    if reason in _CLIENT_CERT_ALERTS:
        return TlsClientRejected(f"server rejected client certificate ({reason.lower()})")
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return NetworkError("connection closed during TLS")
    return TlsHandshakeFailed(f"tls failure ({reason.lower() or 'unknown'})")


def _classify(exc: BaseException) -> TransportError:
    """Map a low-level failure onto the transport's error classes."""
    if isinstance(exc, TimeoutError | socket.timeout):
        return TimeoutError_("deadline exceeded")
    if isinstance(exc, ssl.SSLError):
        return _classify_ssl(exc)
    if isinstance(exc, http.client.RemoteDisconnected):
        return NetworkError("server closed the connection without a response")
    if isinstance(exc, http.client.HTTPException):
        return ProtocolViolation("malformed_response")
    if isinstance(exc, OSError):
        return NetworkError(f"network error ({exc.strerror or type(exc).__name__})")
    return ProtocolViolation("malformed_response")


def _media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError_("deadline exceeded")
        return left


class HttpsTransport:
    """A JSON-over-HTTPS client holding at most one (keep-alive) connection."""

    def __init__(
        self,
        origin: str,
        provider: CredentialProvider,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"timeout must be in (0, {MAX_TIMEOUT_S}] seconds")
        self.origin = parse_origin(origin)
        self.timeout_s = timeout_s
        self._provider = provider
        self._conn: http.client.HTTPSConnection | None = None
        self._conn_key: tuple[str, str, str] | None = None
        self._mutex = threading.Lock()  # one in-flight request

    def close(self) -> None:
        with self._mutex:
            self._drop()

    def __enter__(self) -> HttpsTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop(self) -> None:
        conn, self._conn, self._conn_key = self._conn, None, None
        if conn is not None:
            conn.close()

    def post_json(
        self,
        path: str,
        body: bytes | Mapping[str, Any],
        *,
        response_limit: int = OFFER_RESPONSE_LIMIT,
    ) -> Response:
        if _PATH.fullmatch(path) is None:
            raise ValueError("path must be a plain absolute path")
        if not 0 < response_limit <= RESPONSE_HARD_LIMIT:
            raise ValueError(f"response limit must be 1..{RESPONSE_HARD_LIMIT} bytes")
        payload = body if isinstance(body, bytes) else _encode(body)
        if len(payload) > REQUEST_LIMIT:
            raise RequestTooLarge(f"request body is {len(payload)} bytes (limit {REQUEST_LIMIT})")
        with self._mutex:
            creds = self._provider.credentials()
            deadline = _Deadline(self.timeout_s)
            try:
                conn = self._connection(creds, deadline)
                return self._exchange(conn, path, payload, creds, deadline, response_limit)
            except (TransportError, CredentialError):
                self._drop()  # unknown connection state after any failure: never reuse it
                raise
            except Exception as exc:
                self._drop()
                raise _classify(exc) from None
            except BaseException:
                self._drop()  # cancellation (KeyboardInterrupt etc.) propagates as is
                raise

    def _connection(self, creds: Credentials, deadline: _Deadline) -> http.client.HTTPSConnection:
        key = (creds.cert_file, creds.key_file, creds.ca_file)
        if self._conn is not None and (key != self._conn_key or not _idle_ok(self._conn)):
            self._drop()
        if self._conn is None:
            ctx = build_ssl_context(creds)
            conn = http.client.HTTPSConnection(
                self.origin.host, self.origin.port, timeout=deadline.remaining(), context=ctx
            )
            self._conn, self._conn_key = conn, key
            conn.connect()  # TCP + TLS handshake, errors classified by the caller
        return self._conn

    def _exchange(
        self,
        conn: http.client.HTTPSConnection,
        path: str,
        payload: bytes,
        creds: Credentials,
        deadline: _Deadline,
        limit: int,
    ) -> Response:
        headers = {
            "Authorization": f"Bearer {creds.authorization}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "Content-Length": str(len(payload)),
        }
        _set_timeout(conn, deadline)
        try:
            conn.request("POST", path, body=payload, headers=headers)
        except (ssl.SSLError, OSError) as exc:
            raise _surface_alert(conn, deadline) or _classify(exc) from None
        _set_timeout(conn, deadline)
        resp = conn.getresponse()
        response = _read_response(conn, resp, deadline, limit)
        if resp.will_close:
            self._drop()
        return response


def _encode(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _set_timeout(conn: http.client.HTTPSConnection, deadline: _Deadline) -> None:
    if conn.sock is not None:
        conn.sock.settimeout(deadline.remaining())


def _surface_alert(conn: http.client.HTTPSConnection, deadline: _Deadline) -> TransportError | None:
    """After a failed write, read once: a TLS 1.3 server that refused our certificate
    sent its alert and closed, and our write may hit the closed socket before we
    ever read that alert (SPEC §6.5). The queued alert is still readable."""
    sock = conn.sock
    if not isinstance(sock, ssl.SSLSocket):
        return None
    try:
        sock.settimeout(min(deadline.remaining(), 1.0))
        sock.recv(1)
    except ssl.SSLError as exc:
        err = _classify_ssl(exc)
        return err if isinstance(err, TlsClientRejected) else None
    except (OSError, TransportError):
        return None
    return None


def _idle_ok(conn: http.client.HTTPSConnection) -> bool:
    """An idle keep-alive socket must have nothing to read (no FIN, no stray bytes)."""
    sock = conn.sock
    if sock is None:
        return False
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def _read_response(
    conn: http.client.HTTPSConnection,
    resp: http.client.HTTPResponse,
    deadline: _Deadline,
    limit: int,
) -> Response:
    if 300 <= resp.status < 400:
        raise ProtocolViolation("redirect")
    encoding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
    if encoding != "identity":
        raise ProtocolViolation("content_encoding")
    if _media_type(resp.getheader("Content-Type")) != "application/json":
        raise ProtocolViolation("content_type")
    if resp.getheader("Transfer-Encoding") is not None:
        raise ProtocolViolation("transfer_encoding")
    declared = resp.getheader("Content-Length")
    if declared is None or not declared.isdigit():
        raise ProtocolViolation("content_length")
    length = int(declared)
    if length > limit:
        raise ProtocolViolation("response_too_large")
    body = _read_body(conn, resp, length, deadline)
    headers = {
        "content-type": resp.getheader("Content-Type") or "",
        "content-length": declared,
    }
    retry_after = resp.getheader("Retry-After")
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return Response(resp.status, body, headers, _retry_after_ms(retry_after))


def _read_body(
    conn: http.client.HTTPSConnection,
    resp: http.client.HTTPResponse,
    length: int,
    deadline: _Deadline,
) -> bytes:
    chunks: list[bytes] = []
    received = 0
    while received < length:
        _set_timeout(conn, deadline)  # one deadline for the whole body, not per recv
        chunk = resp.read1(min(65536, length - received))
        if not chunk:
            raise ProtocolViolation("content_length_mismatch")  # truncated
        chunks.append(chunk)
        received += len(chunk)
    resp.close()  # read1 does not mark a complete body done; the socket stays open
    return b"".join(chunks)
