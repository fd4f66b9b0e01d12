"""service.pki: dev CA, server/worker certificates, worker credentials."""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from qinglong.service import pki


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _der(path: Path) -> bytes:
    return _cert(path).public_bytes(serialization.Encoding.DER)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "ca"
    pki.init_ca(directory)
    return directory


def test_init_ca_writes_p256_ca_with_private_key(tmp_path: Path) -> None:
    files = pki.init_ca(tmp_path / "ca", "Test CA")
    assert files.cert_file == tmp_path / "ca" / "ca.pem"
    assert files.key_file == tmp_path / "ca" / "ca-key.pem"
    assert _mode(files.key_file) == 0o600
    assert _mode(files.cert_file) == 0o644
    cert = _cert(files.cert_file)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    loaded = pki.load_ca(tmp_path / "ca")
    assert loaded.cert == cert
    assert loaded.key.public_key().public_numbers() == cert.public_key().public_numbers()


def test_init_ca_refuses_to_overwrite(ca_dir: Path) -> None:
    before = (ca_dir / "ca-key.pem").read_bytes()
    with pytest.raises(pki.CaExistsError):
        pki.init_ca(ca_dir)
    assert (ca_dir / "ca-key.pem").read_bytes() == before


def test_load_ca_missing(tmp_path: Path) -> None:
    with pytest.raises(pki.CaNotFoundError):
        pki.load_ca(tmp_path / "nope")


def test_server_cert_san_and_eku(ca_dir: Path, tmp_path: Path) -> None:
    files = pki.issue_server_cert(ca_dir, tmp_path / "srv")
    assert _mode(files.key_file) == 0o600
    cert = _cert(files.cert_file)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    cert.verify_directly_issued_by(_cert(ca_dir / "ca.pem"))


def test_worker_cert_identity(ca_dir: Path, tmp_path: Path) -> None:
    worker_id = "0b6f7a52-8a43-4cc6-9d8e-2f0a5b3f4c11"
    files = pki.issue_worker_cert(ca_dir, tmp_path / "w", worker_id)
    assert _mode(files.key_file) == 0o600
    cert = _cert(files.cert_file)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == [
        f"urn:qinglong:worker:{worker_id}"
    ]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(_cert(ca_dir / "ca.pem"))
    assert pki.worker_id_from_cert_der(_der(files.cert_file)) == worker_id


def test_worker_cert_overrides(ca_dir: Path, tmp_path: Path) -> None:
    start = datetime(2020, 1, 1, tzinfo=UTC)
    files = pki.issue_worker_cert(
        ca_dir,
        tmp_path / "w",
        "w1",
        not_before=start,
        not_after=start + timedelta(days=1),
        key_usage_client_auth=False,
    )
    cert = _cert(files.cert_file)
    assert cert.not_valid_after_utc == start + timedelta(days=1)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH not in list(eku)


def test_worker_id_from_cert_without_worker_uri(ca_dir: Path, tmp_path: Path) -> None:
    server = pki.issue_server_cert(ca_dir, tmp_path / "srv")
    assert pki.worker_id_from_cert_der(_der(server.cert_file)) is None
    assert pki.worker_id_from_cert_der(b"not a certificate") is None


def test_mutual_tls13_handshake(ca_dir: Path, tmp_path: Path) -> None:
    """The issued certs work for a real TLS 1.3 mutual handshake."""
    server = pki.issue_server_cert(ca_dir, tmp_path / "srv")
    worker = pki.issue_worker_cert(ca_dir, tmp_path / "w", "w-42")
    ca_file = ca_dir / "ca.pem"

    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    server_ctx.load_cert_chain(server.cert_file, server.key_file)
    server_ctx.load_verify_locations(ca_file)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=str(ca_file))
    client_ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    client_ctx.load_cert_chain(worker.cert_file, worker.key_file)

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: list[str | None] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            seen.append(pki.worker_id_from_cert_der(tls.getpeercert(binary_form=True)))
            tls.sendall(b"ok")

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.recv(2) == b"ok"
    finally:
        thread.join(10)
        listener.close()
    assert seen == ["w-42"]


def test_generate_credential_shape() -> None:
    cred = pki.generate_credential()
    assert len(cred.credential_id) == 16
    assert all(c in "abcdefghijklmnopqrstuvwxyz0123456789" for c in cred.credential_id)
    assert len(cred.secret) == 43
    assert len(base64.urlsafe_b64decode(cred.secret + "=")) == 32
    assert cred.token == f"ql3w_{cred.credential_id}_{cred.secret}"
    assert cred.secret_digest == hashlib.sha256(cred.secret.encode("ascii")).digest()
    assert cred.secret not in repr(cred)
    assert pki.parse_credential(cred.token) == (cred.credential_id, cred.secret)
    assert pki.generate_credential().credential_id != cred.credential_id


def test_parse_credential_secret_may_contain_underscores() -> None:
    secret = "_" * 42 + "A"
    token = f"ql3w_abcdefghij012345_{secret}"
    assert pki.parse_credential(token) == ("abcdefghij012345", secret)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ql3w_",
        "Bearer ql3w_abcdefghij012345_" + "A" * 43,
        "ql3x_abcdefghij012345_" + "A" * 43,
        "ql3w_ABCDEFGHIJ012345_" + "A" * 43,
        "ql3w_abcdefghij01234_" + "A" * 44,
        "ql3w_abcdefghij012345_" + "A" * 42,
        "ql3w_abcdefghij012345_" + "A" * 44,
        "ql3w_abcdefghij012345-" + "A" * 43,
        "ql3w_abcdefghij012345_" + "A" * 42 + "=",
        "ql3w_abcdefghij012345_" + "A" * 42 + "B",  # non-canonical trailing bits
        "ql3w_abcdefghij012345_" + "A" * 42 + "é",
    ],
)
def test_parse_credential_rejects_without_echo(text: str) -> None:
    with pytest.raises(pki.MalformedCredentialError) as info:
        pki.parse_credential(text)
    if text:
        assert text not in str(info.value)
