"""Worker credentials on the wire: `Authorization: Bearer ql3w_<id>_<secret>`.

Only the SHA-256 of the secret's ASCII bytes leaves this module (the database
compares it in constant time); the secret itself is never logged, stored or
echoed, and `PresentedCredential`'s repr leaves the digest out.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum

from qinglong.service.pki import MalformedCredentialError, parse_credential, secret_digest

_BEARER = re.compile(r"Bearer ([!-~]{1,200})\Z")
_PUBLIC_ID = re.compile(r"ql3w_([a-z0-9]{16})_")


class CredentialProblem(StrEnum):
    MISSING = "missing_credential"
    MALFORMED = "malformed_credential"


# The one public 401 reason for "no such credential id" and "wrong secret": an
# answer must not tell a caller without the secret whether an id exists. The
# audit trail (security_audit, the audit log, the auth-decision metric) keeps
# the precise reason. `revoked_credential` is only reported to a caller who
# presented the right secret, so it stays as it is.
INVALID_CREDENTIAL = "invalid_credential"
_HIDDEN_401_REASONS = frozenset({"unknown_credential", "bad_secret"})


def public_denial_reason(reason: str) -> str:
    """What the worker is told for a database denial `reason`."""
    return INVALID_CREDENTIAL if reason in _HIDDEN_401_REASONS else reason


@dataclass(frozen=True)
class PresentedCredential:
    credential_id: str
    secret_digest: bytes = field(repr=False)


@dataclass(frozen=True)
class CredentialResult:
    credential: PresentedCredential | None
    problem: CredentialProblem | None
    # The public id when it could be read even though the rest is malformed, so
    # the denial can still be attributed in the audit trail.
    credential_id: str | None = None


def parse_authorization(header: str | None) -> CredentialResult:
    if header is None or header.strip() == "":
        return CredentialResult(None, CredentialProblem.MISSING)
    bearer = _BEARER.match(header)
    if bearer is None:
        return CredentialResult(None, CredentialProblem.MALFORMED)
    token = bearer.group(1)
    try:
        credential_id, secret = parse_credential(token)
    except MalformedCredentialError:
        public = _PUBLIC_ID.match(token)
        return CredentialResult(
            None, CredentialProblem.MALFORMED, public.group(1) if public else None
        )
    return CredentialResult(
        PresentedCredential(credential_id, secret_digest(secret)), None, credential_id
    )


def lease_token_digest(token: str) -> bytes:
    """SHA-256 of the 43 ASCII bytes of a schema-validated lease token."""
    return hashlib.sha256(token.encode("ascii")).digest()
