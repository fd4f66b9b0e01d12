"""Independent evidence of what a worker stored (checker class c).

The digest of a stored offer against the database's offer projection proves
little when the stored offer *is* a replay: both sides then come from the same
`offer_json`. So each inbox entry — the worker's record of the first offer it
accepted for its intent — is also compared, field by field, with the lease row
itself, and its revision with the revision's canonical bytes:

* the entry's offer and lease name the lease row's offer id, worker, session,
  generation, run, attempt, revision and lease generation;
* the revision row's `canonical` bytes hash (SHA-256) to its `content_digest`;
* the entry's `executionRevision` {executor, kind, spec, placement?},
  serialized by the checker with RFC 8785, gives exactly those canonical bytes;
* the offer's and the lease row's content digests are that digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import rfc8785

from tools.chaos.facts import Anomaly, Facts

# Offer field path -> lease row key (tools/chaos/snapshot.py _LEASE_KEYS).
OFFER_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("offerId",), "offerId"),
    (("target", "workerId"), "workerId"),
    (("target", "sessionId"), "sessionId"),
    (("target", "generation"), "sessionGeneration"),
    (("candidate", "runId"), "runId"),
    (("candidate", "attemptId"), "attemptId"),
    (("candidate", "executionRevisionId"), "revisionId"),
    (("executionRevision", "id"), "revisionId"),
)
# Entry lease field -> lease row key.
LEASE_FIELDS: tuple[tuple[str, str], ...] = (
    ("runId", "runId"), ("attemptId", "attemptId"), ("workerId", "workerId"),
    ("sessionId", "sessionId"), ("generation", "sessionGeneration"),
    ("leaseGeneration", "leaseGeneration"),
)  # fmt: skip
REVISION_CONTENT = ("executor", "kind", "spec", "placement")

__all__ = ["check_entry_evidence", "revision_canonical"]


def revision_canonical(revision: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of a revision's content, as `publish` hashes them."""
    content = {k: revision[k] for k in REVISION_CONTENT if revision.get(k) is not None}
    return bytes(rfc8785.dumps(content))


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _at(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def check_entry_evidence(facts: Facts, where: str, entry: dict[str, Any],
                         lease: dict[str, Any]) -> Iterator[Anomaly]:  # fmt: skip
    offer = entry.get("offer")
    if not isinstance(offer, dict):
        return
    differs = [".".join(path) for path, key in OFFER_FIELDS if _at(offer, path) != lease[key]]
    differs += [f"lease.{k}" for k, key in LEASE_FIELDS if entry.get(k) != lease[key]]
    if differs:
        yield Anomaly(
            "c",
            f"{where}: stored offer names another lease than the database's "
            f"row (differs: {', '.join(differs)})",
        )
    revision = facts.revisions.get(lease["revisionId"])
    if revision is None:
        if facts.revisions:
            yield Anomaly("c", f"{where}: revision {lease['revisionId']} unknown")
        return
    yield from _digests(where, entry, lease, revision)


def _digests(where: str, entry: dict[str, Any], lease: dict[str, Any],
             revision: dict[str, Any]) -> Iterator[Anomaly]:  # fmt: skip
    canonical = bytes.fromhex(revision["canonicalHex"])
    digest = _sha256(canonical)
    if digest != revision["contentDigest"]:
        yield Anomaly(
            "c",
            f"{where}: revision {revision['id']} canonical bytes do not hash to its content digest",
        )
    stored = entry["offer"].get("executionRevision")
    try:
        recomputed = revision_canonical(stored) if isinstance(stored, dict) else None
    except (ValueError, TypeError):
        recomputed = None
    if recomputed != canonical:
        yield Anomaly(
            "c",
            f"{where}: stored revision content is not the revision's canonical bytes (RFC 8785)",
        )
    for name, value in (("offer", entry.get("contentDigest")),
                        ("lease row", lease["contentDigest"])):  # fmt: skip
        if value != digest:
            yield Anomaly(
                "c",
                f"{where}: {name} content digest {value} is not the digest "
                f"{digest} of the revision's canonical bytes",
            )
