"""Canonical bytes (RFC 8785 / JCS) and `sha256:<hex>` digests.

The ingress, the publish compiler and the worker must produce byte-identical
output for identical content, so every digest in the system goes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import rfc8785

__all__ = ["canonical_bytes", "content_digest", "revision_content", "sha256_digest"]


def canonical_bytes(obj: object) -> bytes:
    """RFC 8785 serialization. Raises `rfc8785.CanonicalizationError` (a ValueError)
    for values JCS cannot represent (NaN, integers beyond 2**53, non-JSON types)."""
    # Any object: rfc8785 raises for what JSON cannot hold (its `_Value` type is private).
    return rfc8785.dumps(cast(Any, obj))


def _sha256_hex() -> Callable[[bytes], str]:
    """CPython's own SHA-256 (`_sha256` in 3.11, `_sha2` from 3.12) when present.

    `hashlib` initializes OpenSSL's whole digest table and blake2 on import
    (~0.6 MiB of resident memory, measured in docs/EDGE.md); the worker on a
    router computes one digest at start-up and should not pay that. Same
    function, same bytes — tests/py/test_canonical_digest.py compares them.
    """
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return lambda data: sha256(data).hexdigest()


def sha256_digest(data: bytes) -> str:
    """`sha256:` + lowercase hex SHA-256 of `data`."""
    return "sha256:" + _sha256_hex()(data)


def revision_content(
    kind: str, executor: str, spec: Mapping[str, Any], placement: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The object whose canonical bytes define a revision (SPEC 4.6).

    `placement` None means absent (old revisions, or an offer carrying `null`): the
    key is omitted rather than serialized as null, so old digests stay valid.
    """
    content: dict[str, Any] = {"kind": kind, "executor": executor, "spec": spec}
    if placement is not None:
        content["placement"] = placement
    return content


def content_digest(
    kind: str, executor: str, spec: Mapping[str, Any], placement: Mapping[str, Any] | None
) -> tuple[bytes, str]:
    """Return `(canonical bytes, "sha256:<hex>")` of a revision's content."""
    data = canonical_bytes(revision_content(kind, executor, spec, placement))
    return data, sha256_digest(data)
