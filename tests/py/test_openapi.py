"""schemas/openapi.json: generated, valid OpenAPI 3.1, and the same routes the app serves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from qinglong.schemas.contract import SchemaId
from qinglong.service import openapi
from qinglong.service.app import build_state, create_app
from qinglong.service.audit import AuditLog
from qinglong.service.config import IngressConfig
from tests.py.test_contract import VALID

ERROR_STATUSES = {"400", "401", "403", "413", "429", "503"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(openapi.DOCUMENT_PATH.read_text(encoding="utf-8"))


def _app_routes() -> set[tuple[str, str]]:
    config = IngressConfig(dsn="host=none", cert_file="x", key_file="x", client_ca_file="x")
    app = create_app(build_state(config, AuditLog(lambda _line: None)))
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, ref
        node = node[part]
    return node


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


def test_committed_document_is_the_generated_one(document):
    text = openapi.DOCUMENT_PATH.read_text(encoding="utf-8")
    assert text == openapi.render(), "stale: run `python -m qinglong.service.openapi`"
    assert openapi.main(["--check"]) == 0


def test_document_is_valid_openapi_3_1(document):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document)
    assert document["openapi"].startswith("3.1.")
    schemes = document["components"]["securitySchemes"]
    assert schemes["workerCertificate"]["type"] == "mutualTLS"
    assert (schemes["workerCredential"]["type"], schemes["workerCredential"]["scheme"]) == (
        "http",
        "bearer",
    )
    assert document["security"] == [{"workerCertificate": [], "workerCredential": []}]


def test_every_reference_resolves_inside_the_document(document):
    refs = _refs(document)
    assert refs
    for ref in refs:
        _resolve(document, ref)
    for schema in document["components"]["schemas"].values():
        assert "$id" not in json.dumps(schema)  # an $id would re-base the "#/..." pointers


def test_routes_match_the_app_both_ways(document):
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item
    }
    assert documented == _app_routes()


def test_every_operation_names_its_bodies_and_error_statuses(document):
    for path, item in document["paths"].items():
        op = item["post"]
        request = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert request.endswith("-request.v1"), path
        statuses = set(op["responses"])
        success = {s for s in statuses if s.startswith("2")}
        assert len(success) == 1, path
        assert ERROR_STATUSES <= statuses, path
        # Opening a session and rotating a credential move no fence: never 409; a
        # lease batch answers each item's 409 inside its 200 body (SPEC 18.3).
        assert ("409" in statuses) == (
            path not in ("/v1/sessions", "/v1/credentials/rotate", "/v1/leases/batch")
        ), path
        for status in statuses - success:
            response = op["responses"][status]
            if "$ref" in response:
                response = _resolve(document, response["$ref"])
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/qinglong.error.v1"}, (path, status)
            if status in ("429", "503"):
                assert response["headers"]["Retry-After"]["required"] is True
    heartbeat = document["paths"]["/v1/leases/heartbeat"]["post"]["responses"]["200"]
    assert heartbeat["content"]["application/json"]["schema"]["allOf"][1] == {
        "required": ["cancelRequested"]
    }


def _bundled_validator(document: dict[str, Any], schema_id: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    uri = "urn:qinglong:openapi"
    registry = Registry().with_resource(uri, DRAFT202012.create_resource(document))
    name = openapi.component_name(schema_id)
    return Draft202012Validator({"$ref": f"{uri}#/components/schemas/{name}"}, registry=registry)


@pytest.mark.parametrize("schema_id", sorted(VALID))
def test_bundled_schemas_judge_like_the_contract(document, schema_id):
    validator = _bundled_validator(document, schema_id)
    body = VALID[schema_id]
    assert list(validator.iter_errors(body)) == []
    assert list(validator.iter_errors({**body, "extra": 1}))
    if "schema" in body:
        assert list(validator.iter_errors({**body, "schema": "qinglong/nope@v1"}))


def test_every_schema_file_is_a_component(document):
    assert set(document["components"]["schemas"]) == {
        openapi.component_name(s.value) for s in SchemaId
    }
