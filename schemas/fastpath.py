"""Schema checks that prove a document valid without ``jsonschema`` (docs/EDGE.md).

Two callers validate the same few document shapes over and over. An idle
worker checks its own capabilities (once, at start), session answers (every
heartbeat) and ``idle`` pull answers (every few seconds); loading ``jsonschema``
for them costs the process about 6 MiB of resident memory (attrs, rpds,
referencing, typing_extensions, the metaschemas, the format checkers'
dependencies), most of the edge budget. The ingress checks every request body
and every response it builds from a database projection; with ``jsonschema``
that was 0.79 ms of CPU per ``offered`` answer and 0.13 ms per ``idle`` one,
against 0.17 and 0.03 ms here (docs/BENCHMARKS.md).

This module evaluates the *same schema files* with a small interpreter of the
keywords they use and answers one of three things: proven valid, proven
invalid, or "not sure" (a keyword, a ``$ref`` or a value it does not model).
Only "proven valid" is acted on; everything else goes to
:mod:`schemas.contract` (``jsonschema``), which stays the authority and
produces the error detail.

Semantics follow ``schemas.contract``'s validator class, not plain draft
2020-12: an integer is never a float (``1.0`` is not an integer) and ``pattern``
uses ECMA-262 anchoring (``$`` does not match before a trailing newline).
tests/py/test_schema_fastpath.py checks that every verdict agrees with
``jsonschema`` on generated documents, offers and requests included.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from qinglong import schemas
from qinglong.schemas.contract import ContractError, parse_json_strict, schema_file_name

__all__ = ["INVALID", "UNKNOWN", "VALID", "check", "load", "validate"]

VALID, INVALID, UNKNOWN = 1, 0, 2
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_ANNOTATIONS = frozenset({
    "$schema", "$id", "$defs", "$comment", "title", "description", "examples", "default",
    "deprecated", "readOnly", "writeOnly",
})  # fmt: skip
_SIBLING_REF = re.compile(r"[a-z][a-z0-9-]*@v[0-9]+")
_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # schemas.contract: a float never passes as an integer, not even 1.0.
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}
_documents: dict[str, dict[str, Any]] = {}
_patterns: dict[str, re.Pattern[str]] = {}


class _Unsure(Exception):
    """Raised for anything this module does not model; the caller asks jsonschema."""


def _document(schema_id: str) -> dict[str, Any]:
    doc = _documents.get(schema_id)
    if doc is None:
        path = os.path.join(os.path.dirname(schemas.__file__), schema_file_name(schema_id))
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
        except OSError:
            raise _Unsure from None  # e.g. a zipped install: jsonschema loads it instead
        if not isinstance(doc, dict) or doc.get("$id") != schema_id or doc.get("$schema") != DRAFT:
            raise _Unsure
        _documents[schema_id] = doc
    return doc


def _pattern(pattern: str) -> re.Pattern[str]:
    compiled = _patterns.get(pattern)
    if compiled is None:
        # The same ECMA anchoring as schemas.contract._compile_pattern.
        source = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") \
            else pattern  # fmt: skip
        compiled = _patterns[pattern] = re.compile(source)
    return compiled


def _equal(value: object, expected: object) -> bool:
    """jsonschema's ``equal`` for scalars: ``true`` is not ``1``, ``1`` is ``1.0``."""
    for item in (value, expected):
        if isinstance(item, dict | list) or (isinstance(item, float) and item != item):
            raise _Unsure
    if isinstance(value, bool) or isinstance(expected, bool):
        return type(value) is type(expected) and value == expected
    return value == expected


