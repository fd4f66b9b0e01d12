"""The worker's trust policy for execution revisions (SPEC §16.1).

``trust: {keysFile: JWKS, policy: enforce|warn|off}`` in the config, or
``worker run --trust-keys FILE --trust-policy enforce|warn|off``; the policy
defaults to ``warn``. The check runs in the executor's START phase right after
the ``starting`` ACK and before anything else (secrets, spawn): the worker
rebuilds the signed payload — the RFC 8785 bytes of ``{taskId, kind, executor,
spec, placement?}`` — from the offer's ``executionRevision`` itself and checks
``executionRevision.signature {kid, jws}`` against the keys of its JWKS (several
at once: rotation). The database's word (its digest included) counts for
nothing here: a revision edited inside the database no longer matches its
signature.

* ``enforce``: an unsigned revision, an unknown ``kid`` or a signature that
  does not verify is never started: ``start_failed`` reason
  ``signature_invalid`` (event ``exec.signature_invalid``, level error).
* ``warn``: the same findings are logged loudly (``exec.signature_unverified``,
  level error) and the revision runs.
* ``off``: no check at all.

The keys file is read once at start (``worker run`` refuses an unreadable or
invalid one, exit 2); a rotation edits it and restarts the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qinglong.schemas.signing import TrustKeys

__all__ = ["SIGNATURE_INVALID", "RevisionTrust", "TrustPolicy", "TrustSettings", "Verdict"]

SIGNATURE_INVALID = "signature_invalid"


class TrustPolicy(StrEnum):
    ENFORCE = "enforce"
    WARN = "warn"
    OFF = "off"


@dataclass(frozen=True)
class TrustSettings:
    policy: TrustPolicy = TrustPolicy.WARN
    keys_file: str | None = None  # a JWKS file; required by enforce
    # Loaded at start by the CLI (the keys read once), never from a file.
    verifier: RevisionTrust | None = None


@dataclass(frozen=True)
class Verdict:
    """The finding on one revision: ``ok``, or ``reason`` (unsigned, malformed,
    unknown_kid, kid_mismatch, bad_signature) and the kid it named."""

    ok: bool
    reason: str | None = None
    kid: str | None = None


class TrustError(ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class RevisionTrust:
    policy: TrustPolicy
    keys: TrustKeys | None  # None: no keys file (warn without keys: every finding is logged)

    @classmethod
    def load(cls, settings: TrustSettings) -> RevisionTrust:
        """Read the keys file (raises :class:`TrustError`); imports cryptography
        only when a check will run."""
        if settings.policy is TrustPolicy.OFF:
            return cls(settings.policy, None)
        if settings.keys_file is None:
            if settings.policy is TrustPolicy.ENFORCE:
                raise TrustError(
                    "invalid_trust",
                    "trust policy enforce needs trust.keysFile "
                    "(--trust-keys FILE): a JWKS of the publishers' keys",
                )
            return cls(settings.policy, None)
        from qinglong.schemas.signing import KeyFileError, TrustKeys

        try:
            return cls(settings.policy, TrustKeys.load(settings.keys_file))
        except KeyFileError as exc:
            raise TrustError(exc.reason, exc.detail) from None

    @property
    def kids(self) -> tuple[str, ...]:
        return () if self.keys is None else self.keys.kids

    def check(self, revision: Mapping[str, Any]) -> Verdict:
        """Verify ``revision`` (an offer's executionRevision) under the keys."""
        if self.policy is TrustPolicy.OFF:
            return Verdict(True)
        signature = revision.get("signature")
        if self.keys is None:  # warn without keys: a finding, no cryptography loaded
            if not isinstance(signature, Mapping):
                return Verdict(False, "unsigned")
            kid = signature.get("kid")
            return Verdict(False, "unknown_kid", kid if isinstance(kid, str) else None)
        from qinglong.schemas.signing import SignatureInvalid, revision_payload, verify_detached

        try:
            payload = revision_payload(revision["taskId"], revision["kind"],
                                       revision["executor"], revision["spec"],
                                       revision.get("placement"))  # fmt: skip
            kid = verify_detached(signature, payload, self.keys)
        except SignatureInvalid as exc:
            return Verdict(False, exc.reason, exc.kid)
        except (KeyError, TypeError, ValueError):
            return Verdict(False, "malformed")
        return Verdict(True, None, kid)

    def refuses(self, verdict: Verdict) -> bool:
        return not verdict.ok and self.policy is TrustPolicy.ENFORCE
