"""Dev/test PKI: a local CA, server and worker certificates, worker credentials.

EC P-256 everywhere (small keys and handshakes for edge workers). Private keys
are written 0600 and certificates 0644, each atomically (temp file + fsync +
rename) so a crash never leaves a half-written key that a later run trusts.

Worker identity lives in the certificate's SAN URI `urn:qinglong:worker:<id>`;
the ingress reads it with `worker_id_from_cert_der`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import ipaddress
import os
import re
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

WORKER_URI_PREFIX = "urn:qinglong:worker:"
CA_CERT_NAME = "ca.pem"
CA_KEY_NAME = "ca-key.pem"
TOKEN_PREFIX = "ql3w_"

_CREDENTIAL_ID_RE = re.compile(r"[a-z0-9]{16}")
_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{43}")
_CREDENTIAL_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
# Backdate notBefore a little so a freshly issued cert is valid on a peer whose
# clock runs slightly behind ours.
_CLOCK_SKEW = timedelta(minutes=5)


class PkiError(Exception):
    """Base class of PKI errors."""


class CaExistsError(PkiError):
    """init_ca refused to overwrite an existing CA."""


class CaNotFoundError(PkiError):
    """No CA (certificate + key) in the given directory."""


class MalformedCredentialError(PkiError, ValueError):
    """A credential token is not `ql3w_<16 [a-z0-9]>_<43 base64url>`.

    The message never contains the offending input (it may be a secret).
    """

    def __init__(self) -> None:
        super().__init__("malformed credential")


@dataclass(frozen=True)
class CaFiles:
    cert_file: Path
    key_file: Path


@dataclass(frozen=True)
class CertFiles:
    cert_file: Path
    key_file: Path


@dataclass(frozen=True)
class LoadedCa:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    files: CaFiles


@dataclass(frozen=True)
class Credential:
    credential_id: str
    secret: str
    token: str
    secret_digest: bytes

    def __repr__(self) -> str:  # never leak the secret through a repr/log line
        return f"Credential(credential_id={self.credential_id!r}, secret=<redacted>)"


# --------------------------------------------------------------------- files


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` with `mode`, atomically, created with that mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private_file(path: Path, data: bytes) -> None:
    """Atomically write a secret file (0600)."""
    _atomic_write(path, data, 0o600)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _atomic_write(path, pem, 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    _atomic_write(path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


# ------------------------------------------------------------------------ CA


def _now() -> datetime:
    return datetime.now(UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca_files(directory: Path) -> CaFiles:
    directory = Path(directory)
    return CaFiles(cert_file=directory / CA_CERT_NAME, key_file=directory / CA_KEY_NAME)


def init_ca(directory: Path, common_name: str = "QingLong Dev CA", *, days: int = 3650) -> CaFiles:
    """Create a self-signed CA in `directory`; refuse if one is already there."""
    files = _ca_files(directory)
    if files.cert_file.exists() or files.key_file.exists():
        raise CaExistsError(f"a CA already exists in {Path(directory)}")
    Path(directory).mkdir(parents=True, exist_ok=True, mode=0o700)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    # Key first: a cert without its key is useless, a key without a cert is
    # still detected as "CA exists" and never silently replaced.
    _write_key(files.key_file, key)
    _write_cert(files.cert_file, cert)
    return files


def load_ca(directory: Path) -> LoadedCa:
    files = _ca_files(directory)
    try:
        cert = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
        key = serialization.load_pem_private_key(files.key_file.read_bytes(), None)
    except FileNotFoundError as exc:
        raise CaNotFoundError(f"no CA in {Path(directory)}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError("CA key is not an EC key")
    return LoadedCa(cert=cert, key=key, files=files)


# -------------------------------------------------------------------- leaves


def _key_usage_signing() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf_builder(
    ca: LoadedCa,
    key: ec.EllipticCurvePrivateKey,
    common_name: str,
    not_before: datetime,
    not_after: datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage_signing(), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )


def _san_entry(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_pair(
    out_dir: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> CertFiles:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = CertFiles(cert_file=out_dir / f"{stem}.pem", key_file=out_dir / f"{stem}-key.pem")
    _write_key(files.key_file, key)
    _write_cert(files.cert_file, cert)
    return files


def issue_server_cert(
    ca_dir: Path,
    out_dir: Path,
    hosts: Sequence[str] = ("localhost", "127.0.0.1", "::1"),
    *,
    days: int = 825,
) -> CertFiles:
    """Server cert for the ingress → OUT/server.pem, OUT/server-key.pem."""
    if not hosts:
        raise PkiError("a server certificate needs at least one host")
    ca = load_ca(ca_dir)
    key = _new_key()
    now = _now()
    cert = (
        _leaf_builder(ca, key, hosts[0], now - _CLOCK_SKEW, now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([_san_entry(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return _write_pair(out_dir, "server", cert, key)


def issue_worker_cert(
    ca_dir: Path,
    out_dir: Path,
    worker_id: str,
    *,
    not_before: datetime | None = None,
    not_after: datetime | None = None,
    key_usage_client_auth: bool = True,
) -> CertFiles:
    """Client cert naming `worker_id` → OUT/worker.pem, OUT/worker-key.pem.

    `key_usage_client_auth=False` issues a serverAuth-only cert (for tests that
    the ingress refuses a certificate with the wrong extended key usage).
    """
    if not worker_id or any(c in worker_id for c in "/?#\x00 "):
        raise PkiError("invalid worker id for a certificate")
    ca = load_ca(ca_dir)
    key = _new_key()
    now = _now()
    start = not_before if not_before is not None else now - _CLOCK_SKEW
    end = not_after if not_after is not None else now + timedelta(days=365)
    eku = (
        ExtendedKeyUsageOID.CLIENT_AUTH
        if key_usage_client_auth
        else ExtendedKeyUsageOID.SERVER_AUTH
    )
    cert = (
        _leaf_builder(ca, key, f"qinglong-worker-{worker_id}", start, end)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(WORKER_URI_PREFIX + worker_id)]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return _write_pair(out_dir, "worker", cert, key)


@dataclass(frozen=True)
class CertificateFacts:
    """What the control plane records of an issued certificate (SPEC §16.3)."""

    serial: str  # lowercase hex, no leading zeros (ql_private.certificate_serial)
    not_after: datetime

    @property
    def not_after_ms(self) -> int:
        return int(self.not_after.timestamp() * 1000)


def certificate_facts(cert_file: Path) -> CertificateFacts:
    """Serial and notAfter of a PEM certificate file."""
    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    return CertificateFacts(
        serial=format(cert.serial_number, "x"), not_after=cert.not_valid_after_utc
    )


def worker_id_from_cert_der(der: bytes) -> str | None:
    """The worker id named by the cert's single `urn:qinglong:worker:` SAN URI.

    None when the cert cannot be parsed, has no such URI, or names more than one
    worker (ambiguous identity is treated as no identity).
    """
    try:
        cert = x509.load_der_x509_certificate(der)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (ValueError, x509.ExtensionNotFound):
        return None
    ids = [
        uri[len(WORKER_URI_PREFIX) :]
        for uri in san.value.get_values_for_type(x509.UniformResourceIdentifier)
        if uri.startswith(WORKER_URI_PREFIX)
    ]
    if len(ids) != 1 or not ids[0]:
        return None
    return ids[0]


# --------------------------------------------------------------- credentials


def secret_digest(secret: str) -> bytes:
    """SHA-256 of the secret's ASCII bytes (what the database stores)."""
    return hashlib.sha256(secret.encode("ascii")).digest()


