"""Validation of a pull response against the worker's own claim (SPEC §6.3).

Imported lazily by the coordinator. Every answer is first proven valid
against the schema by :mod:`schemas.fastpath`; anything it cannot prove goes to
``jsonschema`` (loaded then), which decides and says why — so a worker whose
answers are all well-formed never loads ``jsonschema`` (docs/EDGE.md).
The server's word is not trusted on its own: the offer must answer *our* pending
claim, target *our* session, be internally closed (candidate, revision, lease
name the same run/attempt/task/revision), carry a content digest we recompute
from the revision's canonical bytes, and a sane lease. Only then the lease is
rebuilt with the token the worker holds (the response never carries it).
``executionRevision.signature`` ({kid, jws} or null, SPEC §16.1) is checked for
shape by the schema only and admitted as it came: it is verified against the
worker's trusted keys when the offer is about to start (worker/trust.py), so a
revision the policy refuses is still ACKed (``start_failed``), never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qinglong.schemas import fastpath as schema_fastpath
from qinglong.schemas.canonical import content_digest
from qinglong.schemas.contract import ContractError, SchemaId, parse_json_strict
from qinglong.worker.journal import InboxEntry, PendingClaim

__all__ = [
    "Batch",
    "Idle",
    "OfferInvalid",
    "parse_batch_response",
    "parse_offer_response",
    "validate_batch",
    "validate_offered",
]


class OfferInvalid(Exception):
    """The response is schema-valid but does not answer our claim (fail closed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # low-cardinality category, safe to log


@dataclass(frozen=True)
class Idle:
    reason: str
    retry_after_ms: int
    truncated: bool
    stats: dict[str, Any]


def parse_offer_response(body: bytes) -> dict[str, Any]:
    """Strict-parse and schema-validate; raises ``ContractError`` (keep the claim)."""
    doc = parse_json_strict(body)
    schema_fastpath.validate(SchemaId.REMOTE_EXECUTION_OFFER, doc)
    if not isinstance(doc, dict):  # pragma: no cover - the schema requires an object
        raise ContractError("schema_invalid", "$: type", "type")
    return doc


@dataclass(frozen=True)
class Batch:
    """A batched pull's answer (SPEC §18.1), schema-valid."""

    offers: list[dict[str, Any]]
    idle: Idle | None
    conflicts: list[tuple[str, str]]  # (offerId, category)


def parse_batch_response(body: bytes) -> Batch:
    """Strict-parse and schema-validate a batch; raises ``ContractError`` (keep the claim)."""
    doc = parse_json_strict(body)
    schema_fastpath.validate(SchemaId.REMOTE_EXECUTION_OFFER_BATCH, doc)
    if not isinstance(doc, dict):  # pragma: no cover - the schema requires an object
        raise ContractError("schema_invalid", "$: type", "type")
    idle = doc["idle"]
    return Batch(
        doc["offers"],
        None if idle is None else parse_idle(idle),
        [(c["offerId"], c["category"]) for c in doc.get("conflicts", [])],
    )


def validate_batch(batch: Batch, claim: PendingClaim, now_ms: int) -> list[InboxEntry]:
    """Each offer checked against its own pair of ``claim`` (validate_offered);
    an offer id that is not ours, or twice, refuses the whole answer."""
    entries: list[InboxEntry] = []
    seen: set[str] = set()
    for doc in batch.offers:
        single = claim.for_offer(doc["offerId"])
        _check(single is not None and doc["offerId"] not in seen, "offer_id_mismatch")
        assert single is not None
        seen.add(doc["offerId"])
        entries.append(validate_offered(doc, single, now_ms))
    return entries


def parse_idle(doc: dict[str, Any]) -> Idle:
    return Idle(doc["reason"], doc["retryAfterMs"], doc["truncated"], doc["stats"])


def _check(cond: bool, reason: str) -> None:
    if not cond:
        raise OfferInvalid(reason)


def validate_offered(doc: dict[str, Any], claim: PendingClaim, now_ms: int) -> InboxEntry:
    """Check an ``offered`` document against ``claim``; return the inbox entry to admit."""
    _check(doc.get("status") == "offered", "not_offered")
    _check(doc["offerId"] == claim.offer_id, "offer_id_mismatch")
    target = doc["target"]
    expected = {
        "workerId": claim.worker_id,
        "sessionId": claim.session_id,
        "generation": claim.generation,
    }
    _check(target == expected, "target_mismatch")
    _check_closed(doc)
    _check_digest(doc)
    lease = doc["lease"]
    _check_lease(lease)
    rebuilt = dict(lease, leaseToken=claim.lease_token)
    return InboxEntry(offer=doc, lease=rebuilt, accepted_at_ms=now_ms)


def _check_closed(doc: dict[str, Any]) -> None:
    cand, rev, lease, target = (
        doc["candidate"],
        doc["executionRevision"],
        doc["lease"],
        doc["target"],
    )
    _check(cand["executionRevisionId"] == rev["id"], "ids_not_closed")
    _check(cand["taskId"] == rev["taskId"], "ids_not_closed")
    _check(lease["runId"] == cand["runId"], "ids_not_closed")
    _check(lease["attemptId"] == cand["attemptId"], "ids_not_closed")
    _check(lease["offerId"] == doc["offerId"], "ids_not_closed")
    _check(lease["workerId"] == target["workerId"], "ids_not_closed")
    _check(lease["sessionId"] == target["sessionId"], "ids_not_closed")
    _check(lease["sessionGeneration"] == target["generation"], "ids_not_closed")


def _check_digest(doc: dict[str, Any]) -> None:
    rev = doc["executionRevision"]
    try:
        _, digest = content_digest(rev["kind"], rev["executor"], rev["spec"], rev.get("placement"))
    except (ValueError, TypeError):
        raise OfferInvalid("digest_mismatch") from None
    _check(digest == rev["contentDigest"] == doc["contentDigest"], "digest_mismatch")


def _check_lease(lease: dict[str, Any]) -> None:
    _check(lease["leaseGeneration"] >= 1 and lease["leaseVersion"] >= 1, "lease_invalid")
    claimed, updated, expires = lease["claimedAtMs"], lease["updatedAtMs"], lease["expiresAtMs"]
    _check(claimed <= updated <= expires, "lease_invalid")
