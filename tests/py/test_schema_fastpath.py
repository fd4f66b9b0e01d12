"""schemas.fastpath: the fast schema checks agree with jsonschema.

Only a "proven valid" verdict skips jsonschema, so the property that matters is
that every VALID (and every INVALID, which oneOf relies on) matches what
``qinglong.schemas.contract`` (jsonschema) says about the same document.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qinglong.schemas import fastpath as fp
from qinglong.schemas.contract import ContractError, SchemaId, default_contract
from qinglong.worker.config import default_capabilities
from qinglong.worker.fsio import uuid4_text
from qinglong.worker.offer_validation import parse_offer_response
from tests.py import test_contract as contract_samples

OFFER = SchemaId.REMOTE_EXECUTION_OFFER


def idle_doc() -> dict:
    return contract_samples.idle()


def session_doc() -> dict:
    return {
        "schema": "qinglong/session@v1",
        "workerId": str(uuid.uuid4()),
        "sessionId": str(uuid.uuid4()),
        "generation": 3,
        "expiresAtMs": 1_700_000_060_000,
        "capabilitiesDigest": "sha256:" + "ab" * 32,
        "heartbeatIntervalMs": 20_000,
    }


def capabilities_doc() -> dict:
    doc = default_capabilities()
    doc["labels"] = {"region": "eu-west", "gpu": "none"}
    doc["runtimes"] = {"python": "3.11.7", "node": "20.1.0-rc.1+build.5"}
    return doc


SAMPLES = [(OFFER, idle_doc), (SchemaId.SESSION, session_doc),
           (SchemaId.WORKER_CAPABILITIES, capabilities_doc)]  # fmt: skip
# Every body the ingress checks on every request and response (service/views.py):
# an offered answer, the requests, the session and lease answers, errors.
BODIES = [(schema_id, lambda s=schema_id: copy.deepcopy(contract_samples.VALID[s]))
          for schema_id in contract_samples.BODY_IDS]  # fmt: skip


def contract_valid(schema_id: str, doc: object) -> bool:
    try:
        default_contract().validate(schema_id, doc)
    except ContractError:
        return False
    return True


@pytest.mark.parametrize(("schema_id", "make"), SAMPLES)
def test_the_idle_path_documents_are_proven_valid(schema_id, make):
    # Without this verdict every idle pull would load jsonschema after all.
    assert fp.check(schema_id, make()) == fp.VALID
    assert contract_valid(schema_id, make())


# Values that probe the edges the contract cares about: strict integers (1.0 and
# True are not integers), ECMA `$` (no trailing newline), lengths, bounds.
ODD_VALUES = [None, True, False, 0, 1, -1, 1.0, 2.5, 3_600_000, 3_600_001, 2**53, "",
              "x", "no_candidates", "contention\n", "idle", "offered", "sha256:" + "ab" * 32,
              "sha256:" + "ab" * 32 + "\n", str(uuid.uuid4()), str(uuid.uuid4()).upper(),
              "remote-worker", "remote-worker\n", "a" * 129, [], ["remote-worker"],
              ["remote-worker", "remote-worker"], [1], {}, {"k": "v"}, {"Bad Key": "v"},
              {"python": "3.11"}, {"python": "3.11.0\n"}]  # fmt: skip


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out.extend(_paths(value, (*prefix, i)))
    return out


def _mutate(doc: dict, path: tuple, action: str, value: object) -> object:
    if not path:
        return value if action == "set" else doc
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent["extra"] = value
    else:
        parent[last] = value
    return doc


@pytest.mark.parametrize(("schema_id", "make"), BODIES, ids=[s for s, _ in BODIES])
def test_every_wire_body_is_proven_valid(schema_id, make):
    # Without this verdict the ingress would run jsonschema on every request and
    # response after all (0.8 ms of CPU per offered answer).
    assert fp.check(schema_id, make()) == fp.VALID
    assert contract_valid(schema_id, make())


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_verdicts_agree_with_jsonschema(data):
    schema_id, make = data.draw(st.sampled_from(SAMPLES + BODIES))
    doc: object = make()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        action = data.draw(st.sampled_from(["set", "delete", "add"]))
        doc = _mutate(doc, path, action, data.draw(st.sampled_from(ODD_VALUES)))
    verdict = fp.check(schema_id, doc)
    if verdict != fp.UNKNOWN:
        assert (verdict == fp.VALID) == contract_valid(schema_id, doc), doc


def test_an_idle_answer_marked_offered_is_proven_invalid():
    doc = idle_doc()
    doc["status"] = "offered"
    assert fp.check(OFFER, doc) == fp.INVALID


@pytest.mark.parametrize(
    "change",
    [
        {"retryAfterMs": 1.0},
        {"retryAfterMs": True},
        {"reason": "no_candidates\n"},
        {"extra": 1},
        {"status": "offered"},
    ],
)
def test_an_invalid_idle_answer_is_still_refused(change):
    doc = dict(idle_doc(), **change)
    with pytest.raises(ContractError) as info:
        parse_offer_response(json.dumps(doc).encode())
    assert info.value.reason == "schema_invalid"


def test_duplicate_keys_are_still_refused_on_the_idle_path():
    body = json.dumps(idle_doc()).encode()[:-1] + b', "status": "idle"}'
    with pytest.raises(ContractError) as info:
        parse_offer_response(body)
    assert info.value.reason == "duplicate_key"


def test_unmodelled_keywords_fall_back_to_jsonschema(monkeypatch):
    schema = {"$schema": fp.DRAFT, "$id": "qinglong/test@v1", "type": "string", "format": "uuid"}
    monkeypatch.setitem(fp._documents, "qinglong/test@v1", schema)
    assert fp.check("qinglong/test@v1", "x") == fp.UNKNOWN


def _modules_after(code: str) -> set[str]:
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


HEAVY = ("jsonschema", "referencing", "rpds", "attrs", "jsonschema_specifications",
         "typing_extensions", "email", "http", "logging", "uuid")  # fmt: skip


def test_idle_path_loads_neither_jsonschema_nor_http_client():
    """What an idle worker does over and over, in a fresh interpreter (docs/EDGE.md)."""
    mods = _modules_after(
        f"""
        import json
        from qinglong.worker.config import default_capabilities, validate_capabilities
        from qinglong.worker.offer_validation import parse_offer_response
        from qinglong.worker.session import _parse_session
        import qinglong.worker.runner, qinglong.worker.transport
        validate_capabilities(default_capabilities())
        parse_offer_response(json.dumps({idle_doc()!r}).encode())
        _parse_session(json.dumps({session_doc()!r}).encode())
        """
    )
    loaded = {m.split(".")[0] for m in mods}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_malformed_answer_loads_jsonschema_for_its_verdict():
    mods = _modules_after(
        f"""
        import json
        from qinglong.schemas.contract import ContractError
        from qinglong.worker.offer_validation import parse_offer_response
        doc = dict({idle_doc()!r}, status="offered")
        try:
            parse_offer_response(json.dumps(doc).encode())
        except ContractError:
            pass
        else:
            raise SystemExit("a malformed offer was accepted")
        """
    )
    assert "jsonschema" in mods


def test_a_well_formed_offer_is_accepted_without_jsonschema():
    mods = _modules_after(
        f"""
        import json
        from qinglong.worker.offer_validation import parse_offer_response
        assert parse_offer_response(json.dumps({contract_samples.offered()!r}).encode())
        """
    )
    assert not {m.split(".")[0] for m in mods} & {"jsonschema", "referencing", "rpds"}


def test_uuid4_text_is_a_canonical_version_4_uuid():
    for _ in range(200):
        text = uuid4_text()
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
