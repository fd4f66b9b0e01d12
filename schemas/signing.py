"""Signed execution revisions (SPEC §16.1): Ed25519, detached compact JWS.

The signed payload is the RFC 8785 bytes of ``{taskId, kind, executor, spec,
placement}`` (placement omitted when absent; ``spec`` carries the secret names).
A signature is the detached compact JWS ``base64url(header)..base64url(sig)``
with the protected header ``{"alg":"EdDSA","kid":…}``; the signing input is
``base64url(header) + "." + base64url(payload)`` (RFC 7515 with the payload
detached). A key's ``kid`` is its RFC 7638 JWK thumbprint (SHA-256 of the RFC
8785 bytes of ``{crv, kty, x}``, base64url).

The admin CLI signs (``admin signing-key create``, ``admin task publish
--sign-key``); the worker verifies against its JWKS (``trust.keysFile``). All
cryptography is the ``cryptography`` package's; this module only builds the
bytes and splits the compact form. Imported lazily: a worker that does not
verify never loads it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from qinglong.schemas.canonical import canonical_bytes, revision_content, sha256_digest

__all__ = [
    "JWS_PATTERN",
    "KID_PATTERN",
    "PRIVATE_KEY_NAME",
    "PUBLIC_JWK_NAME",
    "KeyFileError",
    "SignatureInvalid",
    "Signer",
    "TrustKeys",
    "create_signing_key",
    "kid_of",
    "public_jwk",
    "revision_payload",
    "sign_detached",
    "verify_detached",
]

PRIVATE_KEY_NAME = "signing-key.pem"
PUBLIC_JWK_NAME = "signing-key.jwk.json"
KID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# header (a JSON object of at most 1 KiB -> at most 1368 chars) ".." 64-byte signature.
JWS_PATTERN = re.compile(r"^([A-Za-z0-9_-]{2,1368})\.\.([A-Za-z0-9_-]{86})$")
MAX_JWKS_BYTES = 64 * 1024
MAX_JWKS_KEYS = 64
_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class KeyFileError(ValueError):
    """A key file or JWKS is unusable; ``reason`` is a short category, the
    message names the file, never key bytes."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class SignatureInvalid(Exception):
    """A revision's signature does not hold; ``reason`` is low-cardinality:
    unsigned, malformed, unknown_kid, kid_mismatch, bad_signature."""

    def __init__(self, reason: str, kid: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kid = kid


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url (RFC 7515 §2): other characters or padding refused."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        raise ValueError("not unpadded base64url") from None
    if b64url(data) != text:  # non-canonical trailing bits
        raise ValueError("not canonical base64url")
    return data


def revision_payload(
    task_id: str,
    kind: str,
    executor: str,
    spec: Mapping[str, Any],
    placement: Mapping[str, Any] | None,
) -> bytes:
    """The signed bytes: RFC 8785 of ``{taskId, kind, executor, spec, placement?}``."""
    return canonical_bytes(dict(revision_content(kind, executor, spec, placement), taskId=task_id))


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def kid_of(key: Ed25519PublicKey) -> str:
    """RFC 7638 thumbprint: base64url SHA-256 of the canonical ``{crv, kty, x}``."""
    members = {"crv": "Ed25519", "kty": "OKP", "x": b64url(_raw_public(key))}
    digest = sha256_digest(canonical_bytes(members)).removeprefix("sha256:")
    return b64url(bytes.fromhex(digest))


def public_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    """The public JWK (RFC 8037) with its ``kid``."""
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url(_raw_public(key)), "kid": kid_of(key)}


def sign_detached(private_key: Ed25519PrivateKey, kid: str, payload: bytes) -> str:
    """Detached compact JWS of ``payload`` (``header..signature``)."""
    header = b64url(json.dumps({"alg": "EdDSA", "kid": kid}, separators=(",", ":")).encode())
    signing_input = f"{header}.{b64url(payload)}".encode("ascii")
    return f"{header}..{b64url(private_key.sign(signing_input))}"


def _header_kid(jws: str) -> tuple[str, bytes]:
    """Split the compact form -> (kid of the protected header, signature bytes)."""
    match = JWS_PATTERN.fullmatch(jws) if isinstance(jws, str) else None
    if match is None:
        raise SignatureInvalid("malformed")
    header_b64, signature_b64 = match.groups()
    try:
        header = json.loads(b64url_decode(header_b64))
        signature = b64url_decode(signature_b64)
    except ValueError:
        raise SignatureInvalid("malformed") from None
    if (
        not isinstance(header, dict)
        or set(header) != {"alg", "kid"}
        or header["alg"] != "EdDSA"
        or not isinstance(header["kid"], str)
        or not KID_PATTERN.fullmatch(header["kid"])
    ):
        raise SignatureInvalid("malformed")
    return header["kid"], signature


