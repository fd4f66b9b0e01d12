"""Canonical bytes (RFC 8785 / JCS) and `sha256:<hex>` digests.

The ingress, the publish compiler and the worker must produce byte-identical
output for identical content, so every digest in the system goes through here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import rfc8785

__all__ = ["canonical_bytes", "content_digest", "revision_content", "sha256_digest"]


def canonical_bytes(obj: object) -> bytes:
    """RFC 8785 serialization. Raises `rfc8785.CanonicalizationError` (a ValueError)
    for values JCS cannot represent (NaN, integers beyond 2**53, non-JSON types)."""
    return rfc8785.dumps(obj)


def sha256_digest(data: bytes) -> str:
    """`sha256:` + lowercase hex SHA-256 of `data`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