def generate_credential() -> Credential:
    credential_id = "".join(secrets.choice(_CREDENTIAL_ID_ALPHABET) for _ in range(16))
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
    return Credential(
        credential_id=credential_id,
        secret=secret,
        token=f"{TOKEN_PREFIX}{credential_id}_{secret}",
        secret_digest=secret_digest(secret),
    )


def parse_credential(text: str) -> tuple[str, str]:
    """Split `ql3w_<id>_<secret>` into (credential_id, secret).

    The secret alphabet includes `_`, so split by fixed lengths, not by `_`.
    """
    if not isinstance(text, str) or not text.isascii():
        raise MalformedCredentialError()
    if len(text) != len(TOKEN_PREFIX) + 16 + 1 + 43 or not text.startswith(TOKEN_PREFIX):
        raise MalformedCredentialError()
    body = text[len(TOKEN_PREFIX) :]
    credential_id, sep, secret = body[:16], body[16], body[17:]
    if sep != "_" or not _CREDENTIAL_ID_RE.fullmatch(credential_id):
        raise MalformedCredentialError()
    if not _SECRET_RE.fullmatch(secret) or not _canonical_b64url_32(secret):
        raise MalformedCredentialError()
    return credential_id, secret


def _canonical_b64url_32(secret: str) -> bool:
    """43 chars encode 32 bytes only if the last char's 2 spare bits are zero."""
    try:
        raw = base64.urlsafe_b64decode(secret + "=")
    except ValueError:
        return False
    return len(raw) == 32 and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == secret
