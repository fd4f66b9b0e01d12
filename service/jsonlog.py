"""Structured JSON log lines for the ingress process.

Only whitelisted `extra` fields are copied into a line, so a careless
`log.info(..., extra={"body": ...})` cannot smuggle request data into the logs;
exception tracebacks are reduced to the exception type.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TextIO

SAFE_FIELDS = (
    "event",
    "route",
    "status",
    "reason",
    "detail",
    "error",
    "sqlstate",
    "ingressUrl",
    "adminUrl",
    "pid",
    "signal",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "timeMs": int(record.created * 1000),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in SAFE_FIELDS:
            if name in record.__dict__:
                doc[name] = record.__dict__[name]
        if record.exc_info and record.exc_info[0] is not None:
            doc["exception"] = record.exc_info[0].__name__
        return json.dumps(doc, separators=(",", ":"), default=str)


def configure_logging(level: str, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp logs full request lines and tracebacks at error level; keep them terse.
    logging.getLogger("aiohttp.access").disabled = True
