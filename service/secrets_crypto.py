"""Secrets at rest (SPEC §14.1): AES-256-GCM, a data key per project, wrapped by a
key-encryption key (KEK) that is never in the database.

The KEK is a key file given to the control plane (`admin secret …`) and the
ingress (`kekFile`), mode 0600 (a file group or others can read is refused). Its
one line is ``qinglong-kek-v1 <kekId> <base64url of 32 random bytes>``; the
kekId is stored beside every data key it wraps, so a wrong file is named as
such instead of failing as a forged ciphertext.

Two layers, both AES-256-GCM from ``cryptography`` with a random 96-bit nonce:

* a project's data key (32 random bytes, id ``keyId``) wrapped by the KEK,
  associated data ``qinglong/data-key/v1 | keyId``;
* each secret's value encrypted by its project's data key, associated data
  ``qinglong/secret/v1 | projectId | name | version | keyId``: a row copied to
  another project, renamed, or an older version put back does not decrypt.

Nothing here logs, and no object's repr shows a key or a value.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEK_ENV",
    "MAX_VALUE_BYTES",
    "MIN_VALUE_BYTES",
    "DataKey",
    "DeliveredSecrets",
    "Kek",
    "KekSource",
    "SecretsError",
    "SecretsReason",
    "WrappedKey",
    "check_value",
    "create_kek_file",
    "decrypt_secret",
    "encrypt_secret",
    "load_kek",
    "new_data_key",
    "open_delivery",
    "rewrap",
    "unwrap",
]

KEK_ENV = "QINGLONG_KEK_FILE"
MIN_VALUE_BYTES = 8
MAX_VALUE_BYTES = 16 * 1024
_KEK_MAGIC = "qinglong-kek-v1"
_KEK_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
_KEY_ID = re.compile(r"[a-f0-9]{32}\Z")
_NONCE_BYTES = 12
_KEY_BYTES = 32


class SecretsReason(Enum):
    """Low-cardinality reasons; the message never holds a key or a value."""

    KEK_UNREADABLE = "kek_unreadable"
    KEK_PERMISSIONS = "kek_permissions"
    KEK_MALFORMED = "kek_malformed"
    KEK_MISMATCH = "kek_mismatch"
    SECRET_INTEGRITY = "secret_integrity"
    VALUE_TOO_SHORT = "value_too_short"
    VALUE_TOO_LONG = "value_too_long"
    VALUE_NOT_TEXT = "value_not_text"


class SecretsError(Exception):
    def __init__(self, reason: SecretsReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Kek:
    kek_id: str
    key: bytes = field(repr=False)


@dataclass(frozen=True)
class DataKey:
    key_id: str
    key: bytes = field(repr=False)


@dataclass(frozen=True)
class WrappedKey:
    key_id: str
    kek_id: str
    nonce: bytes
    wrapped_key: bytes

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> WrappedKey:
        """The hex projection of ql.project_data_key / ql.list_data_keys / ql.lease_secrets."""
        return cls(
            str(doc["keyId"]), str(doc["kekId"]), _hex(doc["nonce"]), _hex(doc["wrappedKey"])
        )


@dataclass(frozen=True)
class DeliveredSecrets:
    """ENV_NAME -> value of one delivery (never in a repr)."""

    values: dict[str, str] = field(repr=False)


# ------------------------------------------------------------------ the KEK file


def _kek_line(kek: Kek) -> str:
    encoded = base64.urlsafe_b64encode(kek.key).rstrip(b"=").decode("ascii")
    return f"{_KEK_MAGIC} {kek.kek_id} {encoded}\n"


def create_kek_file(path: Path, kek_id: str | None = None) -> Kek:
    """Write a new KEK file (0600, never over an existing file) and return its key."""
    kek = Kek(kek_id or f"kek-{secrets.token_hex(8)}", secrets.token_bytes(_KEY_BYTES))
    if not _KEK_ID.match(kek.kek_id):
        raise SecretsError(
            SecretsReason.KEK_MALFORMED, "kek id must match ^[a-z0-9][a-z0-9._-]{0,63}$"
        )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(_kek_line(kek))
    return kek


def load_kek(path: Path) -> Kek:
    """Read a KEK file, refusing one that group or others may read or write."""
    try:
        # A symlink is followed (mounted secret volumes are links); the mode
        # checked is the file's own, read from the descriptor.
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise SecretsError(
            SecretsReason.KEK_UNREADABLE, f"cannot open key file {path}: {exc.strerror}"
        ) from None
    # Checked on the descriptor before it becomes a file object: a directory
    # opens (O_RDONLY) but cannot be wrapped, and must be kek_unreadable.
    with os.fdopen(_checked_kek_fd(fd, path), "rb") as f:
        data = f.read(4096)
    return _parse_kek(data, path)


def _checked_kek_fd(fd: int, path: Path) -> int:
    """`fd` when it is a regular file only its owner may access; else closed and refused."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise SecretsError(SecretsReason.KEK_UNREADABLE, f"key file {path} is not a regular file")
    if info.st_mode & 0o077:
        os.close(fd)
        raise SecretsError(
            SecretsReason.KEK_PERMISSIONS,
            f"key file {path} has mode {stat.S_IMODE(info.st_mode):04o}: group or others "
            f"may access it; chmod 600 {path}",
        )
    return fd