@dataclass(frozen=True)
class TrustKeys:
    """The public keys a worker trusts, by ``kid`` (several at once: rotation)."""

    keys: Mapping[str, Ed25519PublicKey]

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(sorted(self.keys))

    @classmethod
    def from_jwks(cls, doc: object, source: str) -> TrustKeys:
        if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
            raise KeyFileError("invalid_jwks", f'{source}: a JWKS object {{"keys": [...]}}')
        if not 1 <= len(doc["keys"]) <= MAX_JWKS_KEYS:
            raise KeyFileError("invalid_jwks", f"{source}: 1..{MAX_JWKS_KEYS} keys")
        keys: dict[str, Ed25519PublicKey] = {}
        for index, jwk in enumerate(doc["keys"]):
            key = _public_from_jwk(jwk, f"{source} keys[{index}]")
            kid = kid_of(key)
            if isinstance(jwk, dict) and jwk.get("kid", kid) != kid:
                raise KeyFileError(
                    "invalid_jwks", f"{source} keys[{index}]: kid is not the key's thumbprint"
                )
            keys[kid] = key
        return cls(keys)

    @classmethod
    def load(cls, path: str) -> TrustKeys:
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_JWKS_BYTES + 1)
        except OSError as exc:
            raise KeyFileError("jwks_unreadable", f"{path}: {exc.strerror}") from None
        if len(data) > MAX_JWKS_BYTES:
            raise KeyFileError("invalid_jwks", f"{path} exceeds {MAX_JWKS_BYTES} bytes")
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise KeyFileError("invalid_jwks", f"{path} is not JSON") from None
        return cls.from_jwks(doc, path)


def _public_from_jwk(jwk: object, where: str) -> Ed25519PublicKey:
    if (
        not isinstance(jwk, dict)
        or jwk.get("kty") != "OKP"
        or jwk.get("crv") != "Ed25519"
        or not isinstance(jwk.get("x"), str)
        or "d" in jwk  # a private key has no place in a trust file
    ):
        raise KeyFileError("invalid_jwks", f"{where}: an Ed25519 public JWK (kty OKP, crv Ed25519)")
    try:
        return Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    except ValueError:
        raise KeyFileError("invalid_jwks", f"{where}: x is not a 32-byte base64url key") from None


def verify_detached(signature: Mapping[str, Any] | None, payload: bytes, trusted: TrustKeys) -> str:
    """Check an offer's ``signature {kid, jws}`` over ``payload``; -> the kid.

    Raises :class:`SignatureInvalid` for an unsigned revision, a malformed JWS,
    a kid the trust keys do not hold, a ``kid`` field that is not the protected
    header's, or a signature that does not verify."""
    if signature is None:
        raise SignatureInvalid("unsigned")
    if not isinstance(signature, Mapping):
        raise SignatureInvalid("malformed")
    kid, raw = _header_kid(signature.get("jws"))  # type: ignore[arg-type]
    if signature.get("kid") != kid:
        raise SignatureInvalid("kid_mismatch", kid)
    key = trusted.keys.get(kid)
    if key is None:
        raise SignatureInvalid("unknown_kid", kid)
    header_b64 = signature["jws"].split(".", 1)[0]
    try:
        key.verify(raw, f"{header_b64}.{b64url(payload)}".encode("ascii"))
    except InvalidSignature:
        raise SignatureInvalid("bad_signature", kid) from None
    return kid


@dataclass(frozen=True)
class Signer:
    """A loaded private signing key and its kid."""

    key: Ed25519PrivateKey
    kid: str

    @classmethod
    def load(cls, path: str) -> Signer:
        try:
            with open(path, "rb") as handle:
                data = handle.read(64 * 1024)
        except OSError as exc:
            raise KeyFileError("sign_key_unreadable", f"{path}: {exc.strerror}") from None
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise KeyFileError(
                "invalid_sign_key", f"{path}: not an unencrypted PKCS#8 PEM key"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError("invalid_sign_key", f"{path}: not an Ed25519 key")
        return cls(key, kid_of(key.public_key()))

    def sign(self, payload: bytes) -> str:
        return sign_detached(self.key, self.kid, payload)


def create_signing_key(directory: str) -> dict[str, str]:
    """Write ``signing-key.pem`` (PKCS#8, 0600, never overwritten) and
    ``signing-key.jwk.json`` (the public JWK) into ``directory``; -> {kid, paths}."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    private_path = os.path.join(directory, PRIVATE_KEY_NAME)
    public_path = os.path.join(directory, PUBLIC_JWK_NAME)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise KeyFileError("key_exists", f"{path} exists (never overwritten)")
    _write_new(private_path, pem, 0o600)
    jwk = public_jwk(key.public_key())
    _write_new(public_path, (json.dumps(jwk, indent=2, sort_keys=True) + "\n").encode(), 0o644)
    return {"kid": jwk["kid"], "privateKeyFile": private_path, "publicJwkFile": public_path}


def _write_new(path: str, data: bytes, mode: int) -> None:
    """Create ``path`` exclusively with ``mode`` (no window with wider permissions)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; never wider than asked
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        os.fsync(fd)
    finally:
        os.close(fd)
