"""Wire contract: strict JSON parsing and JSON Schema validation.

Shared by the ingress and the worker, so this module must stay cheap to import:
no aiohttp/psycopg, and `jsonschema` is only imported when a `Contract` is built
(parsing alone needs nothing beyond the stdlib).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from referencing import Registry

__all__ = [
    "SCHEMA_IDS",
    "Contract",
    "ContractError",
    "SchemaId",
    "default_contract",
    "load",
    "parse_json_strict",
    "schema_file_name",
    "validate",
]


class SchemaId(StrEnum):
    """Every schema id of the contract; the value is also the body's `schema` field."""

    DEFS = "qinglong/defs@v1"
    WORKER_CAPABILITIES = "qinglong/worker-capabilities@v1"
    COMMAND = "qinglong/command@v1"
    PLACEMENT = "qinglong/placement@v1"
    OFFER_PULL_REQUEST = "qinglong/offer-pull-request@v1"
    REMOTE_EXECUTION_OFFER = "qinglong/remote-execution-offer@v1"
    # Batched pulls (SPEC §18.1).
    OFFER_BATCH_PULL_REQUEST = "qinglong/offer-batch-pull-request@v1"
    REMOTE_EXECUTION_OFFER_BATCH = "qinglong/remote-execution-offer-batch@v1"
    ERROR = "qinglong/error@v1"
    SESSION_OPEN_REQUEST = "qinglong/session-open-request@v1"
    SESSION_HEARTBEAT_REQUEST = "qinglong/session-heartbeat-request@v1"
    SESSION_CLOSE_REQUEST = "qinglong/session-close-request@v1"
    SESSION = "qinglong/session@v1"
    LEASE_ACK_REQUEST = "qinglong/lease-ack-request@v1"
    LEASE_HEARTBEAT_REQUEST = "qinglong/lease-heartbeat-request@v1"
    LEASE_COMPLETE_REQUEST = "qinglong/lease-complete-request@v1"
    LEASE = "qinglong/lease@v1"
    # Live log chunks of a started lease (SPEC §15.1).
    LEASE_LOG_REQUEST = "qinglong/lease-log-request@v1"
    LEASE_LOG = "qinglong/lease-log@v1"
    # Secrets of a started lease (SPEC §14.3).
    LEASE_SECRETS_REQUEST = "qinglong/lease-secrets-request@v1"
    LEASE_SECRETS = "qinglong/lease-secrets@v1"
    # Batched lease calls of one session (SPEC §18.3).
    LEASE_BATCH_REQUEST = "qinglong/lease-batch-request@v1"
    LEASE_BATCH = "qinglong/lease-batch@v1"
    # Credential self-rotation (SPEC §16.2).
    CREDENTIAL_ROTATE_REQUEST = "qinglong/credential-rotate-request@v1"
    CREDENTIAL = "qinglong/credential@v1"
    # The producer API (SPEC §13.4; service/producer_views.py).
    RUN_ENQUEUE_REQUEST = "qinglong/run-enqueue-request@v1"
    RUN_ENQUEUED = "qinglong/run-enqueued@v1"
    RUN = "qinglong/run@v1"
    RUN_PAGE = "qinglong/run-page@v1"
    RUN_LOG = "qinglong/run-log@v1"


SCHEMA_IDS: frozenset[str] = frozenset(s.value for s in SchemaId)

_PACKAGE = "qinglong.schemas"
# Generated from the schemas and shipped beside them (`python -m qinglong.service.openapi`);
# not a JSON Schema of the contract, so the loader skips it.
NON_SCHEMA_FILES: frozenset[str] = frozenset({"openapi.json"})
# Path segments that are safe to show in an error detail; anything else (label keys,
# env names with odd characters, ...) is masked so details never carry user data.
_SAFE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_DETAIL_MAX = 256