def _resolve(ref: str, base: str) -> tuple[dict[str, Any] | bool, str]:
    target, _, fragment = ref.partition("#")
    if target:
        if _SIBLING_REF.fullmatch(target) is None:
            raise _Unsure
        base = base.rpartition("/")[0] + "/" + target
    node: Any = _document(base)
    if fragment:
        if not fragment.startswith("/"):
            raise _Unsure  # an anchor, not a pointer
        for token in fragment[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                raise _Unsure
            node = node[token]
    if not isinstance(node, dict | bool):
        raise _Unsure
    return node, base


def _all(results: list[int]) -> int:
    if INVALID in results:
        return INVALID
    return UNKNOWN if UNKNOWN in results else VALID


def _eval(schema: Mapping[str, Any] | bool, value: object, base: str) -> int:
    """VALID or INVALID; raises _Unsure when it cannot decide."""
    if schema is True:
        return VALID
    if schema is False:
        return INVALID
    if not isinstance(schema, Mapping):
        raise _Unsure
    for keyword, arg in schema.items():
        if keyword in _ANNOTATIONS:
            if keyword == "$id" and arg != base:
                raise _Unsure  # an embedded resource would change the base URI
            continue
        handler = _KEYWORDS.get(keyword)
        if handler is None:
            raise _Unsure
        if handler(arg, value, base, schema) == INVALID:
            return INVALID
    return VALID


def _k_type(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    names = arg if isinstance(arg, list) else [arg]
    if not names or any(name not in _TYPES for name in names):
        raise _Unsure
    return VALID if any(_TYPES[name](value) for name in names) else INVALID


def _k_const(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return VALID if _equal(value, arg) else INVALID


def _k_enum(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, list):
        raise _Unsure
    return VALID if any(_equal(value, item) for item in arg) else INVALID


def _k_minimum(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not _TYPES["number"](arg):
        raise _Unsure
    return INVALID if _TYPES["number"](value) and value < arg else VALID  # type: ignore[operator]


def _k_maximum(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not _TYPES["number"](arg):
        raise _Unsure
    return INVALID if _TYPES["number"](value) and value > arg else VALID  # type: ignore[operator]


def _size(arg: Any) -> int:
    if not _TYPES["integer"](arg) or arg < 0:
        raise _Unsure
    return int(arg)


def _k_min_length(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, str) and len(value) < _size(arg) else VALID


def _k_max_length(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, str) and len(value) > _size(arg) else VALID


def _k_pattern(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, str):
        raise _Unsure
    if not isinstance(value, str):
        return VALID
    return VALID if _pattern(arg).search(value) is not None else INVALID


def _k_required(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, list):
        raise _Unsure
    if not isinstance(value, dict):
        return VALID
    return VALID if all(name in value for name in arg) else INVALID


def _k_properties(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, dict):
        raise _Unsure
    if not isinstance(value, dict):
        return VALID
    return _all([_eval(arg[k], v, base) for k, v in value.items() if k in arg])


def _k_additional(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if "patternProperties" in schema:
        raise _Unsure
    if not isinstance(value, dict):
        return VALID
    declared = schema.get("properties", {})
    return _all([_eval(arg, v, base) for k, v in value.items() if k not in declared])


def _k_property_names(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(value, dict):
        return VALID
    return _all([_eval(arg, name, base) for name in value])


def _k_max_properties(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, dict) and len(value) > _size(arg) else VALID


def _k_min_properties(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, dict) and len(value) < _size(arg) else VALID


def _k_items(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if "prefixItems" in schema:
        raise _Unsure
    if not isinstance(value, list):
        return VALID
    return _all([_eval(arg, item, base) for item in value])


def _k_min_items(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, list) and len(value) < _size(arg) else VALID


def _k_max_items(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return INVALID if isinstance(value, list) and len(value) > _size(arg) else VALID


def _k_unique(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, bool):
        raise _Unsure
    if not arg or not isinstance(value, list):
        return VALID
    if not all(isinstance(item, str) for item in value):
        raise _Unsure  # jsonschema's equality of mixed values is not modelled here
    return VALID if len(set(value)) == len(value) else INVALID


def _branches(arg: Any, value: object, base: str) -> list[int]:
    if not isinstance(arg, list) or not arg:
        raise _Unsure
    return [_eval(sub, value, base) for sub in arg]


def _k_one_of(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return VALID if _branches(arg, value, base).count(VALID) == 1 else INVALID


def _k_any_of(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return VALID if VALID in _branches(arg, value, base) else INVALID


def _k_all_of(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    return _all(_branches(arg, value, base))


def _k_ref(arg: Any, value: object, base: str, schema: Mapping[str, Any]) -> int:
    if not isinstance(arg, str):
        raise _Unsure
    target, target_base = _resolve(arg, base)
    return _eval(target, value, target_base)


_KEYWORDS = {
    "type": _k_type, "const": _k_const, "enum": _k_enum,
    "minimum": _k_minimum, "maximum": _k_maximum,
    "minLength": _k_min_length, "maxLength": _k_max_length, "pattern": _k_pattern,
    "required": _k_required, "properties": _k_properties,
    "additionalProperties": _k_additional, "propertyNames": _k_property_names,
    "maxProperties": _k_max_properties, "minProperties": _k_min_properties,
    "items": _k_items, "minItems": _k_min_items, "maxItems": _k_max_items,
    "uniqueItems": _k_unique,
    "oneOf": _k_one_of, "anyOf": _k_any_of, "allOf": _k_all_of, "$ref": _k_ref,
}  # fmt: skip


def check(schema_id: str, doc: object) -> int:
    """VALID, INVALID or UNKNOWN for ``doc`` against the schema file ``schema_id``."""
    try:
        return _eval(_document(schema_id), doc, schema_id)
    except (_Unsure, RecursionError, TypeError, re.error):
        return UNKNOWN


def validate(schema_id: str, doc: object) -> None:
    """Like ``schemas.contract.validate``: accept what is proven valid here, hand the
    rest to jsonschema (which raises ``ContractError`` with the detail)."""
    if check(schema_id, doc) != VALID:
        from qinglong.schemas.contract import validate as validate_fully

        validate_fully(schema_id, doc)


def load(schema_id: str, data: bytes) -> dict[str, Any]:
    """Like ``schemas.contract.load`` (strict JSON, then :func:`validate`)."""
    doc = parse_json_strict(data)
    validate(schema_id, doc)
    if not isinstance(doc, dict):  # pragma: no cover - every body schema is an object
        raise ContractError("schema_invalid", "$: type", "type")
    return doc
