"""OpenAPI 3.1 description of the worker ingress, generated from `schemas/*.json`.

    python -m qinglong.service.openapi            # (re)write schemas/openapi.json
    python -m qinglong.service.openapi --check    # exit 1 when the committed file is stale

The JSON Schema files stay the contract; this document only bundles them. Every
schema file becomes one `components/schemas` entry (named like its file, without
`.json`), its `$id`/`$schema` dropped and every `$ref` rewritten to a pointer
inside this document, so tools that resolve only in-document references
(schemathesis, spec validators) need nothing else. Paths come from the same
route table and `Endpoint`s the ingress serves, so the two cannot drift apart
unnoticed (tests/py/test_openapi.py compares them with the live router).
"""

from __future__ import annotations

import argparse
import json
import posixpath
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qinglong import schemas
from qinglong.schemas.contract import SCHEMA_IDS, SchemaId, default_contract, schema_file_name
from qinglong.service import credential_rotation, routes, views

OPENAPI_VERSION = "3.1.0"
DOCUMENT_PATH = Path(schemas.__file__).parent / "openapi.json"
COMPONENT_PREFIX = "#/components/schemas/"
_UNSUPPORTED_KEYWORDS = ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef")


@dataclass(frozen=True)
class Operation:
    path: str
    endpoint: views.Endpoint
    summary: str
    conflicts: tuple[str, ...]  # 409 reasons this path can answer (empty: never 409)
    lease_with_cancel: bool = False


_SESSION_CONFLICTS = ("session_not_found", "session_replaced", "session_expired", "session_closed")
_FENCE_CONFLICTS = (
    "offer_foreign",
    "token_mismatch",
    "session_replaced",
    "session_draining",
    "lease_expired",
    "lease_terminal",
    "attempt_changed",
    "revision_drift",
)
_LEASE_CONFLICTS = (*_FENCE_CONFLICTS, "stale_lease_version", "illegal_transition")

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        routes.SESSIONS,
        views.SESSION_OPEN,
        "Open a session (replaces an active one with generation + 1)",
        (),
    ),
    Operation(
        routes.SESSIONS_HEARTBEAT,
        views.SESSION_HEARTBEAT,
        "Extend the session lease",
        _SESSION_CONFLICTS,
    ),
    Operation(
        routes.SESSIONS_CLOSE, views.SESSION_CLOSE, "Close the session", _SESSION_CONFLICTS[:2]
    ),
    Operation(
        routes.OFFERS_PULL,
        views.OFFER_PULL,
        "Claim (or recover) one offer, or learn why there is none",
        (*_FENCE_CONFLICTS, *_SESSION_CONFLICTS, "capabilities_mismatch"),
    ),
    Operation(
        routes.OFFERS_PULL_BATCH,
        views.OFFER_BATCH_PULL,
        "Claim or recover 1-16 offers of one session (SPEC 18.1), each by the rules "
        "of a single pull, at most the session's free slots; `idle` says why an "
        "offer id was not claimed, `conflicts` names ids refused by their replay "
        "fences",
        (*_SESSION_CONFLICTS, "session_draining", "capabilities_mismatch"),
    ),
    Operation(
        routes.LEASES_ACK,
        views.LEASE_ACK,
        "Acknowledge starting / running / start_failed",
        _LEASE_CONFLICTS,
    ),
    Operation(
        routes.LEASES_HEARTBEAT,
        views.LEASE_HEARTBEAT,
        "Extend a started lease; answers whether the run was cancelled",
        _LEASE_CONFLICTS,
        lease_with_cancel=True,
    ),
    Operation(
        routes.LEASES_COMPLETE,
        views.LEASE_COMPLETE,
        "Complete a started lease (succeeded / failed / cancelled)",
        _LEASE_CONFLICTS,
    ),
    Operation(
        routes.LEASES_BATCH,
        views.LEASE_BATCH,
        "Up to 32 ACK / heartbeat / complete / log calls of one session (SPEC 18.3): "
        "each item is its single endpoint's body and is answered {status, body} as "
        "that endpoint would; 400 batch_session_mismatch: an item names another "
        "worker, session or generation; a refused credential (401/403) refuses "
        "the whole batch at its first item",
        (),
    ),
    Operation(
        credential_rotation.PATH,
        credential_rotation.CREDENTIAL_ROTATE,
        "Replace the worker's credential (SPEC 16.2); the answer holds the new one",
        (),
    ),
    Operation(
        routes.LEASES_LOG,
        views.LEASE_LOG,
        "Append a chunk of a started lease's output to its live log at the stored "
        "length (the lease version is a fence, not bumped). 409 log_offset: the "
        "chunk is neither at the stored length nor a repeat of stored bytes; the "
        "error's `offset` is the stored length, where the worker resumes",
        (*_LEASE_CONFLICTS, "log_offset"),
    ),
    Operation(
        routes.LEASES_SECRETS,
        views.LEASE_SECRETS,
        "The secret values of a started lease (after its starting ACK; the lease "
        "version is not changed). 503 secrets_unavailable: this replica has no "
        "key-encryption key, or it does not open the stored keys",
        (*_FENCE_CONFLICTS, "stale_lease_version", "not_started", "pool_revoked", "secret_missing"),
    ),
)


# ------------------------------------------------------------------ bundling


def component_name(schema_id: str) -> str:
    return schema_file_name(schema_id).removesuffix(".json")


def component_ref(schema_id: str) -> dict[str, str]:
    return {"$ref": COMPONENT_PREFIX + component_name(schema_id)}


