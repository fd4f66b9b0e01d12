"""Worker capabilities at the session-open write boundary."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from qinglong.service.capabilities import (
    CanonicalCapabilities,
    CapabilitiesRejected,
    canonicalize_capabilities,
)
from qinglong.service.semver_range import MAX_COMPONENT


def caps(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker", "gpu"],
        "labels": {"region": "eu-1", "disk": "ssd"},
        "runtimes": {"python": "3.11.7", "node": "20.11.1-rc.1+build.5"},
        "slots": 4,
    }
    doc.update(overrides)
    return doc


def rejected(obj: object) -> CapabilitiesRejected:
    with pytest.raises(CapabilitiesRejected) as info:
        canonicalize_capabilities(obj)
    return info.value


def test_canonical_form_and_digest() -> None:
    result = canonicalize_capabilities(caps())
    assert isinstance(result, CanonicalCapabilities)
    assert result.doc["executors"] == ["gpu", "remote-worker"]
    assert result.canonical == (
        b'{"executors":["gpu","remote-worker"],"labels":{"disk":"ssd","region":"eu-1"},'
        b'"runtimes":{"node":"20.11.1-rc.1+build.5","python":"3.11.7"},'
        b'"schema":"qinglong/worker-capabilities@v1","slots":4}'
    )
    assert result.digest == "sha256:" + hashlib.sha256(result.canonical).hexdigest()
    assert json.loads(result.canonical) == result.doc


def test_same_content_same_digest_regardless_of_order_or_encoding() -> None:
    a = canonicalize_capabilities(caps())
    b = canonicalize_capabilities(caps(executors=["gpu", "remote-worker"]))
    reordered = dict(reversed(list(caps().items())))
    c = canonicalize_capabilities(json.dumps(reordered, indent=2).encode())
    assert a.digest == b.digest == c.digest
    assert a.canonical == c.canonical


def test_different_content_different_digest() -> None:
    base = canonicalize_capabilities(caps()).digest
    assert canonicalize_capabilities(caps(slots=5)).digest != base
    assert canonicalize_capabilities(caps(labels={"region": "eu-2", "disk": "ssd"})).digest != base
    assert canonicalize_capabilities(caps(runtimes={"python": "3.11.8"})).digest != base


def test_input_not_mutated() -> None:
    doc = caps()
    before = copy.deepcopy(doc)
    result = canonicalize_capabilities(doc)
    assert doc == before
    result.doc["labels"]["x"] = "y"
    assert doc == before


def test_edges_accepted() -> None:
    canonicalize_capabilities(caps(executors=[f"e{i}" for i in range(8)], slots=1))
    canonicalize_capabilities(caps(labels={f"k{i}": "v" * 128 for i in range(32)}, slots=256))
    canonicalize_capabilities(caps(runtimes={f"r{i}": "0.0.0" for i in range(16)}))
    canonicalize_capabilities(caps(labels={}, runtimes={}))
    canonicalize_capabilities(caps(labels={"topology.kubernetes.io/zone": "区域 1"}))
    canonicalize_capabilities(caps(runtimes={"big": f"{MAX_COMPONENT}.0.0"}))


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"extra": True}, "schema_invalid"),
        ({"schema": "qinglong/worker-capabilities@v2"}, "schema_invalid"),
        ({"executors": ["remote-worker", "remote-worker"]}, "duplicate_value"),
        ({"executors": [f"e{i}" for i in range(9)]}, "limit_exceeded"),
        ({"executors": []}, "schema_invalid"),
        ({"executors": ["Remote-Worker"]}, "schema_invalid"),
        ({"executors": ["remote_worker"]}, "schema_invalid"),
        ({"labels": {f"k{i}": "v" for i in range(33)}}, "limit_exceeded"),
        ({"labels": {"region": "x" * 129}}, "limit_exceeded"),
        ({"labels": {"region": "eu\x001"}}, "schema_invalid"),
        ({"labels": {"region": "eu\x1b[31m"}}, "schema_invalid"),
        ({"labels": {"region": "eu\u2028"}}, "schema_invalid"),
        ({"labels": {"region": "eu\u202e1"}}, "invalid_label"),
        ({"labels": {"region": "eu\u200b1"}}, "invalid_label"),
        ({"labels": {"region": "\ue000"}}, "invalid_label"),
        ({"labels": {"Region": "eu-1"}}, "schema_invalid"),
        ({"labels": {"region\n": "eu-1"}}, "schema_invalid"),
        ({"labels": {"region": ["eu-1"]}}, "schema_invalid"),
        ({"runtimes": {f"r{i}": "1.0.0" for i in range(17)}}, "limit_exceeded"),
        ({"runtimes": {"python": "3.11"}}, "schema_invalid"),
        ({"runtimes": {"python": "v3.11.0"}}, "schema_invalid"),
        ({"runtimes": {"python": "03.11.0"}}, "schema_invalid"),
        ({"runtimes": {"python": "3.11.0-rc.01"}}, "schema_invalid"),
        ({"runtimes": {"python": ">=3.11.0"}}, "schema_invalid"),
        ({"runtimes": {"python": f"{MAX_COMPONENT + 1}.0.0"}}, "invalid_semver"),
        ({"runtimes": {"Python": "3.11.0"}}, "schema_invalid"),
        ({"slots": 0}, "schema_invalid"),
        ({"slots": 257}, "limit_exceeded"),
        ({"slots": 4.0}, "schema_invalid"),
        ({"slots": True}, "schema_invalid"),
    ],
)
def test_rejections(overrides: dict[str, Any], reason: str) -> None:
    err = rejected(caps(**overrides))
    assert err.reason == reason, err.detail


@pytest.mark.parametrize("field", ["executors", "labels", "runtimes", "slots", "schema"])
def test_every_field_required(field: str) -> None:
    doc = caps()
    del doc[field]
    assert rejected(doc).reason == "schema_invalid"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"schema": "qinglong/worker-capabilities@v1", "slots": 1, "slots": 2}', "duplicate_key"),
        (b'{"schema": "qinglong/worker-capabilities@v1", "slots": Infinity}', "invalid_json"),
        (b"\xff", "invalid_json"),
        (b"[]", "schema_invalid"),
    ],
)
def test_bytes_rejections(data: bytes, reason: str) -> None:
    assert rejected(data).reason == reason


def test_rejection_detail_does_not_echo_values() -> None:
    secret = "tok-9f8e7d6c5b4a"
    err = rejected(caps(labels={"region": secret + "\x07"}))
    assert secret not in str(err)
    err = rejected(caps(runtimes={"python": secret}))
    assert secret not in str(err)
