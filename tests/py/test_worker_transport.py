"""HTTPS transport (SPEC §6.5, §6.6) against real local TLS servers started here."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qinglong.worker.transport import (
    REQUEST_LIMIT,
    CredentialError,
    FileCredentialProvider,
    HttpsTransport,
    InvalidOrigin,
    NetworkError,
    ProtocolViolation,
    RequestTooLarge,
    TimeoutError_,
    TlsClientRejected,
    TlsHandshakeFailed,
    TransportError,
)

SECRET = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
CREDENTIAL = f"ql3w_{'a1b2c3d4e5f6a7b8'}_{SECRET}"
BODY = {"schema": "qinglong/offer-pull-request@v1", "offerId": "x"}


# -- throwaway PKI ----------------------------------------------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca, cn: str, sans: list[x509.GeneralName], server: bool):
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class Pki:
    dir: str
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str
    rogue_server_cert: str
    rogue_server_key: str
    credential: str

    def provider(self, **over: str) -> FileCredentialProvider:
        args = {
            "cert_file": self.client_cert,
            "key_file": self.client_key,
            "ca_file": self.ca,
            "credential_file": self.credential,
        }
        args.update(over)
        return FileCredentialProvider(**args)

    def write(self, name: str, data: bytes, mode: int = 0o600) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca("ql test ca"), make_ca("ql other ca")
    local = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = issue(ca, "localhost", local, server=True)
    rogue = issue(other, "localhost", local, server=True)
    worker_uri = x509.UniformResourceIdentifier("urn:qinglong:worker:" + "1" * 8)
    client = issue(ca, "worker", [worker_uri], server=False)
    files = {
        "ca": pem(ca[0]),
        "other_ca": pem(other[0]),
        "server_cert": pem(server[0]),
        "server_key": key_pem(server[1]),
        "rogue_server_cert": pem(rogue[0]),
        "rogue_server_key": key_pem(rogue[1]),
        "client_cert": pem(client[0]),
        "client_key": key_pem(client[1]),
        "credential": (CREDENTIAL + "\n").encode(),
    }
    paths = {}
    for name, data in files.items():
        path = d / name
        path.write_bytes(data)
        path.chmod(0o600)
        paths[name] = str(path)
    return Pki(dir=str(d), **paths)


# -- a raw TLS server whose responses the test scripts byte by byte ---------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def http_response(
    status: int = 200,
    body: bytes = b'{"status":"idle"}',
    headers: dict[str, str] | None = None,
    *,
    content_length: int | None = None,
) -> bytes:
    base = {"Content-Type": "application/json"}
    if content_length is not None or "Transfer-Encoding" not in (headers or {}):
        base["Content-Length"] = str(len(body) if content_length is None else content_length)
    base.update(headers or {})
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in base.items())
    return head.encode() + b"\r\n" + body


class Close(bytes):
    """Send these bytes, then close the connection."""


# A reply: bytes to send, Close(bytes), None (hang up), or a function that
# takes over the connection.
Handler = Callable[[Request], "bytes | Callable[[socket.socket], None] | None"]


@dataclass
class TlsServer:
    pki: Pki
    handler: Handler
    tls12_only: bool = False
    plaintext: bool = False
    client_ca: str | None = None  # default: the worker CA
    rogue_cert: bool = False
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    handshake_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._ctx = self._context()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"https://localhost:{self.port}"

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.tls12_only:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        else:
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        if self.rogue_cert:
            ctx.load_cert_chain(self.pki.rogue_server_cert, self.pki.rogue_server_key)
        else:
            ctx.load_cert_chain(self.pki.server_cert, self.pki.server_key)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(self.client_ca or self.pki.ca)
        return ctx

    def close(self) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                raw, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._conn, args=(raw,), daemon=True).start()

    def _conn(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        if self.plaintext:  # like any plain HTTP server: a TLS ClientHello is a bad request
            raw.recv(4096)
            raw.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            raw.close()
            return
        try:
            conn = self._ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self.handshake_errors.append(getattr(exc, "reason", None) or str(exc))
            raw.close()
            return
        try:
            reader = conn.makefile("rb")
            while True:
                request = self._read(reader)
                if request is None:
                    return
                self.requests.append(request)
                reply = self.handler(request)
                if reply is None:
                    return
                if callable(reply):
                    reply(conn)
                    return
                conn.sendall(reply)
                if isinstance(reply, Close):
                    return
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    @staticmethod
    def _read(reader) -> Request | None:
        line = reader.readline()
        if not line:
            return None
        method, path, _ = line.decode().split(" ", 2)
        headers: dict[str, str] = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        body = reader.read(int(headers.get("content-length", "0")))
        return Request(method, path, headers, body)


@pytest.fixture
def serve(pki):
    servers: list[TlsServer] = []

    def start(handler: Handler = lambda r: http_response(), **kw) -> TlsServer:
        server = TlsServer(pki, handler, **kw)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def expect(exc_type: type[Exception], fn: Callable[[], object]) -> Exception:
    with pytest.raises(exc_type) as info:
        fn()
    # Never leak the credential secret through an exception.
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert info.value.__cause__ is None or SECRET not in str(info.value.__cause__)
    return info.value


# -- happy path -------------------------------------------------------------


def test_json_post_with_mtls_and_bearer(pki, serve):
    server = serve(lambda r: http_response(200, b'{"status":"idle","retryAfterMs":5}'))
    with HttpsTransport(server.origin, pki.provider()) as t:
        resp = t.post_json("/v1/offers/pull", BODY)
    assert resp.status == 200 and resp.json() == {"status": "idle", "retryAfterMs": 5}
    req = server.requests[0]
    assert (req.method, req.path) == ("POST", "/v1/offers/pull")
    assert req.headers["authorization"] == f"Bearer {CREDENTIAL}"
    assert req.headers["content-type"] == "application/json"
    assert req.headers["accept-encoding"] == "identity"
    assert json.loads(req.body) == BODY


def test_error_status_returned_with_retry_after(pki, serve):
    body = b'{"schema":"qinglong/error@v1","error":"too_many_requests","reason":"rate"}'
    server = serve(lambda r: http_response(429, body, {"Retry-After": "7"}))
    with HttpsTransport(server.origin, pki.provider()) as t:
        resp = t.post_json("/v1/offers/pull", BODY)
    assert resp.status == 429 and resp.retry_after_ms == 7000
    assert resp.headers["retry-after"] == "7"


def test_one_keepalive_connection_and_explicit_close(pki, serve):
    server = serve()
    t = HttpsTransport(server.origin, pki.provider())
    for _ in range(3):
        assert t.post_json("/v1/offers/pull", BODY).status == 200
    assert server.connections == 1
    t.close()
    t.post_json("/v1/offers/pull", BODY)
    assert server.connections == 2
    t.close()


def test_server_closing_idle_connection_is_not_reused(pki, serve):
    server = serve(lambda r: http_response(headers={"Connection": "close"}))
    with HttpsTransport(server.origin, pki.provider()) as t:
        t.post_json("/v1/offers/pull", BODY)
        t.post_json("/v1/offers/pull", BODY)
    assert server.connections == 2


# -- origin -----------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "http://localhost:{port}",
        "https://user:pw@localhost:{port}",
        "https://localhost:{port}/v1",
        "https://localhost:{port}?x=1",
        "https://localhost:{port}#frag",
        "localhost:{port}",
    ],
)
def test_bad_origins_refused(pki, serve, template):
    server = serve()
    with pytest.raises(InvalidOrigin):
        HttpsTransport(template.format(port=server.port), pki.provider())
    assert server.connections == 0


def test_plaintext_server_refused(pki, serve):
    server = serve(plaintext=True)
    with HttpsTransport(server.origin, pki.provider()) as t:
        expect(TlsHandshakeFailed, lambda: t.post_json("/v1/offers/pull", BODY))
    assert server.requests == []


# -- TLS --------------------------------------------------------------------


def test_tls12_only_server_refused(pki, serve):
    server = serve(tls12_only=True)
    with HttpsTransport(server.origin, pki.provider()) as t:
        expect(TlsHandshakeFailed, lambda: t.post_json("/v1/offers/pull", BODY))
    assert server.requests == []


def test_untrusted_server_refused(pki, serve):
    server = serve(rogue_cert=True)
    with HttpsTransport(server.origin, pki.provider()) as t:
        expect(TlsHandshakeFailed, lambda: t.post_json("/v1/offers/pull", BODY))
    assert server.requests == []


def test_client_certificate_rejection_is_auth_failure(pki, serve):
    # The server trusts another CA: our certificate is refused after the TLS 1.3
    # handshake completed on our side, so the alert shows up on the first read.
    server = serve(client_ca=pki.other_ca)
    with HttpsTransport(server.origin, pki.provider()) as t:
        err = expect(TlsClientRejected, lambda: t.post_json("/v1/offers/pull", BODY))
    assert isinstance(err, TransportError) and not isinstance(err, NetworkError)
    assert server.requests == []


# -- response refusals ------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (http_response(302, b"{}", {"Location": "https://evil.example/"}), "redirect"),
        (http_response(301, b"", {"Location": "/v2"}), "redirect"),
        (http_response(200, b"\x1f\x8b\x08\x00", {"Content-Encoding": "gzip"}), "content_encoding"),
        (http_response(200, b"<html>hi</html>", {"Content-Type": "text/html"}), "content_type"),
        (http_response(200, b"{}", {"Content-Type": "application/jsonx"}), "content_type"),
        (Close(http_response(200, b'{"a":1}', content_length=100)), "content_length_mismatch"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            "transfer_encoding",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{}",
            "content_length",
        ),
        (http_response(200, b"{" + b" " * (128 * 1024) + b"}"), "response_too_large"),
    ],
    ids=lambda v: v if isinstance(v, str) else "-",
)
def test_response_refusals(pki, serve, reply, reason):
    server = serve(lambda r: reply)
    with HttpsTransport(server.origin, pki.provider()) as t:
        err = expect(ProtocolViolation, lambda: t.post_json("/v1/offers/pull", BODY))
        assert err.reason == reason
        # The connection is dropped after a violation, never reused.
        server.handler = lambda r: http_response()
        assert t.post_json("/v1/offers/pull", BODY).status == 200
    assert server.connections == 2


def test_response_limit_is_per_call(pki, serve):
    server = serve(lambda r: http_response(200, b'{"k":"' + b"v" * 200 + b'"}'))
    with HttpsTransport(server.origin, pki.provider()) as t:
        err = expect(ProtocolViolation, lambda: t.post_json("/p", BODY, response_limit=100))
        assert err.reason == "response_too_large"
        assert t.post_json("/p", BODY, response_limit=1000).status == 200


def test_timeout(pki, serve):
    def slow(r: Request) -> bytes:
        time.sleep(2)
        return http_response()

    server = serve(slow)
    with HttpsTransport(server.origin, pki.provider(), timeout_s=0.3) as t:
        started = time.monotonic()
        expect(TimeoutError_, lambda: t.post_json("/v1/offers/pull", BODY))
        assert time.monotonic() - started < 1.5


def test_slow_drip_body_hits_the_overall_deadline(pki, serve):
    def drip(conn: socket.socket) -> None:
        # Each byte arrives well within a per-recv timeout; the whole body never does.
        conn.sendall(http_response(200, b"{}", content_length=50)[:-2])
        for _ in range(30):
            time.sleep(0.1)
            conn.sendall(b" ")

    server = serve(lambda r: drip)
    with HttpsTransport(server.origin, pki.provider(), timeout_s=0.6) as t:
        started = time.monotonic()
        expect(TimeoutError_, lambda: t.post_json("/v1/offers/pull", BODY))
        assert time.monotonic() - started < 1.5


def test_server_hangs_up_is_network_error(pki, serve):
    server = serve(lambda r: None)
    with HttpsTransport(server.origin, pki.provider()) as t:
        expect(NetworkError, lambda: t.post_json("/v1/offers/pull", BODY))


def test_connection_refused_is_network_error(pki):
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with HttpsTransport(f"https://localhost:{port}", pki.provider()) as t:
        expect(NetworkError, lambda: t.post_json("/v1/offers/pull", BODY))


# -- request and credential refusals ---------------------------------------


def test_request_too_large_never_sent(pki, serve):
    server = serve()
    with HttpsTransport(server.origin, pki.provider()) as t:
        with pytest.raises(RequestTooLarge):
            t.post_json("/v1/offers/pull", b"x" * (REQUEST_LIMIT + 1))
        assert t.post_json("/v1/offers/pull", b"{" + b" " * (REQUEST_LIMIT - 2) + b"}")
    assert len(server.requests) == 1


@pytest.mark.parametrize("timeout_s", [0, -1, 60.5])
def test_timeout_bounds(pki, timeout_s):
    with pytest.raises(ValueError):
        HttpsTransport("https://localhost:1", pki.provider(), timeout_s=timeout_s)


def test_credential_file_must_be_private_and_well_formed(pki, serve):
    server = serve()
    loose = pki.write("loose", CREDENTIAL.encode(), 0o644)
    junk = pki.write("junk", b"Bearer nope")
    for path in (loose, junk, os.path.join(pki.dir, "missing")):
        with HttpsTransport(server.origin, pki.provider(credential_file=path)) as t:
            err = expect(CredentialError, lambda t=t: t.post_json("/p", BODY))
            assert SECRET not in str(err)
    assert server.connections == 0


def test_trust_anchor_count_and_size(pki, serve):
    server = serve()
    ca = open(pki.ca, "rb").read()
    nine = pki.write("nine.pem", ca * 9)
    eight = pki.write("eight.pem", ca * 8)
    empty = pki.write("empty.pem", b"")
    huge = pki.write("huge.pem", ca + b"#" * (1024 * 1024))
    for bad in (nine, empty, huge):
        with HttpsTransport(server.origin, pki.provider(ca_file=bad)) as t:
            expect(CredentialError, lambda t=t: t.post_json("/p", BODY))
    with HttpsTransport(server.origin, pki.provider(ca_file=eight)) as t:
        assert t.post_json("/p", BODY).status == 200


def test_oversize_key_material_refused(pki, serve):
    server = serve()
    big = pki.write("big.pem", open(pki.client_cert, "rb").read() + b"\n" * (1024 * 1024))
    with HttpsTransport(server.origin, pki.provider(cert_file=big)) as t:
        expect(CredentialError, lambda: t.post_json("/p", BODY))
