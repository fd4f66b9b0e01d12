"""Schema checks that prove a document valid without ``jsonschema`` (docs/EDGE.md).

Two callers validate the same few document shapes over and over. An idle
worker checks its own capabilities (once, at start), session answers (every
heartbeat) and ``idle`` pull answers (every few seconds); loading ``jsonschema``
for them costs the process about 6 MiB of resident memory (attrs, rpds,
referencing, typing_extensions, the metaschemas, the format checkers'
dependencies), most of the edge budget. The ingress checks every request body
and every response it builds from a database projection; with ``jsonschema``
that was 0.79 ms of CPU per ``offered`` answer and 0.13 ms per ``idle`` one.

This module compiles the *same schema files* — each node once, into nested
checks of the keywords they use (interpreting the keywords per document cost
2-3 times as much: 160 against 66 µs per ``offered`` answer, 22 against 9 µs
per pull request) — and answers one of three things: proven valid, proven
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
from collections.abc import Callable, Mapping, Sized
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


# A schema node compiled into a check of one value: VALID or INVALID, or raises
# _Unsure. Compiled once per (node, base URI); evaluating the schema's keywords
# by interpretation instead cost 2-3 times as much per document (160 µs per
# offered answer), on every request and response the ingress serves.
Check = Callable[[object], int]
_checks: dict[tuple[int, str], tuple[object, Check]] = {}


def _valid(value: object) -> int:
    return VALID


def _invalid(value: object) -> int:
    return INVALID


def _unsure(value: object) -> int:
    raise _Unsure


def _compiled(schema: object, base: str) -> Check:
    """The check of `schema` (a node of a loaded document) under `base`."""
    key = (id(schema), base)
    found = _checks.get(key)
    if found is not None and found[0] is schema:  # the entry holds the node: ids stay unique
        return found[1]
    check = _compile(schema, base)
    _checks[key] = (schema, check)
    return check


def _compile(schema: object, base: str) -> Check:
    if schema is True:
        return _valid
    if schema is False:
        return _invalid
    if not isinstance(schema, Mapping):
        return _unsure
    steps: list[Check] = []
    for keyword, arg in schema.items():
        if keyword in _ANNOTATIONS:
            if keyword == "$id" and arg != base:
                steps.append(_unsure)  # an embedded resource would change the base URI
            continue
        maker = _KEYWORDS.get(keyword)
        try:
            steps.append(_unsure if maker is None else maker(arg, base, schema))
        except _Unsure:
            steps.append(_unsure)
    if len(steps) == 1:
        return steps[0]
    ordered = tuple(steps)

    def check(value: object) -> int:
        # Keywords in the schema's order; the first INVALID decides.
        for step in ordered:
            if step(value) == INVALID:
                return INVALID
        return VALID

    return check


def _verdict(ok: bool) -> int:
    return VALID if ok else INVALID


def _k_type(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    names = arg if isinstance(arg, list) else [arg]
    if not names or any(name not in _TYPES for name in names):
        raise _Unsure
    tests = tuple(_TYPES[name] for name in names)
    if len(tests) == 1:
        test = tests[0]
        return lambda value: _verdict(test(value))
    return lambda value: _verdict(any(t(value) for t in tests))


def _k_const(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    return lambda value: _verdict(_equal(value, arg))


def _k_enum(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, list):
        raise _Unsure
    return lambda value: _verdict(any(_equal(value, item) for item in arg))


def _number(arg: Any) -> int | float:
    if not _TYPES["number"](arg):
        raise _Unsure
    return arg  # type: ignore[no-any-return]


def _k_minimum(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    bound, is_number = _number(arg), _TYPES["number"]
    return lambda value: _verdict(not (is_number(value) and value < bound))  # type: ignore[operator]


def _k_maximum(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    bound, is_number = _number(arg), _TYPES["number"]
    return lambda value: _verdict(not (is_number(value) and value > bound))  # type: ignore[operator]


def _size(arg: Any) -> int:
    if not _TYPES["integer"](arg) or arg < 0:
        raise _Unsure
    return int(arg)


def _length_bound(kind: type[Sized], most: bool) -> Callable[[Any, str, Mapping[str, Any]], Check]:
    """minLength/maxLength, minItems/maxItems, minProperties/maxProperties: a
    bound on `len` of values of `kind`; other values pass."""

    def make(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
        size = _size(arg)
        if most:
            return lambda value: _verdict(not (isinstance(value, kind) and len(value) > size))
        return lambda value: _verdict(not (isinstance(value, kind) and len(value) < size))

    return make


def _k_pattern(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, str):
        raise _Unsure
    try:
        search = _pattern(arg).search
    except re.error:
        raise _Unsure from None
    return lambda value: _verdict(not isinstance(value, str) or search(value) is not None)


def _k_required(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, list):
        raise _Unsure
    names = tuple(arg)
    return lambda value: _verdict(
        not isinstance(value, dict) or all(name in value for name in names)
    )


def _k_properties(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, dict):
        raise _Unsure
    checks = {name: _compiled(sub, base) for name, sub in arg.items()}

    def check(value: object) -> int:
        if not isinstance(value, dict):
            return VALID
        for name, item in value.items():
            sub = checks.get(name)
            if sub is not None and sub(item) == INVALID:
                return INVALID
        return VALID

    return check


def _k_additional(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if "patternProperties" in schema:
        raise _Unsure
    declared = schema.get("properties", {})
    sub = _compiled(arg, base)

    def check(value: object) -> int:
        if not isinstance(value, dict):
            return VALID
        for name, item in value.items():
            if name not in declared and sub(item) == INVALID:
                return INVALID
        return VALID

    return check


def _every(sub: Check, values: Any) -> int:
    for item in values:
        if sub(item) == INVALID:
            return INVALID
    return VALID


def _k_property_names(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    sub = _compiled(arg, base)
    return lambda value: _every(sub, value) if isinstance(value, dict) else VALID


def _k_items(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if "prefixItems" in schema:
        raise _Unsure
    sub = _compiled(arg, base)
    return lambda value: _every(sub, value) if isinstance(value, list) else VALID


def _k_unique(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, bool):
        raise _Unsure
    if not arg:
        return _valid

    def check(value: object) -> int:
        if not isinstance(value, list):
            return VALID
        if not all(isinstance(item, str) for item in value):
            raise _Unsure  # jsonschema's equality of mixed values is not modelled here
        return _verdict(len(set(value)) == len(value))

    return check


def _branches(arg: Any, base: str) -> tuple[Check, ...]:
    if not isinstance(arg, list) or not arg:
        raise _Unsure
    return tuple(_compiled(sub, base) for sub in arg)


def _k_one_of(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    branches = _branches(arg, base)
    # Every branch is evaluated: one that cannot be decided leaves the count open.
    return lambda value: _verdict([b(value) for b in branches].count(VALID) == 1)


def _k_any_of(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    branches = _branches(arg, base)
    return lambda value: _verdict(any(b(value) == VALID for b in branches))


def _k_all_of(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    branches = _branches(arg, base)
    return lambda value: _verdict(all(b(value) == VALID for b in branches))


def _k_ref(arg: Any, base: str, schema: Mapping[str, Any]) -> Check:
    if not isinstance(arg, str):
        raise _Unsure
    target, target_base = _resolve(arg, base)
    resolved: list[Check] = []  # compiled on first use: a schema may refer to itself

    def check(value: object) -> int:
        if not resolved:
            resolved.append(_compiled(target, target_base))
        return resolved[0](value)

    return check


_KEYWORDS: dict[str, Callable[[Any, str, Mapping[str, Any]], Check]] = {
    "type": _k_type, "const": _k_const, "enum": _k_enum,
    "minimum": _k_minimum, "maximum": _k_maximum,
    "minLength": _length_bound(str, most=False), "maxLength": _length_bound(str, most=True),
    "pattern": _k_pattern, "required": _k_required, "properties": _k_properties,
    "additionalProperties": _k_additional, "propertyNames": _k_property_names,
    "maxProperties": _length_bound(dict, most=True),
    "minProperties": _length_bound(dict, most=False),
    "items": _k_items, "minItems": _length_bound(list, most=False),
    "maxItems": _length_bound(list, most=True),
    "uniqueItems": _k_unique,
    "oneOf": _k_one_of, "anyOf": _k_any_of, "allOf": _k_all_of, "$ref": _k_ref,
}  # fmt: skip


def check(schema_id: str, doc: object) -> int:
    """VALID, INVALID or UNKNOWN for ``doc`` against the schema file ``schema_id``."""
    try:
        return _compiled(_document(schema_id), schema_id)(doc)
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
