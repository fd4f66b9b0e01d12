"""The control plane's side of secrets (SPEC §14.1): encrypt here, store only
ciphertext and wrapped keys (`ql.project_data_key`, `ql.set_secret`, …).

Each operation is ONE transaction on the caller's connection: a value or a key
file refused half-way (a KEK that does not open the project's data key, a
concurrent change) leaves nothing behind — not even the project's first data
key. No function here returns, logs or puts into an error a value or a key.
"""

from __future__ import annotations

import re

import psycopg

from qinglong.db import answers, api
from qinglong.service.control_plane import ControlPlaneError, run, translate
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


def check_name(name: str) -> None:
    if not NAME_PATTERN.match(name):
        raise ControlPlaneError(
            "invalid_input",
            "secret name must match ^[a-z][a-z0-9_.-]{0,63}$",
            http_status=400,
            field="name",
        )


def set_secret(
    conn: psycopg.Connection, kek: Kek, project: str, name: str, value: bytes
) -> answers.SecretVersion:
    """Store a new version of `name` (`doc`: {project, name, version, createdAtMs,
    updatedAtMs}).
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


def _set_once(
    conn: psycopg.Connection, kek: Kek, project: str, name: str, value: bytes
) -> answers.SecretVersion:
    _, offered = new_data_key(kek)
    stored = api.project_data_key(
        project=project,
        key_id=offered.key_id,
        kek_id=offered.kek_id,
        nonce=offered.nonce,
        wrapped_key=offered.wrapped_key,
    ).run(conn)
    data_key = unwrap(kek, WrappedKey.from_json(stored.doc))
    version = 1 + api.list_secrets(project=project).run(conn).version_of(name)
    nonce, ciphertext = encrypt_secret(data_key, stored.project_id, name, version, value)
    return api.set_secret(
        project=project,
        name=name,
        version=version,
        key_id=data_key.key_id,
        nonce=nonce,
        ciphertext=ciphertext,
    ).run(conn)


def list_secrets(conn: psycopg.Connection, project: str) -> answers.SecretList:
    """{project, secrets: [{name, version, createdAtMs, updatedAtMs}]}: never a value."""
    return run(conn, api.list_secrets(project=project))


def delete_secret(conn: psycopg.Connection, project: str, name: str) -> answers.SecretVersion:
    return run(conn, api.delete_secret(project=project, name=name))


def rotate_kek(conn: psycopg.Connection, old: Kek, new: Kek) -> answers.KeysRewrapped:
    """Re-wrap every project's data key from `old` to `new`, all in one transaction
    (ql.rewrap_data_keys); -> {oldKekId, kekId, rewrapped}."""
    if old.kek_id == new.kek_id:
        raise ControlPlaneError(
            "invalid_input",
            "the new KEK file has the same KEK id",
            http_status=400,
            field="newKekFile",
        )
    try:
        with conn.transaction():
            keys = api.list_data_keys().run(conn).keys
            rewrapped = [rewrap(old, new, WrappedKey.from_json(k)) for k in keys]
            return api.rewrap_data_keys(
                old_kek_id=old.kek_id,
                new_kek_id=new.kek_id,
                keys=[
                    {"keyId": w.key_id, "nonce": w.nonce.hex(), "wrappedKey": w.wrapped_key.hex()}
                    for w in rewrapped
                ],
            ).run(conn)
    except psycopg.Error as exc:
        raise translate(exc) from None
