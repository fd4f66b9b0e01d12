"""HTTPS transport to the ingress (SPEC §6.5, §6.6; ADR-0110 §4).

Standard library only (``ssl`` + ``socket``) and imported lazily by its users
(R-LAY-1): a worker that never pulls never loads TLS. The HTTP/1.1 exchange is
spoken here rather than through ``http.client``, which would load the
``email`` package (about 1 MiB resident, docs/EDGE.md) to parse two headers;
we need exactly one request shape and refuse every response that is not a
plain ``Content-Length`` JSON body anyway.

Contract:

* origin ``https://host[:port]`` only — no userinfo, path, query or fragment;
* TLS 1.3 exactly, server verified (chain + host name) against 1-8 trust
  anchors, client certificate + key presented; material comes from a
  :class:`CredentialProvider` on every request, each file at most 1 MiB;
* JSON POST with ``Authorization: Bearer ql3w_…``, ``Accept-Encoding: identity``;
  request body at most 4 KiB (a lease completion 16 KiB, SPEC §9.3; a live-log
  chunk 65 KiB, SPEC §15.1); timeout
  15 s by default, 60 s hard cap, enforced as one deadline for the whole exchange;
* the response must be ``application/json``, identity-encoded, not a redirect,
  with a ``Content-Length`` within the caller's limit that matches the bytes read;
  the status line and headers are bounded (64 KiB a line, 100 header lines);
* one connection, kept alive at most once idle, closed explicitly by ``close()``
  (and on any error, since its state is then unknown).

Failures are typed so the coordinator can classify them. A TLS 1.3 client
certificate rejection arrives as an alert on the first read after the handshake
and is an *authentication* failure (:class:`TlsClientRejected`), not a network
blip. No exception message carries the credential or a token.
"""

from __future__ import annotations

import contextlib
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

from qinglong.worker.errors import (
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
# SPEC §9.3: a lease completion carries the run's result and may be 16 KiB.
COMPLETE_REQUEST_LIMIT = 16 * 1024
# SPEC §15.1: a live-log request carries a chunk of up to 64 KiB (JSON-escaped).
LOG_REQUEST_LIMIT = 65 * 1024
_REQUEST_LIMITS = {"/v1/leases/complete": COMPLETE_REQUEST_LIMIT,
                   "/v1/leases/log": LOG_REQUEST_LIMIT}  # fmt: skip
OFFER_RESPONSE_LIMIT = 128 * 1024
RESPONSE_HARD_LIMIT = 1024 * 1024
MATERIAL_LIMIT = 1024 * 1024
CREDENTIAL_FILE_LIMIT = 1024
MAX_TRUST_ANCHORS = 8
MAX_LINE = 65536  # one status or header line (http.client's bound)
MAX_HEADERS = 100

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
    "COMPLETE_REQUEST_LIMIT",
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


class _Connection:
    """One TLS connection speaking the subset of HTTP/1.1 the worker needs."""

    def __init__(self, sock: ssl.SSLSocket, host_header: str) -> None:
        self.sock = sock
        self.host_header = host_header
        self._buffer = bytearray()

    @classmethod
    def open(cls, origin: Origin, ctx: ssl.SSLContext, deadline: _Deadline) -> _Connection:
        # parse_origin admits ASCII host names only, so bytes say the same as the str
        # would, without loading the IDNA codec (stringprep, unicodedata) to encode it.
        host_bytes = origin.host.encode("ascii")
        # typeshed types the host as str; getaddrinfo (under it) takes bytes as well.
        raw = socket.create_connection(
            (host_bytes, origin.port),  # type: ignore[arg-type]
            timeout=deadline.remaining(),
        )
        try:
            # Header and body leave in one write; no Nagle delay waiting for an ACK.
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.settimeout(deadline.remaining())
            sock = ctx.wrap_socket(raw, server_hostname=host_bytes)  # handshake happens here
        except BaseException:
            raw.close()
            raise
        host = f"[{origin.host}]" if ":" in origin.host else origin.host
        return cls(sock, host if origin.port == 443 else f"{host}:{origin.port}")

    def close(self) -> None:
        self._buffer.clear()
        with contextlib.suppress(OSError):
            self.sock.close()

    @property
    def buffered(self) -> bool:
        return bool(self._buffer)

    def send(self, head: bytes, payload: bytes, deadline: _Deadline) -> None:
        self.sock.settimeout(deadline.remaining())
        self.sock.sendall(head + payload)

    def _fill(self, deadline: _Deadline) -> bool:
        self.sock.settimeout(deadline.remaining())  # one deadline for all reads
        chunk = self.sock.recv(65536)
        self._buffer += chunk
        return bool(chunk)

    def readline(self, deadline: _Deadline) -> bytes:
        """One line including its ``\n`` (b"" at EOF); longer than MAX_LINE: a violation."""
        start = 0
        while (end := self._buffer.find(b"\n", start)) < 0:
            if len(self._buffer) > MAX_LINE:
                raise ProtocolViolation("malformed_response")
            start = len(self._buffer)
            if not self._fill(deadline):
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
        if end >= MAX_LINE:
            raise ProtocolViolation("malformed_response")
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def read_exactly(self, length: int, deadline: _Deadline) -> bytes:
        while len(self._buffer) < length:
            if not self._fill(deadline):
                raise ProtocolViolation("content_length_mismatch")  # truncated
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body


_STATUS_LINE = re.compile(rb"(HTTP/1\.[01]) ([0-9]{3})(?: [^\r\n]*)?\r?\n")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*?)[ \t]*\r?\n")