class ContractError(ValueError):
    """A document violates the wire contract.

    `reason` is low-cardinality (`invalid_json`, `duplicate_key`, `schema_invalid`);
    `detail` is a JSON path plus the failing keyword and never echoes values;
    `keyword` is the JSON Schema keyword that failed, when there is one.
    """

    def __init__(self, reason: str, detail: str, keyword: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.keyword = keyword


def schema_file_name(schema_id: str) -> str:
    """Naming rule: `/` and `@` become `.`, plus `.json` (`qinglong/command@v1` ->
    `qinglong.command.v1.json`)."""
    return schema_id.replace("/", ".").replace("@", ".") + ".json"


# ---------------------------------------------------------------- strict JSON


def _refuse_constant(name: str) -> float:
    raise ContractError("invalid_json", f"non-finite number {name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        # 1e400 parses to inf: refuse instead of silently storing infinity.
        raise ContractError("invalid_json", "number out of range")
    return value


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ContractError("duplicate_key", "duplicate object key")
        out[key] = value
    return out


def _check_strings(doc: object) -> None:
    """Refuse lone surrogates (`"\\ud800"` is valid JSON text but not Unicode)."""
    stack: list[object] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ContractError("invalid_json", "lone surrogate in string") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json_strict(data: bytes | bytearray | memoryview) -> object:
    """Parse UTF-8 JSON bytes, refusing duplicate keys, NaN/Infinity, a BOM,
    invalid UTF-8 and lone surrogates. Raises `ContractError`."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError("parse_json_strict expects bytes")
    try:
        text = bytes(data).decode("utf-8")  # strict: no utf-8-sig, a BOM stays and fails
    except UnicodeDecodeError:
        raise ContractError("invalid_json", "body is not valid UTF-8") from None
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except ContractError:
        raise
    except json.JSONDecodeError as exc:
        raise ContractError("invalid_json", f"syntax error at offset {exc.pos}") from None
    except RecursionError:
        raise ContractError("invalid_json", "nesting too deep") from None
    except ValueError:
        # e.g. an integer literal longer than sys.get_int_max_str_digits()
        raise ContractError("invalid_json", "number out of range") from None
    _check_strings(doc)
    return doc


# ---------------------------------------------------------------- validation


def _format_path(path: Iterable[object]) -> str:
    out = "$"
    for segment in path:
        if isinstance(segment, int):
            out += f"[{segment}]"
        elif isinstance(segment, str) and _SAFE_SEGMENT.match(segment):
            out += f".{segment}"
        else:
            out += "[*]"
    return out


def _describe(error: ValidationError) -> str:
    detail = f"{_format_path(error.absolute_path)}: {error.validator}"
    required = error.validator_value
    if (
        error.validator == "required"
        and isinstance(error.instance, Mapping)
        and isinstance(required, list)
    ):
        # The missing name comes from the schema, not from the document.
        missing = [k for k in required if k not in error.instance]
        if missing and _SAFE_SEGMENT.match(str(missing[0])):
            detail += f" ({missing[0]})"
    return detail[:_DETAIL_MAX]


def _select(errors: Iterable[ValidationError]) -> ValidationError | None:
    """Pick the error to report, like `best_match`, except for `oneOf`/`anyOf`:
    report the error inside the branch the document meant, i.e. the only branch
    whose `const` discriminator (`status`) held. Without this an offered offer
    missing a field is reported as "status is not 'idle'", which helps no one.
    """
    from jsonschema.exceptions import best_match, relevance

    error = max(errors, key=relevance, default=None)
    while error is not None and error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[object, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        intended = [
            errs for errs in branches.values() if not any(e.validator == "const" for e in errs)
        ]
        if len(intended) != 1:
            break
        error = max(intended[0], key=relevance)
    return None if error is None else best_match([error])


def _strict_integer(_checker: object, instance: object) -> bool:
    # JSON Schema would accept 1.0 as an integer; our times, counters and sizes are
    # integers on the wire, so a float never passes as one.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _ecma_pattern(validator: Any, pattern: str, instance: object, schema: object) -> Iterator[Any]:
    """`pattern` with ECMA-262 anchoring: Python's `$` also matches before a trailing
    newline, which would let `"remote-worker\\n"` through every `^...$` pattern."""
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, str):  # the draft's "string" type, as is_type tells
        return
    compiled = _compile_pattern(pattern)
    if compiled.search(instance) is None:
        yield ValidationError("does not match pattern")


@functools.lru_cache(maxsize=256)
def _compile_pattern(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _validator_class() -> type[Validator]:
    from jsonschema import Draft202012Validator, validators

    # types-jsonschema leaves extend() unannotated; it returns a validator class.
    extended: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        validators={"pattern": _ecma_pattern},
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
    )
    return extended


class Contract:
    """All schema files in one `referencing.Registry`, validators compiled on first use."""

    def __init__(self) -> None:
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        self._documents = _load_documents()
        # Registered without their `$schema`: jsonschema picks the validator class
        # of a referenced document's root by that key (`evolve` ->
        # `validator_for`), which would drop this contract's class (strict
        # integers, ECMA `$`) inside every cross-file `$ref` to a whole document,
        # e.g. the capabilities of a session-open request. The dialect is pinned
        # by create_resource instead.
        self._registry: Registry = Registry().with_resources(
            (sid, DRAFT202012.create_resource(_without_dialect(doc)))
            for sid, doc in self._documents.items()
        )
        self._cls = _validator_class()
        self._validators: dict[str, Validator] = {}

    @property
    def schema_ids(self) -> frozenset[str]:
        return frozenset(self._documents)

    def schema(self, schema_id: str) -> Mapping[str, Any]:
        """The raw schema document (do not mutate)."""
        return self._documents[schema_id]

    def validator(self, schema_id: str) -> Validator:
        found = self._validators.get(schema_id)
        if found is None:
            if schema_id not in self._documents:
                raise LookupError(f"unknown schema id {schema_id!r}")
            found = self._cls(self._documents[schema_id], registry=self._registry)
            self._validators[schema_id] = found
        return found

    def validate(self, schema_id: str, doc: object) -> None:
        """Raise `ContractError(reason="schema_invalid")` for the most relevant error."""
        # Any parsed document: the schema, not the type, decides what it may hold.
        error = _select(self.validator(schema_id).iter_errors(cast(Any, doc)))
        if error is not None:
            raise ContractError("schema_invalid", _describe(error), str(error.validator))

    def load(self, schema_id: str, data: bytes) -> dict[str, Any]:
        """Strict-parse `data` and validate it as `schema_id` (a body is always an object)."""
        doc = parse_json_strict(data)
        self.validate(schema_id, doc)
        if not isinstance(doc, dict):  # pragma: no cover - every body schema is an object
            raise ContractError("schema_invalid", "$: type", "type")
        return doc


def _without_dialect(doc: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in doc.items() if key != "$schema"}


def _load_documents() -> dict[str, dict[str, Any]]:
    documents: dict[str, dict[str, Any]] = {}
    for entry in resources.files(_PACKAGE).iterdir():
        if not entry.name.endswith(".json") or entry.name in NON_SCHEMA_FILES:
            continue
        doc = json.loads(entry.read_bytes())
        sid = doc.get("$id")
        # A mis-named or unknown file is a packaging bug: fail loudly at load time.
        if sid not in SCHEMA_IDS or schema_file_name(sid) != entry.name:
            raise RuntimeError(f"schema file {entry.name} does not match its $id {sid!r}")
        documents[sid] = doc
    missing = SCHEMA_IDS - documents.keys()
    if missing:
        raise RuntimeError(f"schema files missing for {sorted(missing)}")
    return documents


@functools.cache
def default_contract() -> Contract:
    """Process-wide immutable contract (built on first use)."""
    return Contract()


def validate(schema_id: str, doc: object) -> None:
    default_contract().validate(schema_id, doc)


def load(schema_id: str, data: bytes) -> dict[str, Any]:
    return default_contract().load(schema_id, data)
