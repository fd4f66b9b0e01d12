"""Publish-time compiler: validation, placement normalization, canonical bytes, digests."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
import rfc8785

from qinglong.schemas.canonical import content_digest
from qinglong.schemas.contract import validate
from qinglong.service.compiler import (
    EXECUTOR,
    KIND,
    MAX_CANONICAL_BYTES,
    CommandRejected,
    CompiledRevision,
    compile_command,
    normalize_placement,
)

DEFAULT_PLACEMENT = {
    "required": {"executors": ["remote-worker"], "labels": {}, "runtimes": {}},
    "preferred": [],
}


def command(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "qinglong/command@v1",
        "argv": ["python3", "-c", "print('hi')"],
        "env": {"LANG": "C.UTF-8"},
        "timeoutS": 600,
    }
    doc.update(overrides)
    return doc


def rejected(doc: object) -> CommandRejected:
    with pytest.raises(CommandRejected) as info:
        compile_command(doc)  # type: ignore[arg-type]
    return info.value


def test_minimal_command_gets_default_placement() -> None:
    compiled = compile_command(command())
    assert isinstance(compiled, CompiledRevision)
    assert (compiled.kind, compiled.executor) == ("qinglong/command@v1", "remote_worker")
    assert compiled.spec == command()
    assert compiled.placement == DEFAULT_PLACEMENT
    assert compile_command(command(placement={})).placement == DEFAULT_PLACEMENT


def test_canonical_bytes_are_exact_jcs_of_the_revision_content() -> None:
    compiled = compile_command(command(cwd="/srv"))
    expected = rfc8785.dumps(
        {
            "kind": KIND,
            "executor": EXECUTOR,
            "spec": command(cwd="/srv"),
            "placement": DEFAULT_PLACEMENT,
        }
    )
    assert compiled.canonical == expected
    assert compiled.content_digest == "sha256:" + hashlib.sha256(expected).hexdigest()


def test_golden_canonical_form() -> None:
    # Pinned bytes: the database and every worker must reproduce exactly this.
    doc = {
        "schema": "qinglong/command@v1",
        "argv": ["echo", "hi"],
        "env": {},
        "timeoutS": 60,
        "placement": {
            "required": {"labels": {"region": ["eu-2", "eu-1"]}, "runtimes": {"python": "^3.11"}},
            "preferred": [{"weight": 10, "labels": {"disk": "ssd"}}],
        },
    }
    compiled = compile_command(doc)
    assert compiled.canonical == (
        b'{"executor":"remote_worker","kind":"qinglong/command@v1","placement":{"preferred":'
        b'[{"labels":{"disk":["ssd"]},"runtimes":{},"weight":10}],"required":{"executors":'
        b'["remote-worker"],"labels":{"region":["eu-1","eu-2"]},"runtimes":{"python":'
        b'[">=3.11.0","<4.0.0-0"]}}},"spec":{"argv":["echo","hi"],"env":{},'
        b'"schema":"qinglong/command@v1","timeoutS":60}}'
    )
    assert compiled.content_digest == (
        "sha256:fe2589e8600432c11ee0f8687207dfa43402b645a8c1d1ca47c8dc359feb063f"
    )


def test_placement_normalization() -> None:
    placement = {
        "required": {
            "executors": ["gpu", "remote-worker"],
            "labels": {"zone": "b", "region": ["eu-2", "eu-1"]},
            "runtimes": {"python": "~3.11.2", "node": "*"},
        },
        "preferred": [
            {"weight": 50, "runtimes": {"cuda": ">=12"}},
            {"weight": 5, "labels": {"disk": ["ssd", "nvme"]}},
        ],
    }
    assert compile_command(command(placement=placement)).placement == {
        "required": {
            "executors": ["gpu", "remote-worker"],
            "labels": {"zone": ["b"], "region": ["eu-1", "eu-2"]},
            "runtimes": {"python": [">=3.11.2", "<3.12.0-0"], "node": []},
        },
        "preferred": [
            {"weight": 50, "labels": {}, "runtimes": {"cuda": [">=12.0.0"]}},
            {"weight": 5, "labels": {"disk": ["nvme", "ssd"]}, "runtimes": {}},
        ],
    }


def test_explicit_executors_replace_the_default_and_are_sorted() -> None:
    placement = {"required": {"executors": ["x86", "arm"]}}
    assert compile_command(command(placement=placement)).placement["required"]["executors"] == [
        "arm",
        "x86",
    ]


def test_normalized_placement_validates_against_placement_schema() -> None:
    compiled = compile_command(
        command(placement={"required": {"labels": {"a": "1"}}, "preferred": [{"weight": 1}]})
    )
    validate("qinglong/placement@v1", compiled.placement)
    validate("qinglong/placement@v1", normalize_placement(None))


# ---------------------------------------------------------------- digest stability


def digest_of(doc: object) -> str:
    return compile_command(doc).content_digest  # type: ignore[arg-type]


def test_identical_content_identical_digest() -> None:
    doc = command(placement={"required": {"labels": {"region": "eu-1"}}})
    as_bytes = json.dumps(doc, indent=4, sort_keys=False).encode()
    reordered = json.dumps(dict(reversed(list(doc.items())))).encode()
    assert (
        digest_of(doc)
        == digest_of(as_bytes)
        == digest_of(reordered)
        == digest_of(copy.deepcopy(doc))
    )


def test_changing_content_changes_digest() -> None:
    base = digest_of(command())
    assert digest_of(command(argv=["python3", "-c", "print('ho')"])) != base
    assert digest_of(command(argv=["python3", "-c"])) != base
    assert digest_of(command(env={})) != base
    assert digest_of(command(timeoutS=601)) != base
    assert digest_of(command(cwd="/")) != base
    assert digest_of(command(placement={"required": {"executors": ["gpu"]}})) != base


def test_equivalent_placements_share_a_digest() -> None:
    def with_runtime(text: str) -> str:
        return digest_of(command(placement={"required": {"runtimes": {"python": text}}}))

    assert with_runtime("^1.2") == with_runtime(">=1.2.0 <2.0.0-0") == with_runtime(">=1.2 <2")
    # Normalization is syntactic: semantically equal but differently desugared sets differ.
    assert with_runtime("^1.2") != with_runtime("1.x >=1.2")
    assert with_runtime("^1.2") != with_runtime("^1.3")
    base = digest_of(command())
    assert digest_of(command(placement={})) == base
    assert digest_of(command(placement={"required": {"executors": ["remote-worker"]}})) == base
    assert digest_of(command(placement={"required": {}, "preferred": []})) == base

    def with_labels(labels: dict[str, Any]) -> str:
        return digest_of(command(placement={"required": {"labels": labels}}))

    assert with_labels({"r": "a"}) == with_labels({"r": ["a"]})
    assert with_labels({"r": ["b", "a"]}) == with_labels({"r": ["a", "b"]})
    assert with_labels({"r": ["a"]}) != with_labels({"r": ["a", "b"]})


def test_preferred_order_is_content() -> None:
    a = {"weight": 1, "labels": {"x": "1"}}
    b = {"weight": 2, "labels": {"y": "1"}}
    assert digest_of(command(placement={"preferred": [a, b]})) != digest_of(
        command(placement={"preferred": [b, a]})
    )


def test_worker_recomputes_the_digest_after_a_json_round_trip() -> None:
    compiled = compile_command(command(placement={"required": {"runtimes": {"py": "^3"}}}))
    spec = json.loads(json.dumps(compiled.spec))
    placement = json.loads(json.dumps(compiled.placement))
    assert content_digest(KIND, EXECUTOR, spec, placement) == (
        compiled.canonical,
        compiled.content_digest,
    )


def test_input_document_not_mutated() -> None:
    doc = command(placement={"required": {"labels": {"r": ["b", "a"]}}})
    before = copy.deepcopy(doc)
    compiled = compile_command(doc)
    assert doc == before
    compiled.spec["argv"].append("x")
    assert doc == before


# ---------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            b'{"schema": "qinglong/command@v1", "argv": ["a"], "argv": ["b"], '
            b'"env": {}, "timeoutS": 1}',
            "duplicate_key",
        ),
        (
            b'{"schema": "qinglong/command@v1", "argv": ["a"], '
            b'"env": {"A": "1", "A": "2"}, "timeoutS": 1}',
            "duplicate_key",
        ),
        (
            b'{"schema": "qinglong/command@v1", "argv": ["a"], "env": {}, "timeoutS": NaN}',
            "invalid_json",
        ),
        (
            b'{"schema": "qinglong/command@v1", "argv": ["a"], "env": {}, "timeoutS": 1',
            "invalid_json",
        ),
        (
            b'{"schema": "qinglong/command@v1", "argv": ["a"], "env": {}, "timeoutS": 1.0}',
            "schema_invalid",
        ),
    ],
)
def test_bytes_rejections(data: bytes, reason: str) -> None:
    assert rejected(data).reason == reason


@pytest.mark.parametrize(
    ("overrides", "reason", "detail_prefix"),
    [
        ({"extra": 1}, "schema_invalid", "$: additionalProperties"),
        ({"schema": "qinglong/command@v2"}, "schema_invalid", "$.schema"),
        ({"argv": []}, "schema_invalid", "$.argv"),
        ({"argv": ["x"] * 257}, "limit_exceeded", "$.argv: maxItems"),
        ({"argv": ["x" * 4097]}, "limit_exceeded", "$.argv[0]: maxLength"),
        ({"argv": ["a\x00"]}, "schema_invalid", "$.argv[0]: pattern"),
        ({"env": {"BAD-NAME": "x"}}, "schema_invalid", "$.env"),
        ({"env": {f"V{i}": "x" for i in range(65)}}, "limit_exceeded", "$.env: maxProperties"),
        ({"timeoutS": 0}, "schema_invalid", "$.timeoutS: minimum"),
        ({"timeoutS": 604801}, "limit_exceeded", "$.timeoutS: maximum"),
        ({"timeoutS": True}, "schema_invalid", "$.timeoutS: type"),
        ({"placement": {"required": {"extra": 1}}}, "schema_invalid", "$.placement.required"),
        (
            {"placement": {"preferred": [{"weight": 1, "x": 1}]}},
            "schema_invalid",
            "$.placement.preferred[0]",
        ),
        (
            {"placement": {"preferred": [{"weight": 1}] * 17}},
            "limit_exceeded",
            "$.placement.preferred: maxItems",
        ),
        (
            {"placement": {"preferred": [{"weight": 101}]}},
            "limit_exceeded",
            "$.placement.preferred[0].weight",
        ),
        (
            {"placement": {"required": {"executors": ["a", "a"]}}},
            "duplicate_value",
            "$.placement.required.executors",
        ),
        (
            {"placement": {"required": {"labels": {"r": ["a", "a"]}}}},
            "duplicate_value",
            "$.placement.required.labels",
        ),
        (
            {"placement": {"required": {"labels": {f"k{i}": "v" for i in range(33)}}}},
            "limit_exceeded",
            "$.placement.required.labels: maxProperties",
        ),
        (
            {"placement": {"required": {"labels": {"r": "a\nb"}}}},
            "schema_invalid",
            "$.placement.required.labels",
        ),
        (
            {"placement": {"required": {"labels": {"r": "a\u202eb"}}}},
            "invalid_label",
            "$.placement.required.labels",
        ),
        (
            {"placement": {"required": {"labels": {"r": ["ok", "nb\u00a0sp"]}}}},
            "invalid_label",
            "$.placement.required.labels",
        ),
        (
            {"placement": {"required": {"labels": {"R": "a"}}}},
            "schema_invalid",
            "$.placement.required.labels",
        ),
        (
            {"placement": {"required": {"runtimes": {f"r{i}": "*" for i in range(17)}}}},
            "limit_exceeded",
            "$.placement.required.runtimes: maxProperties",
        ),
        (
            {"placement": {"required": {"runtimes": {"py": "^3.x.1"}}}},
            "invalid_semver",
            "$.placement.required.runtimes[*]: ",
        ),
        (
            {"placement": {"required": {"runtimes": {"py": "1.2.3 - 2"}}}},
            "invalid_semver",
            "$.placement.required.runtimes[*]: hyphen",
        ),
        (
            {"placement": {"preferred": [{"weight": 1, "runtimes": {"py": "v1"}}]}},
            "invalid_semver",
            "$.placement.preferred[0].runtimes[*]",
        ),
        (
            {"placement": {"required": {"runtimes": {"py": "01.2.3"}}}},
            "invalid_semver",
            "$.placement.required.runtimes[*]",
        ),
        (
            {"placement": {"required": {"runtimes": {"py": "1.2.3-01"}}}},
            "invalid_semver",
            "$.placement.required.runtimes[*]",
        ),
    ],
)
def test_document_rejections(overrides: dict[str, Any], reason: str, detail_prefix: str) -> None:
    err = rejected(command(**overrides))
    assert err.reason == reason
    assert err.detail.startswith(detail_prefix), err.detail


def test_or_ranges_refused_even_if_the_schema_allowed_them() -> None:
    # The schema's range alphabet has no '|'; the compiler states why anyway.
    from qinglong.service.semver_range import InvalidRange, normalize_range

    with pytest.raises(InvalidRange, match="'\\|\\|'"):
        normalize_range("1 || 2")
    assert rejected(command(placement={"required": {"runtimes": {"py": "1 || 2"}}})).reason == (
        "schema_invalid"
    )


def test_canonical_size_cap() -> None:
    big_env = {f"V{i}": "x" * 4000 for i in range(20)}
    err = rejected(command(env=big_env))
    assert err.reason == "limit_exceeded"
    assert str(MAX_CANONICAL_BYTES) in err.detail
    compile_command(command(env={f"V{i}": "x" * 4000 for i in range(10)}))


def test_rejection_detail_does_not_echo_values() -> None:
    secret = "hunter2-secret-token"
    err = rejected(command(env={"TOKEN": secret}, timeoutS=0))
    assert secret not in str(err)
    err = rejected(command(argv=[secret + "\x00"]))
    assert secret not in str(err)
