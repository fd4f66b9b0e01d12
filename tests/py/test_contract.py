"""Wire contract: schema files, strict JSON parsing, validation and canonical digests."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.schemas.canonical import canonical_bytes, content_digest, sha256_digest
from qinglong.schemas.contract import (
    NON_SCHEMA_FILES,
    SCHEMA_IDS,
    Contract,
    ContractError,
    SchemaId,
    default_contract,
    load,
    parse_json_strict,
    schema_file_name,
    validate,
)

U1 = "0b4f8a52-3c1e-4c7a-9f0e-1a2b3c4d5e6f"
U2 = "7d9e2f10-8a4b-4b6c-8d2e-9f0a1b2c3d4e"
U3 = "e1d2c3b4-a596-4788-9900-aabbccddeeff"
DIGEST = "sha256:" + "ab" * 32
TOKEN = base64.urlsafe_b64encode(bytes(range(32))).rstrip(b"=").decode()
NOW = 1_700_000_000_000
RUN_UUID = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"


def schema_files() -> dict[str, dict[str, Any]]:
    out = {}
    for entry in resources.files("qinglong.schemas").iterdir():
        if entry.name.endswith(".json") and entry.name not in NON_SCHEMA_FILES:
            out[entry.name] = json.loads(entry.read_bytes())
    return out


def walk(node: object, path: str = "$"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}/{i}")


def lease_fields() -> dict[str, Any]:
    return {
        "runId": U1,
        "attemptId": U2,
        "workerId": U3,
        "sessionId": U1,
        "sessionGeneration": 3,
        "leaseGeneration": 1,
        "leaseVersion": 1,
        "offerId": U2,
        "claimedAtMs": NOW,
        "expiresAtMs": NOW + 30_000,
        "updatedAtMs": NOW,
    }


def offered() -> dict[str, Any]:
    return {
        "schema": "qinglong/remote-execution-offer@v1",
        "status": "offered",
        "offerId": U2,
        "target": {"workerId": U3, "sessionId": U1, "generation": 3},
        "candidate": {
            "runId": U1,
            "attemptId": U2,
            "projectId": U3,
            "taskId": U1,
            "executionRevisionId": U2,
            "priority": 0,
            "queuedAtMs": NOW,
        },
        "executionRevision": {
            "id": U2,
            "taskId": U1,
            "revision": 1,
            "kind": "qinglong/command@v1",
            "executor": "remote_worker",
            "spec": {
                "schema": "qinglong/command@v1",
                "argv": ["echo", "hi"],
                "env": {},
                "timeoutS": 60,
            },
            "placement": {
                "required": {"executors": ["remote-worker"], "labels": {}, "runtimes": {}},
                "preferred": [],
            },
            "contentDigest": DIGEST,
            "createdAtMs": NOW,
        },
        "contentDigest": DIGEST,
        "placementScore": 0,
        "lease": lease_fields(),
    }


def idle() -> dict[str, Any]:
    return {
        "schema": "qinglong/remote-execution-offer@v1",
        "status": "idle",
        "reason": "no_candidates",
        "stats": {
            "pages": 1,
            "candidates": 0,
            "claimAttempts": 0,
            "races": 0,
            "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 0},
        },
        "truncated": False,
        "retryAfterMs": 1000,
    }


def capabilities() -> dict[str, Any]:
    return {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {"region": "eu-1"},
        "runtimes": {"python": "3.11.7"},
        "slots": 2,
    }


FENCE = {"workerId": U3, "sessionId": U1, "generation": 3}
LEASE_REQ = {**FENCE, "offerId": U2, "leaseToken": TOKEN, "leaseVersion": 3}

VALID: dict[str, dict[str, Any]] = {
    "qinglong/worker-capabilities@v1": capabilities(),
    "qinglong/command@v1": {
        "schema": "qinglong/command@v1",
        "argv": ["python", "-c", "print(1)"],
        "env": {"PATH": "/usr/bin"},
        "secrets": {"DB_PASSWORD": "db.password"},
        "cwd": "/tmp",
        "timeoutS": 60,
        "placement": {
            "required": {"labels": {"region": ["eu-1", "eu-2"]}, "runtimes": {"python": "^3.11"}},
            "preferred": [{"weight": 10, "labels": {"disk": "ssd"}}],
        },
    },
    "qinglong/placement@v1": {
        "required": {
            "executors": ["remote-worker"],
            "labels": {"region": ["eu-1"]},
            "runtimes": {"python": [">=3.11.0", "<4.0.0-0"]},
        },
        "preferred": [{"weight": 5, "labels": {}, "runtimes": {}}],
    },
    "qinglong/offer-pull-request@v1": {
        "schema": "qinglong/offer-pull-request@v1",
        **FENCE,
        "offerId": U2,
        "leaseToken": TOKEN,
    },
    "qinglong/remote-execution-offer@v1": offered(),
    "qinglong/offer-batch-pull-request@v1": {
        "schema": "qinglong/offer-batch-pull-request@v1",
        **FENCE,
        "offers": [{"offerId": U2, "leaseToken": TOKEN}],
    },
    "qinglong/remote-execution-offer-batch@v1": {
        "schema": "qinglong/remote-execution-offer-batch@v1",
        "offers": [offered()],
        "idle": {
            "reason": "capacity_full",
            "stats": {
                "pages": 0,
                "candidates": 0,
                "claimAttempts": 0,
                "races": 0,
                "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 1},
            },
            "truncated": False,
            "retryAfterMs": 2000,
        },
        "conflicts": [{"offerId": U1, "category": "token_mismatch"}],
    },
    "qinglong/error@v1": {
        "schema": "qinglong/error@v1",
        "error": "conflict",
        "reason": "session_replaced",
    },
    "qinglong/session-open-request@v1": {
        "schema": "qinglong/session-open-request@v1",
        "workerId": U3,
        "capabilities": capabilities(),
    },
    "qinglong/session-heartbeat-request@v1": {
        "schema": "qinglong/session-heartbeat-request@v1",
        **FENCE,
    },
    "qinglong/session-close-request@v1": {"schema": "qinglong/session-close-request@v1", **FENCE},
    "qinglong/session@v1": {
        "schema": "qinglong/session@v1",
        **FENCE,
        "expiresAtMs": NOW,
        "capabilitiesDigest": DIGEST,
        "heartbeatIntervalMs": 20_000,
    },
    "qinglong/lease-ack-request@v1": {
        "schema": "qinglong/lease-ack-request@v1",
        **LEASE_REQ,
        "phase": "starting",
    },
    "qinglong/lease-heartbeat-request@v1": {
        "schema": "qinglong/lease-heartbeat-request@v1",
        **LEASE_REQ,
    },
    "qinglong/lease-secrets-request@v1": {
        "schema": "qinglong/lease-secrets-request@v1",
        **LEASE_REQ,
    },
    "qinglong/lease-secrets@v1": {
        "schema": "qinglong/lease-secrets@v1",
        "values": {"DB_PASSWORD": "correct horse battery staple"},
    },
    "qinglong/lease-log-request@v1": {
        "schema": "qinglong/lease-log-request@v1",
        **LEASE_REQ,
        "offset": 4096,
        "chunk": "step 2/3: compiling\n",
    },
    "qinglong/lease-log@v1": {
        "schema": "qinglong/lease-log@v1",
        "storedBytes": 4117,
        "truncated": False,
    },
    "qinglong/lease-batch-request@v1": {
        "schema": "qinglong/lease-batch-request@v1",
        **FENCE,
        "items": [{"schema": "qinglong/lease-heartbeat-request@v1", **LEASE_REQ}],
    },
    "qinglong/lease-batch@v1": {
        "schema": "qinglong/lease-batch@v1",
        "results": [
            {
                "status": 200,
                "body": {"schema": "qinglong/lease-log@v1", "storedBytes": 6, "truncated": False},
            },
            {
                "status": 409,
                "body": {
                    "schema": "qinglong/error@v1",
                    "error": "conflict",
                    "reason": "stale_lease_version",
                },
            },
        ],
    },
    "qinglong/credential-rotate-request@v1": {
        "schema": "qinglong/credential-rotate-request@v1",
        "workerId": U3,
    },
    "qinglong/credential@v1": {
        "schema": "qinglong/credential@v1",
        "workerId": U3,
        "credentialId": "k3v9q2m7x1c8d4f6",
        "credential": "ql3w_k3v9q2m7x1c8d4f6_" + TOKEN,
        "issuedAtMs": NOW,
        "expiresAtMs": NOW + 90 * 86_400_000,
        "previousCredentialId": "a0b1c2d3e4f5g6h7",
        "previousExpiresAtMs": NOW + 86_400_000,
    },
    "qinglong/lease-complete-request@v1": {
        "schema": "qinglong/lease-complete-request@v1",
        **LEASE_REQ,
        "outcome": "failed",
        "exitCode": -1,
        "reason": "nonzero_exit",
        "result": {
            "exitCode": -1,
            "durationMs": 12,
            "outputTail": "killed",
            "outputBytes": 6,
            "logBytes": 6,
            "limits": {
                "mechanism": "rlimit",
                "uid": 1001,
                "maxProcesses": 64,
                "maxOpenFiles": None,
                "maxMemoryBytes": 268435456,
                "exceeded": ["memory"],
            },
        },
    },
    "qinglong/lease@v1": {
        "schema": "qinglong/lease@v1",
        **lease_fields(),
        "state": "running",
        "startedAtMs": NOW,
        "cancelRequested": False,
    },
    "qinglong/run-enqueue-request@v1": {
        "schema": "qinglong/run-enqueue-request@v1",
        "task": "acme/build",
        "count": 2,
        "priority": 5,
        "delayMs": 1000,
        "key": "nightly-42",
    },
    "qinglong/run-enqueued@v1": {
        "schema": "qinglong/run-enqueued@v1",
        "runIds": [RUN_UUID],
        "existing": False,
    },
    "qinglong/run-log@v1": {
        "schema": "qinglong/run-log@v1",
        "runId": RUN_UUID,
        "attemptNumber": 1,
        "offset": 0,
        "nextOffset": 6,
        "text": "hello\n",
        "storedBytes": 6,
        "logBytes": None,
        "truncated": False,
        "complete": False,
        "ended": False,
    },
    "qinglong/run-page@v1": {
        "schema": "qinglong/run-page@v1",
        "next": "17",
        "runs": [
            {
                "runId": RUN_UUID,
                "taskId": RUN_UUID,
                "project": "acme",
                "taskName": "build",
                "pool": "acme/default",
                "state": "queued",
                "priority": 0,
                "queuedAtMs": NOW,
                "notBeforeMs": NOW,
                "attempts": 1,
                "updatedAtMs": NOW,
            }
        ],
    },
    "qinglong/run@v1": {
        "schema": "qinglong/run@v1",
        "run": {
            "runId": RUN_UUID,
            "taskId": RUN_UUID,
            "projectId": RUN_UUID,
            "project": "acme",
            "taskName": "build",
            "pool": "acme/default",
            "state": "failed",
            "priority": 0,
            "queuedAtMs": NOW,
            "notBeforeMs": NOW,
            "attempts": 1,
            "updatedAtMs": NOW,
            "finishedAtMs": NOW,
            "cancelRequested": False,
            "executionRevisionId": RUN_UUID,
            "key": None,
        },
        "attempts": [
            {
                "attemptId": RUN_UUID,
                "number": 1,
                "state": "failed",
                "workerId": RUN_UUID,
                "sessionId": RUN_UUID,
                "claimedAtMs": NOW,
                "startedAtMs": NOW,
                "finishedAtMs": NOW,
                "exitCode": 3,
                "reason": "nonzero_exit",
                "result": {
                    "exitCode": 3,
                    "durationMs": 5,
                    "outputTail": "boom\n",
                    "outputBytes": 5,
                },
            }
        ],
        "events": [
            {
                "type": "run.queued",
                "atMs": NOW,
                "attemptId": RUN_UUID,
                "taskId": RUN_UUID,
                "priority": 0,
            }
        ],
    },
}
BODY_IDS = sorted(s for s in SCHEMA_IDS if s not in ("qinglong/defs@v1", "qinglong/placement@v1"))


def reject(schema_id: str, doc: object, keyword: str | None = None) -> ContractError:
    with pytest.raises(ContractError) as info:
        validate(schema_id, doc)
    assert info.value.reason == "schema_invalid"
    if keyword is not None:
        assert info.value.keyword == keyword, info.value.detail
    return info.value


# ---------------------------------------------------------------- schema files


def test_every_schema_id_has_exactly_one_file_named_by_the_rule() -> None:
    files = schema_files()
    assert {doc["$id"] for doc in files.values()} == SCHEMA_IDS
    for name, doc in files.items():
        assert name == schema_file_name(doc["$id"])
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert (
        schema_file_name("qinglong/offer-pull-request@v1") == "qinglong.offer-pull-request.v1.json"
    )


def test_schema_files_are_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    for doc in schema_files().values():
        Draft202012Validator.check_schema(doc)


def test_every_object_closed_and_every_collection_bounded() -> None:
    for name, doc in schema_files().items():
        for path, node in walk(doc):
            kind = node.get("type")
            where = f"{name} {path}"
            if kind == "object":
                assert "additionalProperties" in node, where
                if node["additionalProperties"] is not False:
                    assert "maxProperties" in node and "propertyNames" in node, where
            elif kind == "array":
                assert "maxItems" in node, where
            elif kind == "string":
                assert "maxLength" in node and "pattern" in node, where
            elif kind == "integer":
                assert "minimum" in node and "maximum" in node, where
            if "pattern" in node:
                assert node["pattern"].startswith("^") and node["pattern"].endswith("$"), where


@pytest.mark.parametrize("schema_id", BODY_IDS)
def test_every_body_requires_its_schema_const(schema_id: str) -> None:
    doc = default_contract().schema(schema_id)
    variants = [doc] if "oneOf" not in doc else list(doc["$defs"].values())
    for variant in variants:
        assert variant["properties"]["schema"] == {"const": schema_id}
        assert "schema" in variant["required"]
    body = VALID[schema_id]
    reject(schema_id, {k: v for k, v in body.items() if k != "schema"}, "required")
    reject(schema_id, {**body, "schema": "qinglong/error@v2"})


@pytest.mark.parametrize("schema_id", sorted(VALID))
def test_valid_examples_pass(schema_id: str) -> None:
    validate(schema_id, VALID[schema_id])


@pytest.mark.parametrize("schema_id", sorted(VALID))
def test_unknown_top_level_field_refused(schema_id: str) -> None:
    reject(schema_id, {**VALID[schema_id], "extra": 1})


def test_schema_ids_enum_matches_constant() -> None:
    assert {s.value for s in SchemaId} == SCHEMA_IDS
    assert SchemaId.OFFER_PULL_REQUEST == "qinglong/offer-pull-request@v1"
    with pytest.raises(LookupError):
        validate("qinglong/nope@v1", {})


# ---------------------------------------------------------------- strict JSON


def test_parse_accepts_plain_json_and_finite_floats() -> None:
    assert parse_json_strict(b'{"a": [1, 2.5, "\\u00e9", null, true]}') == {
        "a": [1, 2.5, "é", None, True]
    }
    assert parse_json_strict(bytearray(b"[]")) == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a": 1, "a": 2}', "duplicate_key"),
        (b'{"x": {"b": 1, "b": 1}}', "duplicate_key"),
        (b'[{"k": 1}, {"k": 2, "k": 3}]', "duplicate_key"),
        (b'{"a": NaN}', "invalid_json"),
        (b'{"a": Infinity}', "invalid_json"),
        (b'{"a": -Infinity}', "invalid_json"),
        (b'{"a": 1e400}', "invalid_json"),
        (b'{"a": "\xff"}', "invalid_json"),
        (b'\xef\xbb\xbf{"a": 1}', "invalid_json"),
        (b'{"a": "\\ud800"}', "invalid_json"),
        (b'{"\\udc00": 1}', "invalid_json"),
        (b'{"a": 1} x', "invalid_json"),
        (b"", "invalid_json"),
        (b"{'a': 1}", "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid_json"),
        (b'{"a": ' + b"9" * 5000 + b"}", "invalid_json"),
        ('{"a": 1}'.encode("utf-16"), "invalid_json"),
    ],
)
def test_parse_refuses(data: bytes, reason: str) -> None:
    with pytest.raises(ContractError) as info:
        parse_json_strict(data)
    assert info.value.reason == reason


def test_parse_refuses_str_input() -> None:
    with pytest.raises(TypeError):
        parse_json_strict('{"a": 1}')  # type: ignore[arg-type]


def test_load_parses_and_validates() -> None:
    body = VALID["qinglong/offer-pull-request@v1"]
    assert load("qinglong/offer-pull-request@v1", json.dumps(body).encode()) == body
    dup = b'{"schema": "qinglong/error@v1", "error": "a", "error": "b", "reason": "c"}'
    with pytest.raises(ContractError) as info:
        load("qinglong/error@v1", dup)
    assert info.value.reason == "duplicate_key"
    # A body of another schema is refused by the `schema` const.
    with pytest.raises(ContractError):
        load(
            "qinglong/session-close-request@v1",
            json.dumps(VALID["qinglong/session-heartbeat-request@v1"]).encode(),
        )


# ---------------------------------------------------------------- field rules


@pytest.mark.parametrize(
    "bad",
    [
        U1.upper(),
        "{" + U1 + "}",
        U1.replace("-", ""),
        U1 + "\n",
        U1[:-1] + "g",
        " " + U1[1:],
    ],
)
def test_uuid_must_be_lowercase_canonical(bad: str) -> None:
    reject(
        "qinglong/session-close-request@v1",
        {**VALID["qinglong/session-close-request@v1"], "workerId": bad},
        "pattern" if len(bad) == 36 else None,
    )


def test_token_canonical_base64url() -> None:
    schema_id = "qinglong/offer-pull-request@v1"
    body = VALID[schema_id]
    for bad in [
        TOKEN[:-1] + "B",  # non-zero unused bits: decodes to the same bytes as another token
        TOKEN + "=",
        TOKEN[:-1],
        TOKEN[:-1] + "+",
        TOKEN.replace(TOKEN[0], "/", 1),
        TOKEN[:-1] + "A\n",
    ]:
        reject(schema_id, {**body, "leaseToken": bad})


@given(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
        min_size=43,
        max_size=43,
    )
)
def test_token_schema_accepts_exactly_canonical_encodings(token: str) -> None:
    raw = base64.urlsafe_b64decode(token + "=")
    canonical = base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == token
    body = {**VALID["qinglong/offer-pull-request@v1"], "leaseToken": token}
    errors = list(default_contract().validator("qinglong/offer-pull-request@v1").iter_errors(body))
    assert (not errors) == canonical


@given(st.binary(min_size=32, max_size=32))
def test_every_generated_token_is_accepted(raw: bytes) -> None:
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    validate(
        "qinglong/offer-pull-request@v1",
        {**VALID["qinglong/offer-pull-request@v1"], "leaseToken": token},
    )


@pytest.mark.parametrize(
    "bad", ["sha256:" + "AB" * 32, "sha256:" + "ab" * 31, "sha1:" + "ab" * 32, DIGEST + "\n"]
)
def test_digest_format(bad: str) -> None:
    reject("qinglong/session@v1", {**VALID["qinglong/session@v1"], "capabilitiesDigest": bad})


@pytest.mark.parametrize("bad", [1.0, NOW + 0.5, -1, 2**53, True, "1700000000000", None])
def test_times_are_integer_ms_in_safe_range(bad: object) -> None:
    reject("qinglong/session@v1", {**VALID["qinglong/session@v1"], "expiresAtMs": bad})


def test_time_bounds_inclusive() -> None:
    for ok in (0, 2**53 - 1):
        validate("qinglong/session@v1", {**VALID["qinglong/session@v1"], "expiresAtMs": ok})


def test_generation_starts_at_one() -> None:
    reject(
        "qinglong/session-close-request@v1",
        {**VALID["qinglong/session-close-request@v1"], "generation": 0},
        "minimum",
    )


def test_trailing_newline_never_matches_a_pattern() -> None:
    # Python's `$` matches before a final newline; the contract must not.
    reject("qinglong/error@v1", {**VALID["qinglong/error@v1"], "reason": "conflict\n"}, "pattern")
    caps = capabilities()
    caps["executors"] = ["remote-worker\n"]
    reject("qinglong/worker-capabilities@v1", caps, "pattern")


def test_strictness_holds_inside_a_reference_to_another_document() -> None:
    # A session-open request embeds worker-capabilities@v1 by a `$ref` to that
    # document's root: its strict integers and ECMA `$` apply there too
    # (jsonschema would otherwise switch to the plain draft class at that root).
    for field, bad in (("slots", 4.0), ("slots", True)):
        body = copy.deepcopy(VALID["qinglong/session-open-request@v1"])
        body["capabilities"][field] = bad
        reject("qinglong/session-open-request@v1", body, "type")
    body = copy.deepcopy(VALID["qinglong/session-open-request@v1"])
    body["capabilities"]["labels"] = {"region": "eu-1\n"}
    reject("qinglong/session-open-request@v1", body, "pattern")
    body = copy.deepcopy(VALID["qinglong/session-open-request@v1"])
    body["capabilities"]["executors"] = ["remote-worker\n"]
    reject("qinglong/session-open-request@v1", body, "pattern")


def test_error_codes_low_cardinality() -> None:
    for bad in ["Conflict", "session replaced", "a" * 65, "", "1abc"]:
        reject("qinglong/error@v1", {**VALID["qinglong/error@v1"], "reason": bad})


def test_error_detail_never_echoes_values() -> None:
    secret = "s3cr3t-VALUE-do-not-log"
    body = {**VALID["qinglong/offer-pull-request@v1"], "leaseToken": secret}
    err = reject("qinglong/offer-pull-request@v1", body)
    assert secret not in str(err) and err.detail.startswith("$.leaseToken")
    caps = capabilities()
    caps["labels"] = {f"key-{secret.lower()}\n": "v"}
    err = reject("qinglong/worker-capabilities@v1", caps)
    assert secret.lower() not in str(err)


def test_required_detail_names_the_missing_property() -> None:
    body = dict(VALID["qinglong/session@v1"])
    del body["heartbeatIntervalMs"]
    err = reject("qinglong/session@v1", body, "required")
    assert err.detail == "$: required (heartbeatIntervalMs)"


# ---------------------------------------------------------------- capabilities & command shapes


def test_capabilities_bounds() -> None:
    sid = "qinglong/worker-capabilities@v1"
    cases = {
        "executors": [[], [f"e{i}" for i in range(9)], ["a", "a"], ["Remote-Worker"], ["-x"]],
        "labels": [
            {f"k{i}": "v" for i in range(33)},
            {"Region": "x"},
            {"region": "a\tb"},
            {"region": "a\u0085b"},
            {"region": "x" * 129},
            {"region": ""},
            {"region": ["eu-1"]},
        ],
        "runtimes": [
            {f"r{i}": "1.0.0" for i in range(17)},
            {"python": "3.11"},
            {"python": "v3.11.0"},
            {"python": "03.11.0"},
            {"python": "3.11.0-01"},
            {"python": "^3.11.0"},
        ],
        "slots": [0, 257, 2.0, True, "2"],
    }
    for field, bads in cases.items():
        for bad in bads:
            reject(sid, {**capabilities(), field: bad})
    for field in ("executors", "labels", "runtimes", "slots"):
        reject(sid, {k: v for k, v in capabilities().items() if k != field}, "required")


def test_capabilities_edges_accepted() -> None:
    sid = "qinglong/worker-capabilities@v1"
    validate(sid, {**capabilities(), "executors": [f"e{i}" for i in range(8)]})
    validate(sid, {**capabilities(), "labels": {f"k{i}": "v" * 128 for i in range(32)}})
    validate(sid, {**capabilities(), "labels": {"topology.kubernetes.io/zone": "区域 1"}})
    validate(sid, {**capabilities(), "runtimes": {"node": "20.11.1-rc.1+build.7"}, "slots": 256})


def test_command_shape() -> None:
    sid = "qinglong/command@v1"
    base = VALID[sid]
    for field, bad in [
        ("argv", []),
        ("argv", ["x"] * 257),
        ("argv", ["a\x00b"]),
        ("argv", [1]),
        ("env", {"1BAD": "x"}),
        ("env", {"A-B": "x"}),
        ("env", {"A": "\x00"}),
        ("cwd", ""),
        ("timeoutS", 0),
        ("timeoutS", 604801),
        ("timeoutS", 60.0),
    ]:
        reject(sid, {**base, field: bad})
    validate(sid, {**base, "argv": ["sh", "-c", "echo a\necho b"], "timeoutS": 604800})


def test_command_placement_shape() -> None:
    sid = "qinglong/command@v1"
    base = VALID[sid]
    bad_placements = [
        {"required": {"executors": []}},
        {"required": {"executors": ["a", "a"]}},
        {"required": {"labels": {"region": []}}},
        {"required": {"labels": {"region": ["a", "a"]}}},
        {"required": {"labels": {"region": ["x"] * 33}}},
        {"required": {"labels": {"region": 1}}},
        {"required": {"runtimes": {"python": "1 || 2"}}},  # '|' not in the range alphabet
        {"required": {"nope": {}}},
        {"preferred": [{"weight": 0}]},
        {"preferred": [{"weight": 101}]},
        {"preferred": [{"labels": {}}]},
        {"preferred": [{"weight": 1}] * 17},
        {"preferred": [{"weight": 1, "extra": 1}]},
        {"other": 1},
    ]
    for placement in bad_placements:
        reject(sid, {**base, "placement": placement})
    validate(sid, {**base, "placement": {}})
    validate(sid, {**base, "placement": {"preferred": [{"weight": 1}] * 16}})


# ---------------------------------------------------------------- offer


def test_offer_idle_valid_and_reasons() -> None:
    sid = "qinglong/remote-execution-offer@v1"
    for reason in ("no_candidates", "placement_mismatch", "capacity_full", "contention"):
        validate(sid, {**idle(), "reason": reason})
    reject(sid, {**idle(), "reason": "busy"})
    doc = idle()
    doc["stats"]["mismatches"]["secret"] = 1
    reject(sid, doc)
    reject(sid, {**idle(), "offerId": U1})  # idle never carries offered fields


def test_offer_never_carries_token_or_token_digest() -> None:
    sid = "qinglong/remote-execution-offer@v1"
    for field in ("leaseToken", "tokenDigest"):
        reject(sid, {**offered(), field: TOKEN})
        doc = offered()
        doc["lease"][field] = TOKEN
        reject(sid, doc)


def test_offer_placement_optional_or_null_for_old_revisions() -> None:
    sid = "qinglong/remote-execution-offer@v1"
    doc = offered()
    del doc["executionRevision"]["placement"]
    validate(sid, doc)
    doc["executionRevision"]["placement"] = None
    validate(sid, doc)
    # an authored (non-normalized) placement is not what an offer carries
    doc["executionRevision"]["placement"] = {"required": {"labels": {"a": "b"}}}
    reject(sid, doc)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("executionRevision", "kind"), "qinglong/command@v2"),
        (("executionRevision", "executor"), "remote-worker"),
        (("executionRevision", "spec", "placement"), {}),
        (("executionRevision", "spec", "timeoutS"), 0),
        (("lease", "leaseGeneration"), 0),
        (("lease", "leaseVersion"), 1.5),
        (("candidate", "priority"), 40000),
        (("placementScore",), -1),
        (("placementScore",), 1601),
        (("target", "generation"), "3"),
        (("status",), "conflict"),
        (("executionRevision", "placement", "required", "runtimes"), {"python": ["^3.11"]}),
        (("executionRevision", "placement", "required", "labels"), {"a": "b"}),
    ],
)
def test_offer_field_rules(path: tuple[str, ...], value: object) -> None:
    doc = offered()
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    reject("qinglong/remote-execution-offer@v1", doc)


def test_offer_missing_lease_field_refused() -> None:
    for field in lease_fields():
        doc = offered()
        del doc["lease"][field]
        reject("qinglong/remote-execution-offer@v1", doc)


# ---------------------------------------------------------------- lease & session bodies


def test_lease_bodies() -> None:
    validate("qinglong/lease@v1", {**VALID["qinglong/lease@v1"], "startedAtMs": None})
    body = {k: v for k, v in VALID["qinglong/lease@v1"].items() if k != "cancelRequested"}
    validate("qinglong/lease@v1", body)
    reject("qinglong/lease@v1", {**body, "state": "dispatching"})
    reject("qinglong/lease@v1", {k: v for k, v in body.items() if k != "startedAtMs"}, "required")
    complete = VALID["qinglong/lease-complete-request@v1"]
    for code in (-(2**31), 2**31 - 1):
        validate("qinglong/lease-complete-request@v1", {**complete, "exitCode": code})
    for bad in (
        {"exitCode": 2**31},
        {"exitCode": -(2**31) - 1},
        {"outcome": "lost"},
        {"reason": "x" * 65},
    ):
        reject("qinglong/lease-complete-request@v1", {**complete, **bad})
    minimal = {k: v for k, v in complete.items() if k not in ("exitCode", "reason")}
    validate("qinglong/lease-complete-request@v1", minimal)
    ack = VALID["qinglong/lease-ack-request@v1"]
    for phase in ("starting", "running", "start_failed"):
        validate("qinglong/lease-ack-request@v1", {**ack, "phase": phase, "reason": "spawn_failed"})
    reject("qinglong/lease-ack-request@v1", {**ack, "phase": "succeeded"})
    # Every lease request carries the version the worker last saw (SPEC §7).
    for schema_id in (
        "qinglong/lease-ack-request@v1",
        "qinglong/lease-heartbeat-request@v1",
        "qinglong/lease-complete-request@v1",
        "qinglong/lease-log-request@v1",
    ):
        body = VALID[schema_id]
        reject(schema_id, {k: v for k, v in body.items() if k != "leaseVersion"}, "required")
        for bad in (0, -1, 2**53, "3", 1.5, None, True):
            reject(schema_id, {**body, "leaseVersion": bad})


def test_live_log_bodies() -> None:
    """SPEC §15.1, §15.2, §11: the log chunk, its answer, the log_offset error's
    offset, and the completion result's logBytes and limits."""
    log = VALID["qinglong/lease-log-request@v1"]
    validate("qinglong/lease-log-request@v1", {**log, "offset": 0, "chunk": ""})
    validate("qinglong/lease-log-request@v1", {**log, "chunk": "€" * 21845 + "a"})
    for bad in (
        {"offset": -1},
        {"offset": 2**53},
        {"offset": "0"},
        {"chunk": "a\x00b"},
        {"chunk": "x" * 65537},
        {"chunk": None},
    ):
        reject("qinglong/lease-log-request@v1", {**log, **bad})
    for missing in ("offset", "chunk"):
        reject(
            "qinglong/lease-log-request@v1",
            {k: v for k, v in log.items() if k != missing},
            "required",
        )
    answer = VALID["qinglong/lease-log@v1"]
    reject(
        "qinglong/lease-log@v1", {k: v for k, v in answer.items() if k != "truncated"}, "required"
    )
    reject("qinglong/lease-log@v1", {**answer, "storedBytes": -1})
    error = {"schema": "qinglong/error@v1", "error": "conflict", "reason": "log_offset"}
    validate("qinglong/error@v1", {**error, "offset": 7, "detail": {"offset": 7}})
    reject("qinglong/error@v1", {**error, "offset": -1})
    complete = VALID["qinglong/lease-complete-request@v1"]
    result = complete["result"]
    for good in (
        {k: v for k, v in result.items() if k not in ("logBytes", "limits")},
        {
            **result,
            "limits": {**result["limits"], "mechanism": "cgroup", "uid": None, "exceeded": []},
        },
    ):
        validate("qinglong/lease-complete-request@v1", {**complete, "result": good})
    limits = result["limits"]
    for bad in (
        {"logBytes": -1},
        {"logBytes": None},
        {"limits": {**limits, "mechanism": "docker"}},
        {"limits": {**limits, "uid": 2**32}},
        {"limits": {**limits, "exceeded": ["memory", "memory"]}},
        {"limits": {**limits, "exceeded": ["cpu"]}},
        {"limits": {k: v for k, v in limits.items() if k != "maxOpenFiles"}},
        {"limits": {**limits, "extra": 1}},
    ):
        reject("qinglong/lease-complete-request@v1", {**complete, "result": {**result, **bad}})


