"""The control plane's side of secrets (SPEC §14.1): encrypt here, store only
ciphertext and wrapped keys (`ql.project_data_key`, `ql.set_secret`, …).

Each operation is ONE transaction on the caller's connection: a value or a key
file refused half-way (a KEK that does not open the project's data key, a
concurrent change) leaves nothing behind — not even the project's first data
key. No function here returns, logs or puts into an error a value or a key.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.db.api import Call
from qinglong.service.control_plane import ControlPlaneError, translate
from qinglong.service.secrets_crypto import (
    Kek,
    WrappedKey,
    check_value,
    encrypt_secret,
    new_data_key,
    rewrap,
    unwrap,
)

__all__ = ["NAME_PATTERN", "delete_secret", "list_secrets", "rotate_kek", "set_secret"]

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,63}\Z")
_ATTEMPTS = 4  # the first try + three retries (CONTRACT): a concurrent set moved the version


def _run(conn: psycopg.Connection, call: Call[Any]) -> dict[str, Any]:
    result = call.run(conn)
    if not isinstance(result, dict):
        raise ControlPlaneError("database_error", f"ql.{call.function} returned no object")
    return result


def check_name(name: str) -> None:
    if not NAME_PATTERN.match(name):
        raise ControlPlaneError("invalid_input", "secret name must match ^[a-z][a-z0-9_.-]{0,63}$",
                                http_status=400, field="name")


def set_secret(conn: psycopg.Connection, kek: Kek, project: str, name: str,
               value: bytes) -> dict[str, Any]:
    """Store a new version of `name`; -> {project, name, version, createdAtMs, updatedAtMs}.
    The value is checked (8 B - 16 KiB of text) before anything is sent."""
    check_value(value)
    check_name(name)
    for attempt in range(_ATTEMPTS):
        try:
            with conn.transaction():
                return _set_once(conn, kek, project, name, value)
        except psycopg.Error as exc:
            error = translate(exc)
            if error.reason != "secret_conflict" or attempt == _ATTEMPTS - 1:
                raise error from None
    raise AssertionError("unreachable")


def _set_once(conn: psycopg.Connection, kek: Kek, project: str, name: str,
              value: bytes) -> dict[str, Any]:
    _, offered = new_data_key(kek)
    stored = _run(conn, api.project_data_key(
        project=project, key_id=offered.key_id, kek_id=offered.kek_id, nonce=offered.nonce,
        wrapped_key=offered.wrapped_key))
    data_key = unwrap(kek, WrappedKey.from_json(stored))
    listed = _run(conn, api.list_secrets(project=project))["secrets"]
    version = 1 + next((int(s["version"]) for s in listed if s["name"] == name), 0)
    nonce, ciphertext = encrypt_secret(data_key, str(stored["projectId"]), name, version, value)
    return _run(conn, api.set_secret(project=project, name=name, version=version,
                                     key_id=data_key.key_id, nonce=nonce,
                                     ciphertext=ciphertext))


def _one(conn: psycopg.Connection, call: Call[Any]) -> dict[str, Any]:
    try:
        with conn.transaction():
            return _run(conn, call)
    except psycopg.Error as exc:
        raise translate(exc) from None


def list_secrets(conn: psycopg.Connection, project: str) -> dict[str, Any]:
    """{project, secrets: [{name, version, createdAtMs, updatedAtMs}]}: never a value."""
    return _one(conn, api.list_secrets(project=project))


def delete_secret(conn: psycopg.Connection, project: str, name: str) -> dict[str, Any]:
    return _one(conn, api.delete_secret(project=project, name=name))


def rotate_kek(conn: psycopg.Connection, old: Kek, new: Kek) -> dict[str, Any]:
    """Re-wrap every project's data key from `old` to `new`, all in one transaction
    (ql.rewrap_data_keys); -> {oldKekId, kekId, rewrapped}."""
    if old.kek_id == new.kek_id:
        raise ControlPlaneError("invalid_input", "the new KEK file has the same KEK id",
                                http_status=400, field="newKekFile")
    try:
        with conn.transaction():
            keys = _run(conn, api.list_data_keys())["keys"]
            rewrapped = [rewrap(old, new, WrappedKey.from_json(k)) for k in keys]
            return _run(conn, api.rewrap_data_keys(
                old_kek_id=old.kek_id, new_kek_id=new.kek_id,
                keys=[{"keyId": w.key_id, "nonce": w.nonce.hex(),
                       "wrappedKey": w.wrapped_key.hex()} for w in rewrapped]))
    except psycopg.Error as exc:
        raise translate(exc) from None
