"""Worker capabilities at the write boundary (session open).

Capabilities are stored as RFC 8785 bytes plus their exact SHA-256, and a pull is
only served while the stored bytes still hash to that digest, so the canonical
form must be deterministic: validated, executors sorted, then JCS.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qinglong.schemas.canonical import canonical_bytes, sha256_digest
from qinglong.schemas.contract import ContractError, SchemaId, default_contract, parse_json_strict
from qinglong.service.semver_range import InvalidRange, parse_version

__all__ = [
    "CanonicalCapabilities",
    "CapabilitiesRejected",
    "canonicalize_capabilities",
    "label_value_ok",
    "rejection_reason",
]

# Keywords whose failure means "too many / too long" rather than "wrong shape"; they map
# to the limit_exceeded reason (QL002) instead of the generic schema_invalid (QL001).
_LIMIT_KEYWORDS = frozenset({"maxItems", "maxProperties", "maxLength", "maximum"})


class CapabilitiesRejected(ValueError):
    """Capabilities refused at the write boundary; `reason` is low-cardinality."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class CanonicalCapabilities:
    doc: dict[str, Any]
    canonical: bytes
    digest: str


def rejection_reason(error: ContractError) -> str:
    """Low-cardinality reason for a contract error at a write boundary."""
    if error.keyword in _LIMIT_KEYWORDS:
        return "limit_exceeded"
    if error.keyword == "uniqueItems":
        return "duplicate_value"
    return error.reason


def label_value_ok(value: str) -> bool:
    """Label values are printable text: the schema already refuses control characters;
    this also refuses format characters (bidi overrides, zero-width), private-use,
    unassigned code points and non-ASCII spaces, which read differently than they match."""
    return value.isprintable()


def canonicalize_capabilities(obj: object) -> CanonicalCapabilities:
    """Validate `qinglong/worker-capabilities@v1` (a parsed document or raw JSON bytes)
    and return its canonical form. Raises `CapabilitiesRejected`."""
    try:
        doc = parse_json_strict(obj) if isinstance(obj, bytes | bytearray) else obj
        default_contract().validate(SchemaId.WORKER_CAPABILITIES, doc)
    except ContractError as exc:
        raise CapabilitiesRejected(rejection_reason(exc), exc.detail) from None
    assert isinstance(doc, Mapping)  # guaranteed by the schema
    _check_semantics(doc)
    canonical_doc = copy.deepcopy(dict(doc))
    canonical_doc["executors"] = sorted(canonical_doc["executors"])
    data = canonical_bytes(canonical_doc)
    return CanonicalCapabilities(canonical_doc, data, sha256_digest(data))


def _check_semantics(doc: Mapping[str, Any]) -> None:
    executors = doc["executors"]
    # uniqueItems already refuses these; kept explicit because the digest depends on it.
    if len(set(executors)) != len(executors):
        raise CapabilitiesRejected("duplicate_value", "$.executors: duplicate executor")
    for value in doc["labels"].values():
        if not label_value_ok(value):
            raise CapabilitiesRejected("invalid_label", "$.labels[*]: label value not printable")
    for version in doc["runtimes"].values():
        try:
            parse_version(version)
        except InvalidRange:
            raise CapabilitiesRejected(
                "invalid_semver", "$.runtimes[*]: not a SemVer 2.0.0 version"
            ) from None
