"""Project tokens of the producer API (SPEC §13.4): `qlp_<tokenId>_<secret>`.

`tokenId` is 16 characters `[a-z0-9]` (public: listed, revoked by it); the
secret is 32 CSPRNG bytes as canonical unpadded base64url (43 characters). The
database stores only the SHA-256 of the whole token string; the API sends that
digest with the id on every call and the producer functions compare it in SQL.
Pure stdlib: the admin CLI and the API both import it.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import string
from dataclasses import dataclass, field

TOKEN_PREFIX = "qlp_"
SCOPES: tuple[str, ...] = ("enqueue", "read", "cancel", "retry", "log")
_ID_ALPHABET = string.ascii_lowercase + string.digits
_TOKEN = re.compile(r"qlp_([a-z0-9]{16})_([A-Za-z0-9_-]{43})")


class MalformedToken(ValueError):
    """Not a project token (the message never carries the text)."""

    def __init__(self) -> None:
        super().__init__("not a project token (qlp_<16 [a-z0-9]>_<43 base64url>)")


@dataclass(frozen=True)
class TokenProof:
    """What the database checks: the id and the digest of the whole token."""

    token_id: str
    digest: bytes = field(repr=False)


@dataclass(frozen=True)
class ProjectToken:
    """A freshly generated token; `token` is shown once and never stored."""

    token_id: str
    token: str = field(repr=False)

    @property
    def digest(self) -> bytes:
        return token_digest(self.token)


def token_digest(token: str) -> bytes:
    """SHA-256 of the whole token string's ASCII bytes."""
    return hashlib.sha256(token.encode("ascii")).digest()


def generate_token() -> ProjectToken:
    token_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(16))
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
    return ProjectToken(token_id=token_id, token=f"{TOKEN_PREFIX}{token_id}_{secret}")


def parse_token(text: str) -> TokenProof:
    """The id and digest of a well-formed token, else `MalformedToken`."""
    match = _TOKEN.fullmatch(text)
    if match is None or not _canonical_b64url_32(match.group(2)):
        raise MalformedToken()
    return TokenProof(token_id=match.group(1), digest=token_digest(text))


def _canonical_b64url_32(secret: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(secret + "=")
    except ValueError:
        return False
    return len(raw) == 32 and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == secret
