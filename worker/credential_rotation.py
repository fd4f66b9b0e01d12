"""A worker rotates its own credential at 75 % of its lifetime (SPEC §16.2).

The credential file holds only the token (``ql3w_<id>_<secret>``, 0600), read by
the transport on every request. Its lifetime lives beside it in
``<credentialFile>.lifetime.json`` (``{credentialId, issuedAtMs, expiresAtMs}``,
0600), written by ``admin worker create`` and by every rotation. Without that
file (credentials issued before expiry existed, or by hand) the worker does not
rotate by itself.

One rotation, each step a crash point (``QL_WORKER_CRASH_AT``, worker/faults.py):

1. ``before_rotate``: nothing sent. A restart finds the rotation still due.
2. ``POST /v1/credentials/rotate`` with the current credential; the answer
   (``qinglong/credential@v1``) holds the new one. ``after_rotate_response``:
   the new credential exists only in memory — lost by a crash; the server keeps
   the current one valid (until the new one's first use, which never comes, or
   24 h), and the restarted worker rotates again, which revokes the lost one.
3. The new token replaces the credential file durably (temp file, fsync,
   rename, directory fsync) before anything uses it, then the lifetime file
   the same way. ``after_rotate_write``: the file holds the new credential,
   not yet used; the old one is still valid too, so whichever the restarted
   worker reads works (it reads the new one). A crash between the two files
   leaves a lifetime that names another credential: the restarted worker
   rotates at once (with the new credential, which works).
4. The next request uses the new credential — its first use, which retires the
   old one on the server. The runner makes that a session heartbeat right away;
   ``after_rotate_first_use`` follows it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qinglong.worker import fsio

ROTATE_PATH = "/v1/credentials/rotate"
LIFETIME_SUFFIX = ".lifetime.json"
ROTATE_AT = 0.75
RESPONSE_LIMIT = 4096
# After a failed rotation, try again after this long (or at expiry, if sooner).
RETRY_MS = 60_000
# How often the credential and lifetime files are re-read (another process, an
# operator, may replace them).
RECHECK_MS = 60_000
_TOKEN_ID = re.compile(r"^ql3w_([a-z0-9]{16})_")

PostFn = Callable[[str, Mapping[str, Any], int], Any]


class RotationFailed(Exception):
    """The rotation did not happen; ``reason`` is low-cardinality, never a secret."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Lifetime:
    credential_id: str
    issued_at_ms: int
    expires_at_ms: int

    @property
    def rotate_at_ms(self) -> int:
        return self.issued_at_ms + int((self.expires_at_ms - self.issued_at_ms) * ROTATE_AT)

    def as_json(self) -> dict[str, Any]:
        return {
            "credentialId": self.credential_id,
            "issuedAtMs": self.issued_at_ms,
            "expiresAtMs": self.expires_at_ms,
        }


def lifetime_path(credential_file: str) -> str:
    return credential_file + LIFETIME_SUFFIX


def read_lifetime(credential_file: str) -> Lifetime | None:
    """The lifetime file beside the credential file, None if absent or unusable."""
    try:
        doc = json.loads(fsio.read_file_capped(lifetime_path(credential_file), 4096).data)
        lifetime = Lifetime(
            str(doc["credentialId"]), int(doc["issuedAtMs"]), int(doc["expiresAtMs"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return lifetime if lifetime.expires_at_ms > lifetime.issued_at_ms else None


def token_credential_id(token: str) -> str | None:
    found = _TOKEN_ID.match(token)
    return found.group(1) if found else None


def due_at_ms(lifetime: Lifetime | None, token: str | None) -> int | None:
    """When the credential `token` is due for rotation (epoch ms), from its
    lifetime file: None when the lifetime (or the token) is unknown — no
    self-rotation; 0 (at once) when the lifetime names another credential (a
    crash between the two writes left it stale); else 75 % of the lifetime."""
    if lifetime is None or token is None:
        return None
    if lifetime.credential_id != token_credential_id(token):
        return 0
    return lifetime.rotate_at_ms


def is_due(due_at: int | None, now_ms: int) -> bool:
    """The rotation decision at `now_ms` (the caller's clock)."""
    return due_at is not None and now_ms >= due_at


def write_credential(
    credential_file: str, token: str, lifetime: Lifetime | None, fs: fsio.FileSystem | None = None
) -> None:
    """Durably replace the credential file, then its lifetime file (temp, fsync,
    rename, directory fsync each)."""
    fs = fs or fsio.FileSystem()
    directory = os.path.dirname(os.path.abspath(credential_file))
    fsio.update_file(fs, directory, os.path.basename(credential_file), token.encode("ascii"))
    if lifetime is not None:
        fsio.update_file(
            fs,
            directory,
            os.path.basename(lifetime_path(credential_file)),
            json.dumps(lifetime.as_json()).encode("ascii"),
        )


@dataclass
class CredentialRotator:
    """Decides when the credential is due and performs one rotation."""

    credential_file: str
    worker_id: str
    post: PostFn
    read_token: Callable[[], str]
    # Set by the runner to its fault checkpoint (worker/faults.py).
    checkpoint: Callable[[str], None] = lambda _point: None
    _retry_at_ms: int = 0
    _reread_at_ms: int = 0
    _due_at_ms: int | None = None

    def due(self, now_ms: int) -> bool:
        """Whether to rotate now (the files are re-read at most every RECHECK_MS)."""
        if now_ms < self._retry_at_ms:
            return False
        if now_ms >= self._reread_at_ms:
            self._due_at_ms = self._read_due_at()
            self._reread_at_ms = now_ms + RECHECK_MS
        return is_due(self._due_at_ms, now_ms)

    def _read_due_at(self) -> int | None:
        lifetime = read_lifetime(self.credential_file)
        if lifetime is None:
            return None  # lifetime unknown: no self-rotation
        try:
            token = self.read_token()
        except Exception:  # an unreadable credential file: the requests say why
            return None
        return due_at_ms(lifetime, token)

    def failed(self, now_ms: int) -> None:
        self._retry_at_ms = now_ms + RETRY_MS

    def rotate(self) -> Lifetime:
        """One rotation; the new credential is on disk when this returns."""
        self.checkpoint("before_rotate")
        body = {"schema": "qinglong/credential-rotate-request@v1", "workerId": self.worker_id}
        response = self.post(ROTATE_PATH, body, RESPONSE_LIMIT)
        doc = _parse(response, self.worker_id)
        self.checkpoint("after_rotate_response")
        lifetime = None
        if doc["expiresAtMs"] is not None:
            lifetime = Lifetime(doc["credentialId"], doc["issuedAtMs"], doc["expiresAtMs"])
        self._reread_at_ms = 0  # whatever happens next, read the files again
        write_credential(self.credential_file, doc["credential"], lifetime)
        self.checkpoint("after_rotate_write")
        return lifetime or Lifetime(doc["credentialId"], doc["issuedAtMs"], 2**53 - 1)


def _parse(response: Any, worker_id: str) -> dict[str, Any]:
    from qinglong.schemas.contract import ContractError, SchemaId
    from qinglong.schemas.fastpath import load
    from qinglong.worker.session import error_reason

    if response.status != 200:
        raise RotationFailed(f"http_{response.status}_{error_reason(response.body)}")
    try:
        doc = load(SchemaId.CREDENTIAL, response.body)
    except ContractError as exc:
        raise RotationFailed(f"credential_{exc.reason}") from None
    if (
        doc["workerId"] != worker_id
        or token_credential_id(doc["credential"]) != doc["credentialId"]
    ):
        raise RotationFailed("credential_foreign")
    return doc