def _read_head(conn: _Connection, deadline: _Deadline) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-cased names, repeats joined by ", ") and whether the
    server closes the connection after this response."""
    while True:
        line = conn.readline(deadline)
        if not line:
            raise NetworkError("server closed the connection without a response")
        match = _STATUS_LINE.fullmatch(line)
        if match is None:
            raise ProtocolViolation("malformed_response")
        headers = _read_headers(conn, deadline)
        status = int(match.group(2))
        if status != 100:  # an interim 100 Continue is followed by the real answer
            break
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    will_close = "close" in tokens or (match.group(1) == b"HTTP/1.0" and "keep-alive" not in tokens)
    return status, headers, will_close


def _read_headers(conn: _Connection, deadline: _Deadline) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = conn.readline(deadline)
        if line in (b"\r\n", b"\n"):
            return headers
        match = _HEADER_LINE.fullmatch(line)
        if match is None:  # EOF, obsolete line folding, bytes that are no header
            raise ProtocolViolation("malformed_response")
        name = match.group(1).decode("ascii").lower()
        value = match.group(2).decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    raise ProtocolViolation("malformed_response")  # too many headers


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
        self._conn: _Connection | None = None
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
        limit = request_limit(path)
        if len(payload) > limit:
            raise RequestTooLarge(f"request body is {len(payload)} bytes (limit {limit})")
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

    def _connection(self, creds: Credentials, deadline: _Deadline) -> _Connection:
        key = (creds.cert_file, creds.key_file, creds.ca_file)
        if self._conn is not None and (key != self._conn_key or not _idle_ok(self._conn)):
            self._drop()
        if self._conn is None:
            ctx = build_ssl_context(creds)
            self._conn = _Connection.open(self.origin, ctx, deadline)  # TCP + TLS handshake
            self._conn_key = key
        return self._conn

    def _exchange(
        self,
        conn: _Connection,
        path: str,
        payload: bytes,
        creds: Credentials,
        deadline: _Deadline,
        limit: int,
    ) -> Response:
        head = (
            f"POST {path} HTTP/1.1\r\n"
            f"Host: {conn.host_header}\r\n"
            f"Authorization: Bearer {creds.authorization}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json\r\n"
            "Accept-Encoding: identity\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "\r\n"
        ).encode("ascii")
        try:
            conn.send(head, payload, deadline)
        except (ssl.SSLError, OSError) as exc:
            raise _surface_alert(conn, deadline) or _classify(exc) from None
        response, will_close = _read_response(conn, deadline, limit)
        if will_close or conn.buffered:  # bytes after the body: the stream is not ours
            self._drop()
        return response


def request_limit(path: str) -> int:
    """The largest body the ingress accepts on ``path`` (SPEC §6.6, §9.3)."""
    return _REQUEST_LIMITS.get(path, REQUEST_LIMIT)


def _encode(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _surface_alert(conn: _Connection, deadline: _Deadline) -> TransportError | None:
    """After a failed write, read once: a TLS 1.3 server that refused our certificate
    sent its alert and closed, and our write may hit the closed socket before we
    ever read that alert (SPEC §6.5). The queued alert is still readable."""
    sock = conn.sock
    try:
        sock.settimeout(min(deadline.remaining(), 1.0))
        sock.recv(1)
    except ssl.SSLError as exc:
        err = _classify_ssl(exc)
        return err if isinstance(err, TlsClientRejected) else None
    except (OSError, TransportError):
        return None
    return None


def _idle_ok(conn: _Connection) -> bool:
    """An idle keep-alive socket must have nothing to read (no FIN, no stray bytes)."""
    sock = conn.sock
    if conn.buffered or sock.fileno() < 0 or sock.pending():
        return False
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def _read_response(conn: _Connection, deadline: _Deadline, limit: int) -> tuple[Response, bool]:
    status, headers, will_close = _read_head(conn, deadline)
    if 300 <= status < 400:
        raise ProtocolViolation("redirect")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise ProtocolViolation("content_encoding")
    if _media_type(headers.get("content-type")) != "application/json":
        raise ProtocolViolation("content_type")
    if "transfer-encoding" in headers:
        raise ProtocolViolation("transfer_encoding")
    declared = headers.get("content-length")
    if declared is None or not declared.isdigit():
        raise ProtocolViolation("content_length")
    length = int(declared)
    if length > limit:
        raise ProtocolViolation("response_too_large")
    body = conn.read_exactly(length, deadline)
    kept = {"content-type": headers.get("content-type", ""), "content-length": declared}
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        kept["retry-after"] = retry_after
    return Response(status, body, kept, _retry_after_ms(retry_after)), will_close