def _parse_kek(data: bytes, path: Path) -> Kek:
    malformed = SecretsError(
        SecretsReason.KEK_MALFORMED, f"key file {path} is not a '{_KEK_MAGIC} <kekId> <key>' line"
    )
    try:
        magic, kek_id, encoded = data.decode("ascii").split()
        key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (UnicodeDecodeError, ValueError, binascii.Error):
        raise malformed from None
    if magic != _KEK_MAGIC or not _KEK_ID.match(kek_id) or len(key) != _KEY_BYTES:
        raise malformed
    return Kek(kek_id, key)


# ------------------------------------------------------------------ data keys


def _key_aad(key_id: str) -> bytes:
    return b"qinglong/data-key/v1\x00" + key_id.encode("ascii")


def new_data_key(kek: Kek) -> tuple[DataKey, WrappedKey]:
    """A fresh random data key and its wrap under `kek`."""
    data_key = DataKey(secrets.token_hex(16), secrets.token_bytes(_KEY_BYTES))
    return data_key, _wrap(kek, data_key)


def _wrap(kek: Kek, data_key: DataKey) -> WrappedKey:
    nonce = secrets.token_bytes(_NONCE_BYTES)
    wrapped = AESGCM(kek.key).encrypt(nonce, data_key.key, _key_aad(data_key.key_id))
    return WrappedKey(data_key.key_id, kek.kek_id, nonce, wrapped)


def unwrap(kek: Kek, wrapped: WrappedKey) -> DataKey:
    if wrapped.kek_id != kek.kek_id:
        raise SecretsError(
            SecretsReason.KEK_MISMATCH,
            f"the data key is wrapped by KEK {wrapped.kek_id}, the key file holds {kek.kek_id}",
        )
    if not _KEY_ID.match(wrapped.key_id):
        raise SecretsError(SecretsReason.SECRET_INTEGRITY, "malformed data key id")
    try:
        key = AESGCM(kek.key).decrypt(wrapped.nonce, wrapped.wrapped_key, _key_aad(wrapped.key_id))
    except (InvalidTag, ValueError):
        raise SecretsError(
            SecretsReason.SECRET_INTEGRITY,
            f"data key {wrapped.key_id} does not unwrap with KEK {kek.kek_id}",
        ) from None
    return DataKey(wrapped.key_id, key)


def rewrap(old: Kek, new: Kek, wrapped: WrappedKey) -> WrappedKey:
    """The same data key, wrapped by `new` instead of `old` (rotate-kek)."""
    return _wrap(new, unwrap(old, wrapped))


