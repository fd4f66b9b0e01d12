"""Remote access to the console (SPEC §10): TLS, the access token, sessions.

With --allow-remote the console serves HTTPS only (TLS 1.2+, `tls_context`)
and every page needs the operator's access token, read once from a private
file (`read_token_file`: a regular file, no symlink, no group/other permission
bits — like the worker's credential file). Only the token's SHA-256 is kept;
a presented token is hashed and compared with `hmac.compare_digest`.

A browser logs in once through the console's own form and then holds a
session cookie that is not the token: `<payload>.<mac>` where the payload is a
random nonce and an expiry and the mac is HMAC-SHA256 under a key drawn when
the process starts (a restart ends every session; so does a new token, which
needs a restart). Logging out revokes the nonce until it would have expired.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import ssl
import stat
from dataclasses import dataclass, field
from enum import StrEnum

from qinglong.service.console.config import ConsoleConfig
from qinglong.service.tls import TlsConfigError

TOKEN_FILE_LIMIT = 4096
MIN_TOKEN_CHARS = 32
SESSION_TTL_S = 12 * 3600
# Logouts remembered at most; past it the session key is replaced (every
# session ends) rather than forgetting a revocation.
MAX_REVOKED = 10_000
# `__Host-`: the browser keeps it only when set Secure, with Path=/ and no Domain.
SESSION_COOKIE = "__Host-qinglong-console"
_TOKEN = re.compile(rf"[!-~]{{{MIN_TOKEN_CHARS},1024}}")
_BEARER = re.compile(r"Bearer ([!-~]{1,1024})\Z")
_NONCE_BYTES = 16
_MAC_CONTEXT = b"qinglong-console-session\0"


class RemoteSetupError(ValueError):
    """A file given for remote serving cannot be used (the message names the file,
    never its contents)."""


class Denial(StrEnum):
    """Why a request was not let in (said in a 401; the token never is)."""

    MISSING = "missing_token"
    INVALID = "invalid_token"


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("ascii")).digest()


def read_token_file(path: str) -> bytes:
    """The SHA-256 of the token in `path` (its one line, surrounding whitespace stripped)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise RemoteSetupError(
            f"--auth-token-file {path}: cannot open it: {exc.strerror or exc}"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RemoteSetupError(f"--auth-token-file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise RemoteSetupError(
                f"--auth-token-file {path}: readable or writable by group/other "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 it"
            )
        raw = os.read(fd, TOKEN_FILE_LIMIT + 1)
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if len(raw) > TOKEN_FILE_LIMIT or not _TOKEN.fullmatch(text):
        raise RemoteSetupError(
            f"--auth-token-file {path}: must hold one token of {MIN_TOKEN_CHARS} to 1024 "
            "printable ASCII characters without spaces"
        )
    return token_digest(text)


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The console's server context: TLS 1.2 or newer, no client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    for flag, path in (("--tls-cert", cert_file), ("--tls-key", key_file)):
        if not os.path.isfile(path):
            raise TlsConfigError(f"{flag} {path}: no such file")
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load --tls-cert/--tls-key: {type(exc).__name__}: "
            f"{getattr(exc, 'reason', None) or exc.strerror or 'unusable'}"
        ) from None
    return ctx


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Session:
    nonce: bytes = field(repr=False)
    expires_s: int


@dataclass
class ConsoleAccess:
    """The token's digest and the live session key of one console process."""

    token_digest: bytes = field(repr=False)
    session_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    revoked: dict[bytes, int] = field(default_factory=dict, repr=False)
    ttl_s: int = SESSION_TTL_S

    def token_matches(self, presented: str) -> bool:
        try:
            digest = token_digest(presented)
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(digest, self.token_digest)

    def bearer(self, header: str) -> Denial | None:
        """None when `header` is `Bearer <the token>`, else why not."""
        match = _BEARER.match(header.strip())
        if match is None or not self.token_matches(match.group(1)):
            return Denial.INVALID
        return None

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self.session_key, _MAC_CONTEXT + payload, hashlib.sha256).digest()

    def issue(self, now_s: int) -> str:
        """A fresh session cookie value (no part of it is or reveals the token)."""
        payload = secrets.token_bytes(_NONCE_BYTES) + (now_s + self.ttl_s).to_bytes(8, "big")
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def session(self, cookie: str, now_s: int) -> Session | None:
        """The session `cookie` names: signed by this process, unexpired, not logged out."""
        encoded, _, mac_text = cookie.partition(".")
        payload, mac = _unb64(encoded), _unb64(mac_text)
        if payload is None or mac is None or len(payload) != _NONCE_BYTES + 8:
            return None
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        session = Session(payload[:_NONCE_BYTES], int.from_bytes(payload[_NONCE_BYTES:], "big"))
        if session.expires_s <= now_s or session.nonce in self.revoked:
            return None
        return session

    def revoke(self, session: Session, now_s: int) -> None:
        """Log `session` out: its cookie stops working, here and now."""
        for nonce in [n for n, expires in self.revoked.items() if expires <= now_s]:
            del self.revoked[nonce]
        if len(self.revoked) >= MAX_REVOKED:
            self.session_key = secrets.token_bytes(32)  # ends every session
            self.revoked.clear()
            return
        self.revoked[session.nonce] = session.expires_s


@dataclass(frozen=True)
class RemoteServing:
    """What --allow-remote adds to a console: its TLS context and access check."""

    ssl_context: ssl.SSLContext
    access: ConsoleAccess


def load_remote(config: ConsoleConfig) -> RemoteServing | None:
    """The TLS context and token of a remote console (None for a loopback one).

    RemoteSetupError / TlsConfigError naming the file that cannot be used.
    """
    if not config.allow_remote:
        return None
    if not (config.tls_cert and config.tls_key and config.auth_token_file):
        raise RemoteSetupError(
            "--allow-remote needs --tls-cert, --tls-key and --auth-token-file"
        )  # ConsoleConfig refuses it first
    access = ConsoleAccess(token_digest=read_token_file(config.auth_token_file))
    return RemoteServing(tls_context(config.tls_cert, config.tls_key), access)