def test_session_open_validates_nested_capabilities() -> None:
    body = copy.deepcopy(VALID["qinglong/session-open-request@v1"])
    body["capabilities"]["runtimes"] = {"python": "3.11"}
    err = reject("qinglong/session-open-request@v1", body)
    assert err.detail.startswith("$.capabilities.runtimes")


# ---------------------------------------------------------------- canonical


def test_canonical_bytes_rfc8785() -> None:
    assert canonical_bytes({"b": [1, "é"], "a": {"d": True, "c": None}}) == (
        '{"a":{"c":null,"d":true},"b":[1,"é"]}'.encode()
    )
    assert canonical_bytes({"x": 1.0, "y": 1e21}) == b'{"x":1,"y":1e+21}'


def test_sha256_digest_format() -> None:
    assert sha256_digest(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert sha256_digest(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()


def test_content_digest_omits_absent_placement() -> None:
    spec = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 1}
    data, digest = content_digest("qinglong/command@v1", "remote_worker", spec, None)
    assert b"placement" not in data
    assert data.startswith(b'{"executor":"remote_worker","kind":"qinglong/command@v1","spec":')
    assert digest == sha256_digest(data)
    with_placement, other = content_digest(
        "qinglong/command@v1", "remote_worker", spec, {"required": {}}
    )
    assert b'"placement":{"required":{}}' in with_placement and other != digest


# ---------------------------------------------------------------- import cost


def test_import_is_cheap_and_server_free() -> None:
    code = (
        "import sys, qinglong.schemas.contract, qinglong.schemas.canonical\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported eagerly'\n"
        "qinglong.schemas.contract.parse_json_strict(b'{}')\n"
        "qinglong.schemas.contract.validate('qinglong/error@v1', "
        "{'schema': 'qinglong/error@v1', 'error': 'a', 'reason': 'b'})\n"
        "bad = [m for m in sys.modules\n"
        "       if m.split('.')[0] in ('aiohttp', 'psycopg') or m.startswith('qinglong.service')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_contract_instances_are_independent() -> None:
    a, b = Contract(), Contract()
    assert a.validator("qinglong/error@v1") is not b.validator("qinglong/error@v1")
    assert a.validator("qinglong/error@v1") is a.validator("qinglong/error@v1")
    assert default_contract() is default_contract()


def test_offer_error_reported_inside_the_intended_branch() -> None:
    doc = offered()
    del doc["lease"]["offerId"]
    err = reject("qinglong/remote-execution-offer@v1", doc, "required")
    assert err.detail == "$.lease: required (offerId)"
    doc = idle()
    doc["stats"]["races"] = 1025  # pages x pageSize caps: 16 x 64
    err = reject("qinglong/remote-execution-offer@v1", doc, "maximum")
    assert err.detail == "$.stats.races: maximum"