# ------------------------------------------------------------------ values


def check_value(value: bytes) -> None:
    """8 B - 16 KiB of UTF-8 text without NUL (an environment variable's value);
    shorter values cannot be masked reliably (SPEC §14.1)."""
    if len(value) < MIN_VALUE_BYTES:
        raise SecretsError(
            SecretsReason.VALUE_TOO_SHORT,
            f"a secret value is at least {MIN_VALUE_BYTES} bytes "
            f"(got {len(value)}): shorter values cannot be masked reliably",
        )
    if len(value) > MAX_VALUE_BYTES:
        raise SecretsError(
            SecretsReason.VALUE_TOO_LONG,
            f"a secret value is at most {MAX_VALUE_BYTES} bytes (got {len(value)})",
        )
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretsError(
            SecretsReason.VALUE_NOT_TEXT,
            "a secret value must be UTF-8 text (it becomes an environment variable)",
        ) from None
    if b"\x00" in value:
        raise SecretsError(
            SecretsReason.VALUE_NOT_TEXT,
            "a secret value cannot contain a NUL byte (environment variable)",
        )


def _secret_aad(project_id: str, name: str, version: int, key_id: str) -> bytes:
    return "\x00".join(("qinglong/secret/v1", project_id, name, str(version), key_id)).encode(
        "utf-8"
    )


def encrypt_secret(
    data_key: DataKey, project_id: str, name: str, version: int, value: bytes
) -> tuple[bytes, bytes]:
    """-> (nonce, ciphertext) of a checked value, bound to project, name, version, key."""
    check_value(value)
    nonce = secrets.token_bytes(_NONCE_BYTES)
    aad = _secret_aad(project_id, name, version, data_key.key_id)
    return nonce, AESGCM(data_key.key).encrypt(nonce, value, aad)


def decrypt_secret(
    data_key: DataKey, project_id: str, name: str, version: int, nonce: bytes, ciphertext: bytes
) -> str:
    aad = _secret_aad(project_id, name, version, data_key.key_id)
    try:
        return AESGCM(data_key.key).decrypt(nonce, ciphertext, aad).decode("utf-8")
    except (InvalidTag, ValueError):
        raise SecretsError(
            SecretsReason.SECRET_INTEGRITY,
            f"secret {name} v{version} does not decrypt under its project's data key",
        ) from None


# ------------------------------------------------------------------ delivery


class KekSource:
    """The ingress's KEK: read from its file at start; read again once when a
    delivery names another KEK id (the file was replaced after rotate-kek)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._kek = load_kek(path)

    def kek_for(self, kek_id: str) -> Kek:
        if self._kek.kek_id != kek_id:
            self._kek = load_kek(self.path)
        return self._kek


def open_delivery(source: KekSource, answer: Mapping[str, Any]) -> DeliveredSecrets:
    """Decrypt the `ok` answer of ql.lease_secrets in memory: {ENV_NAME: value}."""
    rows = answer.get("secrets") or []
    if not rows:
        return DeliveredSecrets({})
    wrapped = WrappedKey.from_json(answer["dataKey"])
    data_key = unwrap(source.kek_for(wrapped.kek_id), wrapped)
    project_id = str(answer["projectId"])
    values: dict[str, str] = {}
    for row in rows:
        if row["keyId"] != data_key.key_id:
            raise SecretsError(
                SecretsReason.SECRET_INTEGRITY, f"secret {row['name']} names another data key"
            )
        values[str(row["env"])] = decrypt_secret(
            data_key,
            project_id,
            str(row["name"]),
            int(row["version"]),
            _hex(row["nonce"]),
            _hex(row["ciphertext"]),
        )
    return DeliveredSecrets(values)


def _hex(text: object) -> bytes:
    try:
        return bytes.fromhex(str(text))
    except ValueError:
        raise SecretsError(SecretsReason.SECRET_INTEGRITY, "malformed hex in the answer") from None
