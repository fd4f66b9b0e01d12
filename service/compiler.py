"""Publish-time compiler: `qinglong/command@v1` -> immutable execution revision content.

Everything the database later trusts blindly (normalized placement, comparators,
canonical bytes) is decided here, once, at the write boundary: the schema checks
shape and bounds, this module checks what a schema cannot (SemVer ranges,
printable labels, total size) and normalizes placement per DESIGN.md.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qinglong.schemas.canonical import content_digest
from qinglong.schemas.contract import ContractError, SchemaId, default_contract, parse_json_strict
from qinglong.service.capabilities import label_value_ok, rejection_reason
from qinglong.service.semver_range import InvalidRange, normalize_range

__all__ = [
    "DEFAULT_EXECUTORS",
    "EXECUTOR",
    "KIND",
    "MAX_CANONICAL_BYTES",
    "CommandRejected",
    "CompiledRevision",
    "compile_command",
    "normalize_placement",
]

KIND = "qinglong/command@v1"
EXECUTOR = "remote_worker"
DEFAULT_EXECUTORS: tuple[str, ...] = ("remote-worker",)
# The revision travels inside every offer (response <= 128 KiB, inbox entry <= 160 KiB);
# capping its canonical form keeps an offer far below both whatever the envelope adds.
MAX_CANONICAL_BYTES = 64 * 1024


class CommandRejected(ValueError):
    """A command document refused at publish time; `reason` is low-cardinality
    (invalid_json, duplicate_key, schema_invalid, limit_exceeded, duplicate_value,
    invalid_label, invalid_semver, env_conflict) and `detail` a JSON path without
    values (env_conflict names the env name, which is not secret)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class CompiledRevision:
    kind: str
    executor: str
    spec: dict[str, Any]
    placement: dict[str, Any]
    canonical: bytes
    content_digest: str


def compile_command(doc: bytes | Mapping[str, Any]) -> CompiledRevision:
    """Validate and compile a command document (raw JSON bytes or a parsed object)."""
    try:
        parsed = parse_json_strict(doc) if isinstance(doc, bytes | bytearray) else doc
        default_contract().validate(SchemaId.COMMAND, parsed)
    except ContractError as exc:
        raise CommandRejected(rejection_reason(exc), exc.detail) from None
    assert isinstance(parsed, Mapping)  # guaranteed by the schema
    command = copy.deepcopy(dict(parsed))  # never alias the caller's document
    _refuse_env_in_secrets(command)
    placement = normalize_placement(command.pop("placement", None))
    try:
        # Self-check: what the database and every worker will trust must match its schema.
        default_contract().validate(SchemaId.PLACEMENT, placement)
    except ContractError as exc:
        raise CommandRejected(rejection_reason(exc), exc.detail) from None
    canonical, digest = content_digest(KIND, EXECUTOR, command, placement)
    if len(canonical) > MAX_CANONICAL_BYTES:
        raise CommandRejected(
            "limit_exceeded", f"$: canonical revision larger than {MAX_CANONICAL_BYTES} bytes"
        )
    return CompiledRevision(KIND, EXECUTOR, command, placement, canonical, digest)


def _refuse_env_in_secrets(command: Mapping[str, Any]) -> None:
    """SPEC §14.2: an ENV_NAME is either a plain env value or a secret, never both
    (the run's environment would hold two values for it)."""
    both = sorted(set(command.get("env", {})) & set(command.get("secrets", {})))
    if both:
        raise CommandRejected("env_conflict", f"$.secrets: {both[0]} is also in $.env")


def normalize_placement(placement: Mapping[str, Any] | None) -> dict[str, Any]:
    """Normalized placement of a schema-valid authored placement (None = none authored).

    `required` and its three keys are always present (executors default to
    `["remote-worker"]`, sorted); label values become sorted unique arrays; runtime
    ranges become comparator arrays; preferred terms keep their authored order.
    """
    placement = placement or {}
    required = placement.get("required", {})
    executors = required.get("executors", list(DEFAULT_EXECUTORS))
    if len(set(executors)) != len(executors):  # uniqueItems already refuses; digest relies on it
        raise CommandRejected("duplicate_value", "$.placement.required.executors")
    return {
        "required": {
            "executors": sorted(executors),
            "labels": _labels(required.get("labels", {}), "$.placement.required.labels"),
            "runtimes": _runtimes(required.get("runtimes", {}), "$.placement.required.runtimes"),
        },
        "preferred": [
            {
                "weight": term["weight"],
                "labels": _labels(term.get("labels", {}), f"$.placement.preferred[{i}].labels"),
                "runtimes": _runtimes(
                    term.get("runtimes", {}), f"$.placement.preferred[{i}].runtimes"
                ),
            }
            for i, term in enumerate(placement.get("preferred", []))
        ],
    }


def _labels(labels: Mapping[str, str | list[str]], path: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in labels.items():
        values = [value] if isinstance(value, str) else list(value)
        if len(set(values)) != len(values):
            raise CommandRejected("duplicate_value", f"{path}[*]: duplicate label value")
        if not all(label_value_ok(v) for v in values):
            raise CommandRejected("invalid_label", f"{path}[*]: label value not printable")
        out[key] = sorted(values)
    return out


def _runtimes(runtimes: Mapping[str, str], path: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, text in runtimes.items():
        try:
            out[name] = normalize_range(text)
        except InvalidRange as exc:
            # The range is authored task content (not secret); the message helps the author.
            raise CommandRejected("invalid_semver", f"{path}[*]: {exc.reason}") from None
    return out