def _resolve(ref: str, base_id: str) -> str:
    """`defs@v1#/$defs/uuid` inside `qinglong/lease@v1` -> a pointer in this document."""
    target, _, fragment = ref.partition("#")
    target_id = base_id if target == "" else posixpath.join(posixpath.dirname(base_id), target)
    if target_id not in SCHEMA_IDS:
        raise ValueError(f"{base_id}: $ref to unknown schema {ref!r}")
    if fragment and not fragment.startswith("/"):
        raise ValueError(f"{base_id}: only JSON pointer fragments are supported ({ref!r})")
    return COMPONENT_PREFIX + component_name(target_id) + fragment


def _bundle(node: Any, base_id: str, top: bool = False) -> Any:
    if isinstance(node, list):
        return [_bundle(item, base_id) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if top and key in ("$id", "$schema"):
            continue  # the dialect is the document's; an $id would re-base every "#/..."
        if key in _UNSUPPORTED_KEYWORDS:
            raise ValueError(f"{base_id}: {key} inside a schema cannot be bundled")
        out[key] = _resolve(value, base_id) if key == "$ref" else _bundle(value, base_id)
    return out


def bundled_schemas() -> dict[str, Any]:
    contract = default_contract()
    return {
        component_name(sid): _bundle(contract.schema(sid), sid, top=True)
        for sid in sorted(contract.schema_ids)
    }


# ------------------------------------------------------------------ responses

_ERRORS: dict[int, tuple[str, str]] = {
    400: (
        "BadRequest",
        "Malformed or schema-invalid body (invalid_json, duplicate_key, "
        "schema_invalid, invalid_input, limit_exceeded, invalid_semver, ...).",
    ),
    401: (
        "Unauthorized",
        "No, malformed, unknown, wrong or revoked credential "
        "(missing_credential, malformed_credential, invalid_credential: "
        "an unknown id or a wrong secret, alike; revoked_credential).",
    ),
    403: (
        "Forbidden",
        "Certificate, credential and body workerId do not name the same "
        "worker (identity_mismatch, worker_mismatch), or an operator "
        "disabled the worker (worker_disabled).",
    ),
    408: ("RequestTimeout", "The body did not arrive in time (body_timeout)."),
    409: ("Conflict", "A fence moved; `reason` is the conflict category."),
    413: (
        "PayloadTooLarge",
        "Request body over 4 KiB, 16 KiB for /v1/leases/complete, "
        "388 KiB for /v1/leases/log (body_too_large).",
    ),
    429: ("TooManyRequests", "The worker polls faster than allowed (too_many_requests)."),
    503: (
        "Unavailable",
        "Database or offer service unavailable (database_unavailable, "
        "database_timeout, statement_timeout, database_error), or the "
        "database returned a projection that fails its schema "
        "(invalid_projection); /v1/leases/secrets without a usable "
        "key-encryption key (secrets_unavailable).",
    ),
}
_RETRY_AFTER = (429, 503)


def _error_responses() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, (name, description) in _ERRORS.items():
        response: dict[str, Any] = {
            "description": description,
            "content": {"application/json": {"schema": component_ref(SchemaId.ERROR)}},
        }
        if status in _RETRY_AFTER:
            response["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before retrying.",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 86400},
                }
            }
        out[name] = response
    return out


def _success_schema(op: Operation) -> dict[str, Any]:
    ref = component_ref(op.endpoint.response_schema)
    if op.lease_with_cancel:
        return {"allOf": [ref, {"required": ["cancelRequested"]}]}
    return ref


def _operation(op: Operation) -> dict[str, Any]:
    endpoint = op.endpoint
    success = str(endpoint.success_status)
    responses: dict[str, Any] = {
        success: {
            "description": f"`{endpoint.response_schema.value}`",
            "content": {"application/json": {"schema": _success_schema(op)}},
        }
    }
    for status, (name, _) in _ERRORS.items():
        if status != 409:
            responses[str(status)] = {"$ref": f"#/components/responses/{name}"}
        elif op.conflicts:
            # Per path: the categories this operation can actually answer.
            responses["409"] = {
                "description": "Conflict: " + ", ".join(op.conflicts) + ".",
                "content": {"application/json": {"schema": component_ref(SchemaId.ERROR)}},
            }
    return {
        "operationId": endpoint.name.replace(".", "_"),
        "summary": op.summary,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": component_ref(endpoint.request_schema)}},
        },
        "responses": responses,
    }


# ------------------------------------------------------------------ document


def build_document() -> dict[str, Any]:
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "QingLong Dispatch worker ingress",
            "version": "1",
            "description": "Workers pull offers and drive their leases over mutual TLS 1.3 "
            "with a bearer credential (SPEC §5). Request bodies are at most "
            "4 KiB (a lease completion, which carries the run's result, "
            "16 KiB; a live log chunk, 64 KiB of output JSON-escaped, "
            "388 KiB), responses at most 128 KiB. Generated by "
            "`python -m qinglong.service.openapi` from schemas/*.json.",
        },
        "security": [{"workerCertificate": [], "workerCredential": []}],
        "paths": {op.path: {"post": _operation(op)} for op in OPERATIONS},
        "components": {
            "securitySchemes": {
                "workerCertificate": {
                    "type": "mutualTLS",
                    "description": "Client certificate from the worker CA naming the worker "
                    "as SAN URI urn:qinglong:worker:<workerId>.",
                },
                "workerCredential": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "ql3w_<credentialId>_<secret>",
                    "description": "Worker credential; must belong to the certificate's worker.",
                },
            },
            "responses": _error_responses(),
            "schemas": bundled_schemas(),
        },
    }


def render() -> str:
    return json.dumps(build_document(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m qinglong.service.openapi",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=DOCUMENT_PATH)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the file differs from the generated one",
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python -m qinglong.service.openapi", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(str(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
