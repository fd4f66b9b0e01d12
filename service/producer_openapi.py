"""OpenAPI 3.1 document of the producer API (`GET /v1/openapi.json`, SPEC §13.4).

Built from the same schema files as the worker ingress's document
(service/openapi.py bundles them into `components/schemas`) and the producer's
route table, so the served document and the router cannot drift apart
(tests/py/test_producer_api.py compares them).
"""

from __future__ import annotations

import json
from typing import Any

from qinglong.schemas.contract import SchemaId
from qinglong.service import producer_logs
from qinglong.service import producer_views as views
from qinglong.service.openapi import OPENAPI_VERSION, bundled_schemas, component_ref

_ERRORS: dict[int, str] = {
    400: "Malformed query or body (invalid_json, duplicate_key, invalid_input, "
    "limit_exceeded, out_of_bounds); `detail.field` names the field. Nothing written.",
    401: "No, malformed, unknown, wrong, revoked or expired token (token_missing, "
    "token_invalid: one answer for all).",
    403: "The token lacks the scope of this call (scope_missing).",
    404: "Unknown run or task, or another project's: existence is not disclosed (not_found).",
    413: "Request body too large (body_too_large).",
    503: "Database unavailable (database_unavailable, database_timeout, statement_timeout, "
    "database_error).",
}


def _error(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": _ERRORS[status],
        "content": {"application/json": {"schema": component_ref(SchemaId.ERROR)}},
    }
    if status == 503:
        response["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "required": True,
                "schema": {"type": "integer", "minimum": 1, "maximum": 86400},
            }
        }
    return response


def _operation(
    op_id: str,
    summary: str,
    scope: str,
    success: int,
    response: SchemaId,
    *,
    request: SchemaId | None = None,
    optional_body: bool = False,
    parameters: list[dict[str, Any]] | None = None,
    conflict: bool = False,
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        str(success): {
            "description": f"`{response.value}`",
            "content": {"application/json": {"schema": component_ref(response)}},
        }
    }
    for status in _ERRORS:
        if status != 413 or request is not None or optional_body:
            responses[str(status)] = _error(status)
    if conflict:
        responses["409"] = {
            "description": "illegal_transition (only failed or cancelled "
            "runs are retried), task_disabled.",
            "content": {"application/json": {"schema": component_ref(SchemaId.ERROR)}},
        }
    out: dict[str, Any] = {
        "operationId": op_id,
        "summary": f"{summary} (scope `{scope}`)",
        "responses": responses,
    }
    if parameters:
        out["parameters"] = parameters
    if request is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": component_ref(request)}},
        }
    elif optional_body:
        out["requestBody"] = {
            "required": False,
            "description": "none, or `{}`",
            "content": {
                "application/json": {
                    "schema": {"type": "object", "additionalProperties": False, "maxProperties": 0}
                }
            },
        }
    return out


_RUN_ID = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "format": "uuid"},
}
_LIST_PARAMETERS = [
    {
        "name": "task",
        "in": "query",
        "required": False,
        "description": 'a task id or "<project>/<name>" of the token\'s project; '
        "without it, every task of the project",
        "schema": {"type": "string", "maxLength": 257},
    },
    {
        "name": "state",
        "in": "query",
        "required": False,
        "description": "repeatable or comma-separated: queued, dispatching, starting, running, "
        "succeeded, failed, cancelled",
        "schema": {"type": "string"},
    },
    {
        "name": "after",
        "in": "query",
        "required": False,
        "description": "the `next` of the previous page",
        "schema": {"type": "string"},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    },
]


_LOG_PARAMETERS = [
    _RUN_ID,
    {
        "name": "offset",
        "in": "query",
        "required": False,
        "description": "byte offset in the UTF-8 log to read from (a page's nextOffset)",
        "schema": {"type": "integer", "minimum": 0, "default": 0},
    },
    {
        "name": "attempt",
        "in": "query",
        "required": False,
        "description": "attempt number; without it, the run's latest attempt",
        "schema": {"type": "integer", "minimum": 1},
    },
    {
        "name": "follow",
        "in": "query",
        "required": False,
        "description": "1: stream (application/x-ndjson) until the attempt ends",
        "schema": {"type": "string", "enum": ["0", "1", "true", "false"], "default": "0"},
    },
]


