"""`qinglong admin secret set|list|delete|rotate-kek` (SPEC §14.1) and the
publish fence of `secrets` (§14.2), black-box: subprocesses against a real
migrated database and real key files. No command prints a value; a refused
value or key file changes nothing; rotate-kek keeps every value readable with
the new key file only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.service.secrets_crypto import (
    Kek,
    SecretsError,
    SecretsReason,
    WrappedKey,
    create_kek_file,
    decrypt_secret,
    load_kek,
    unwrap,
)
from tests.py.provision import table_fingerprint

VALUE = b"s3cret-value-\xe2\x9c\x93-with-unicode"


def admin(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def ok(*args: str, **kwargs: Any) -> dict[str, Any]:
    result = admin(*args, **kwargs)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert VALUE not in result.stdout + result.stderr
    return json.loads(lines[0])


def fails(*args: str, code: int, **kwargs: Any) -> dict[str, Any]:
    result = admin(*args, **kwargs)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == b"" and b"Traceback" not in result.stderr
    assert VALUE not in result.stderr
    return json.loads(result.stderr.decode().strip().splitlines()[-1])


@pytest.fixture
def kek(tmp_path: Path) -> tuple[Path, Kek]:
    path = tmp_path / "kek.key"
    return path, create_kek_file(path)


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        yield conn


def _set(dsn: str, kek_file: Path, project: str, name: str, value: bytes) -> dict[str, Any]:
    return ok(
        "secret",
        "set",
        "--dsn",
        dsn,
        "--project",
        project,
        "--name",
        name,
        "--kek-file",
        str(kek_file),
        stdin=value,
    )


def _values(conn: psycopg.Connection, kek: Kek) -> dict[tuple[str, str], bytes]:
    """Every stored secret decrypted with `kek` (as the ingress would)."""
    out: dict[tuple[str, str], bytes] = {}
    rows = conn.execute(
        "SELECT p.name, p.id::text, k.key_id, k.kek_id, k.nonce, k.wrapped_key, s.name,"
        " s.version, s.nonce, s.ciphertext FROM ql_private.secrets s"
        " JOIN ql_private.projects p ON p.id = s.project_id"
        " JOIN ql_private.project_data_keys k ON k.project_id = s.project_id"
    ).fetchall()
    for project, pid, key_id, kek_id, knonce, wrapped, name, version, nonce, ct in rows:
        data_key = unwrap(kek, WrappedKey(key_id, kek_id, bytes(knonce), bytes(wrapped)))
        out[(project, name)] = decrypt_secret(
            data_key, pid, name, version, bytes(nonce), bytes(ct)
        ).encode()
    return out


def test_set_list_delete_never_print_a_value(db_dsn, conn, kek, tmp_path):
    value_file = tmp_path / "value"
    value_file.write_bytes(VALUE)
    first = ok(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "db.password",
        "--from-file",
        str(value_file),
        env={"QINGLONG_KEK_FILE": str(kek[0])},
    )
    assert set(first) == {"project", "name", "version", "createdAtMs", "updatedAtMs"}
    assert (first["project"], first["name"], first["version"]) == ("acme", "db.password", 1)
    second = _set(db_dsn, kek[0], "acme", "db.password", VALUE + b"-2")
    assert second["version"] == 2 and second["createdAtMs"] == first["createdAtMs"]
    _set(db_dsn, kek[0], "acme", "api-token", VALUE)

    listed = ok("secret", "list", "--dsn", db_dsn, "--project", "acme")
    assert listed["project"] == "acme"
    assert [(s["name"], s["version"]) for s in listed["secrets"]] == [
        ("api-token", 1),
        ("db.password", 2),
    ]
    assert all(
        set(s) == {"name", "version", "createdAtMs", "updatedAtMs"} for s in listed["secrets"]
    )
    assert _values(conn, kek[1]) == {
        ("acme", "db.password"): VALUE + b"-2",
        ("acme", "api-token"): VALUE,
    }

    gone = ok("secret", "delete", "--dsn", db_dsn, "--project", "acme", "--name", "api-token")
    assert gone == {"project": "acme", "name": "api-token", "version": 1, "deleted": True}
    assert (
        fails(
            "secret", "delete", "--dsn", db_dsn, "--project", "acme", "--name", "api-token", code=1
        )["error"]
        == "not_found"
    )
    # The admin actions are audited by name; the table holds no plaintext.
    actions = conn.execute(
        "SELECT action, detail ->> 'name' FROM ql_private.security_audit"
        " WHERE action LIKE 'secret.%' ORDER BY id"
    ).fetchall()
    assert actions == [
        ("secret.set", "db.password"),
        ("secret.set", "db.password"),
        ("secret.set", "api-token"),
        ("secret.delete", "api-token"),
    ]
    stored = conn.execute("SELECT string_agg(ciphertext::text, '') FROM ql_private.secrets")
    assert VALUE.hex() not in str(stored.fetchone())


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"7 bytes", "value_too_short"),
        (b"x" * (16 * 1024 + 1), "value_too_long"),
        (b"\xff\xfe not utf-8 text", "value_not_text"),
        (b"nul \x00 inside value", "value_not_text"),
    ],
)
def test_bad_values_are_refused_and_change_nothing(db_dsn, conn, kek, value, reason):
    before = table_fingerprint(conn)
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "x",
        "--kek-file",
        str(kek[0]),
        stdin=value,
        code=2,
    )
    assert (doc["error"], doc["reason"], doc["field"]) == ("invalid_input", reason, "value")
    assert table_fingerprint(conn) == before, "not even the project or its data key"


def test_limits_are_inclusive(db_dsn, kek):
    assert _set(db_dsn, kek[0], "acme", "short", b"8 bytes!")["version"] == 1
    assert _set(db_dsn, kek[0], "acme", "long", b"y" * 16 * 1024)["version"] == 1


def test_key_file_problems_are_refused(db_dsn, conn, kek, tmp_path):
    before = table_fingerprint(conn)
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "x",
        stdin=VALUE,
        code=2,
        env={"QINGLONG_KEK_FILE": ""},
    )
    assert (doc["reason"], doc["field"]) == ("invalid_input", "kekFile")
    os.chmod(kek[0], 0o644)
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "x",
        "--kek-file",
        str(kek[0]),
        stdin=VALUE,
        code=2,
    )
    assert (doc["reason"], doc["field"]) == ("kek_permissions", "kekFile")
    assert "chmod 600" in doc["detail"]
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    os.chmod(bad, 0o600)
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "x",
        "--kek-file",
        str(bad),
        stdin=VALUE,
        code=2,
    )
    assert doc["reason"] == "kek_malformed"
    assert table_fingerprint(conn) == before
    os.chmod(kek[0], 0o600)

    _set(db_dsn, kek[0], "acme", "x", VALUE)
    other = tmp_path / "other.key"
    create_kek_file(other)
    before = table_fingerprint(conn)
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "x",
        "--kek-file",
        str(other),
        stdin=VALUE,
        code=1,
    )
    assert (doc["error"], doc["reason"]) == ("conflict", "kek_mismatch")
    # Another project's first key under a second KEK is refused too (one KEK at a time).
    doc = fails(
        "secret",
        "set",
        "--dsn",
        db_dsn,
        "--project",
        "beta",
        "--name",
        "x",
        "--kek-file",
        str(other),
        stdin=VALUE,
        code=1,
    )
    assert (doc["error"], doc["reason"]) == ("conflict", "kek_mismatch")
    assert table_fingerprint(conn) == before


def test_a_symlinked_key_file_is_followed_and_an_unreadable_one_refused(
    db_dsn, conn, kek, tmp_path
):
    """A KEK file given as a symlink (a mounted secret volume) is followed and its
    TARGET's mode checked; a path that cannot be read as a file (a directory, a
    dangling symlink) is `kek_unreadable`. Every refusal changes nothing."""
    link = tmp_path / "kek-link.key"
    link.symlink_to(kek[0])
    assert load_kek(link) == kek[1]
    assert _set(db_dsn, link, "acme", "x", VALUE)["version"] == 1
    before = table_fingerprint(conn)
    os.chmod(kek[0], 0o644)  # the link itself is always lrwxrwxrwx: its target counts
    doc = fails("secret", "set", "--dsn", db_dsn, "--project", "acme", "--name", "x",
                "--kek-file", str(link), stdin=VALUE, code=2)  # fmt: skip
    assert (doc["reason"], doc["field"]) == ("kek_permissions", "kekFile")
    assert "0644" in doc["detail"]
    os.chmod(kek[0], 0o600)

    directory = tmp_path / "kek-dir"
    directory.mkdir(mode=0o700)
    dangling = tmp_path / "dangling.key"
    dangling.symlink_to(tmp_path / "missing.key")
    for unreadable in (directory, dangling):
        with pytest.raises(SecretsError) as caught:
            load_kek(unreadable)
        assert caught.value.reason is SecretsReason.KEK_UNREADABLE
        doc = fails("secret", "set", "--dsn", db_dsn, "--project", "acme", "--name", "x",
                    "--kek-file", str(unreadable), stdin=VALUE, code=2)  # fmt: skip
        assert (doc["reason"], doc["field"]) == ("kek_unreadable", "kekFile"), unreadable
        doc = fails("secret", "rotate-kek", "--dsn", db_dsn, "--kek-file", str(kek[0]),
                    "--new-kek-file", str(unreadable), code=2)  # fmt: skip
        assert (doc["reason"], doc["field"]) == ("kek_unreadable", "newKekFile"), unreadable
    assert table_fingerprint(conn) == before
    assert directory.is_dir() and not list(directory.iterdir()) and not dangling.exists()


def test_rotate_kek_rewraps_every_key(db_dsn, conn, kek, tmp_path):
    _set(db_dsn, kek[0], "acme", "db.password", VALUE)
    _set(db_dsn, kek[0], "beta", "token", VALUE + b"-beta")
    before = _values(conn, kek[1])
    new_file = tmp_path / "new.key"
    rotated = ok(
        "secret",
        "rotate-kek",
        "--dsn",
        db_dsn,
        "--kek-file",
        str(kek[0]),
        "--new-kek-file",
        str(new_file),
    )
    new = load_kek(new_file)
    assert (rotated["oldKekId"], rotated["kekId"], rotated["rewrapped"]) == (
        kek[1].kek_id,
        new.kek_id,
        2,
    )
    assert rotated["newKekFileCreated"] is True and os.stat(new_file).st_mode & 0o777 == 0o600
    assert _values(conn, new) == before, "every value still readable, with the new KEK"
    with pytest.raises(SecretsError) as caught:
        _values(conn, kek[1])
    assert caught.value.reason is SecretsReason.KEK_MISMATCH
    with pytest.raises(SecretsError) as caught:  # the old key under the new id: no tag match
        _values(conn, Kek(new.kek_id, kek[1].key))
    assert caught.value.reason is SecretsReason.SECRET_INTEGRITY
    # The old file is refused from now on; the new one works.
    assert (
        fails(
            "secret",
            "set",
            "--dsn",
            db_dsn,
            "--project",
            "acme",
            "--name",
            "db.password",
            "--kek-file",
            str(kek[0]),
            stdin=VALUE,
            code=1,
        )["reason"]
        == "kek_mismatch"
    )
    assert (
        fails(
            "secret",
            "rotate-kek",
            "--dsn",
            db_dsn,
            "--kek-file",
            str(kek[0]),
            "--new-kek-file",
            str(new_file),
            code=1,
        )["reason"]
        == "kek_mismatch"
    )
    assert _set(db_dsn, new_file, "acme", "db.password", VALUE)["version"] == 2


def test_a_refused_rotation_creates_no_new_kek_file(db_dsn, conn, kek, tmp_path):
    """Nothing is written by a refusal: a NEW file the command would create is
    not left behind when the old KEK does not open the stored keys."""
    _set(db_dsn, kek[0], "acme", "db.password", VALUE)
    other = tmp_path / "other.key"
    create_kek_file(other)
    new_file = tmp_path / "never.key"
    assert (
        fails(
            "secret",
            "rotate-kek",
            "--dsn",
            db_dsn,
            "--kek-file",
            str(other),
            "--new-kek-file",
            str(new_file),
            code=1,
        )["reason"]
        == "kek_mismatch"
    )
    assert not new_file.exists()
    assert _values(conn, kek[1]) == {("acme", "db.password"): VALUE}


def test_publish_pins_names_of_existing_secrets(db_dsn, conn, kek, tmp_path):
    command = {
        "schema": "qinglong/command@v1",
        "argv": ["env"],
        "env": {"PLAIN": "x"},
        "secrets": {"DB_PASSWORD": "db.password"},
        "timeoutS": 30,
    }
    command_file = tmp_path / "command.json"
    command_file.write_text(json.dumps(command))
    publish = (
        "task",
        "publish",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "build",
        "--command-file",
        str(command_file),
    )
    doc = fails(*publish, code=2)
    assert (doc["reason"], doc["field"]) == ("invalid_input", "secrets")
    assert "db.password" in doc["detail"]
    _set(db_dsn, kek[0], "acme", "db.password", VALUE)
    assert ok(*publish)["revision"] == 1
    spec = conn.execute("SELECT spec FROM ql_private.execution_revisions").fetchone()[0]
    assert spec["secrets"] == {"DB_PASSWORD": "db.password"}
    # Another project's secret of the same name does not count.
    other = (
        "task",
        "publish",
        "--dsn",
        db_dsn,
        "--project",
        "beta",
        "--name",
        "build",
        "--command-file",
        str(command_file),
    )
    assert fails(*other, code=2)["field"] == "secrets"

    command_file.write_text(json.dumps(dict(command, env={"DB_PASSWORD": "plain"})))
    doc = fails(*publish, code=2)
    assert (doc["reason"], doc["field"]) == ("env_conflict", "commandFile")
    assert "DB_PASSWORD" in doc["detail"]


def test_concurrent_sets_each_get_their_own_version(db_dsn, conn, kek):
    """Truly concurrent `set`s of one secret (own connections, released together):
    the version guard turns a lost race into QL040 and secret_store encrypts
    again at the next version, so every call lands, each at its own version."""
    import threading

    from qinglong.service import secret_store

    _set(db_dsn, kek[0], "acme", "shared", VALUE)
    barrier = threading.Barrier(4)
    versions: list[int] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with psycopg.connect(db_dsn) as own:
                barrier.wait(timeout=30)
                result = secret_store.set_secret(
                    own, kek[1], "acme", "shared", VALUE + f"-{i}".encode()
                )
                versions.append(result.version)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and sorted(versions) == [2, 3, 4, 5]
    stored = _values(conn, kek[1])[("acme", "shared")]
    assert stored.startswith(VALUE + b"-")


def test_a_lost_race_at_one_version_is_secret_conflict(db_dsn, conn, kek):
    """Two transactions write version 2 at once: the second waits for the first's
    row lock, then finds version 2 stored and raises QL040, writing nothing."""
    from qinglong.db import api
    from qinglong.service.secrets_crypto import encrypt_secret

    _set(db_dsn, kek[0], "acme", "race", VALUE)
    row = conn.execute(
        "SELECT p.id::text, k.key_id, k.kek_id, k.nonce, k.wrapped_key"
        " FROM ql_private.project_data_keys k"
        " JOIN ql_private.projects p ON p.id = k.project_id"
    ).fetchone()
    data_key = unwrap(kek[1], WrappedKey(row[1], row[2], bytes(row[3]), bytes(row[4])))
    nonce, ciphertext = encrypt_secret(data_key, row[0], "race", 2, VALUE)
    call = api.set_secret(
        project="acme",
        name="race",
        version=2,
        key_id=data_key.key_id,
        nonce=nonce,
        ciphertext=ciphertext,
    )
    with psycopg.connect(db_dsn) as first, psycopg.connect(db_dsn) as second:
        assert call.run(first).version == 2  # uncommitted: holds the row
        outcome: list[object] = []
        import threading

        def late() -> None:
            try:
                outcome.append(call.run(second))
            except psycopg.Error as exc:
                outcome.append(exc)
                second.rollback()

        waiter = threading.Thread(target=late)
        waiter.start()
        waiter.join(timeout=1)
        assert waiter.is_alive(), "the second writer waits for the first's row lock"
        first.commit()
        waiter.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], psycopg.Error)
    assert outcome[0].sqlstate == "QL040"
    assert conn.execute(
        "SELECT version FROM ql_private.secrets WHERE name = 'race'"
    ).fetchone() == (2,)