def _log_operation() -> dict[str, Any]:
    operation = _operation(
        "run_log",
        "An attempt's live log (SPEC 15.3)",
        "log",
        200,
        SchemaId.RUN_LOG,
        parameters=_LOG_PARAMETERS,
    )
    ok = operation["responses"]["200"]
    ok["description"] = (
        "Without follow: one `qinglong/run-log@v1` page (at most 1 MiB of text from "
        "`offset`; read on from `nextOffset` while it is below `storedBytes`). With "
        "follow=1: `application/x-ndjson`, one `qinglong/run-log@v1` per line: the page "
        "at `offset`, then a line whenever text is new or the attempt ended, and an "
        "empty-text line at least every 5 s. The stream ends after the line with "
        "`ended: true` and `nextOffset` = `storedBytes`; a line with `ended: false` last "
        "means the stream's time was up (the server's log_follow_max_s, or it stopped): "
        "reconnect from its `nextOffset`. A failure after the stream started is one "
        "last `qinglong/error@v1` line. A log that is truncated, or shorter than "
        "`logBytes`, is not the whole output."
    )
    ok["content"]["application/x-ndjson"] = {"schema": component_ref(SchemaId.RUN_LOG)}
    operation["responses"]["429"] = {
        "description": "Too many follow streams at once (too_many_followers: the "
        "server's log_followers_max, or log_followers_per_token).",
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "required": True,
                "schema": {"type": "integer", "minimum": 1, "maximum": 86400},
            }
        },
        "content": {"application/json": {"schema": component_ref(SchemaId.ERROR)}},
    }
    return operation


def build_document() -> dict[str, Any]:
    run_show = dict(responses=SchemaId.RUN)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "QingLong Dispatch producer API",
            "version": "1",
            "description": (
                "Applications and CI jobs enqueue and follow runs of their project (SPEC §13.4), "
                "over HTTPS with a project token. The token's project bounds every call: another "
                "project's run or task answers 404."
            ),
        },
        "security": [{"projectToken": []}],
        "paths": {
            views.RUNS: {
                "post": _operation(
                    "run_enqueue",
                    "Queue runs of a task",
                    "enqueue",
                    201,
                    SchemaId.RUN_ENQUEUED,
                    request=SchemaId.RUN_ENQUEUE_REQUEST,
                ),
                "get": _operation(
                    "run_list",
                    "One page of a task's runs, newest first",
                    "read",
                    200,
                    SchemaId.RUN_PAGE,
                    parameters=_LIST_PARAMETERS,
                ),
            },
            views.RUN: {
                "get": _operation(
                    "run_show",
                    "One run in detail",
                    "read",
                    200,
                    run_show["responses"],
                    parameters=[_RUN_ID],
                )
            },
            views.RUN_CANCEL: {
                "post": _operation(
                    "run_cancel",
                    "Cancel a run; answers the run in detail",
                    "cancel",
                    200,
                    SchemaId.RUN,
                    optional_body=True,
                    parameters=[_RUN_ID],
                )
            },
            views.RUN_RETRY: {
                "post": _operation(
                    "run_retry",
                    "Retry a failed or cancelled run; answers the run in detail",
                    "retry",
                    200,
                    SchemaId.RUN,
                    optional_body=True,
                    parameters=[_RUN_ID],
                    conflict=True,
                )
            },
            producer_logs.RUN_LOG: {"get": _log_operation()},
            views.OPENAPI: {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "security": [],
                    "responses": {
                        "200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "projectToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "qlp_<tokenId>_<secret>",
                    "description": "A project token from `admin token create`.",
                }
            },
            "schemas": bundled_schemas(),
        },
    }


def render_bytes() -> bytes:
    return json.dumps(build_document(), separators=(",", ":")).encode("utf-8")
