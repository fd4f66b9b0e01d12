"""Producer API configuration (`qinglong api serve --config FILE`, SPEC §13.4).

One JSON object; keys snake_case or camelCase, unknown keys refused, relative
paths resolved against the file's directory; `QL_API_<FIELD>` environment
variables override (e.g. `QL_API_DSN`, `QL_API_PORT=0`). Minimal file:

    {"dsn": "host=... user=qinglong_api dbname=...",
     "certFile": "api.pem", "keyFile": "api.key", "port": 8444}

The DSN's login must be a member of `ql_producer` only (it can then execute the
ql.producer_* functions and nothing else). The DSN may carry a password: keep
the file 0600 and the DSN out of every repr and log line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from qinglong.service.config import ConfigError, IngressConfig

ENV_PREFIX = "QL_API_"
_PATH_FIELDS = ("cert_file", "key_file", "audit_log", "ready_file")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


@dataclass(frozen=True)
class ProducerConfig:
    dsn: str = field(repr=False)
    cert_file: str
    key_file: str
    host: str = "127.0.0.1"
    port: int = 8444
    # Plain-HTTP /healthz and /readyz (loopback); 0 = an ephemeral port.
    admin_host: str = "127.0.0.1"
    admin_port: int = 0
    pool_min_size: int = 1
    pool_max_size: int = 10
    statement_timeout_ms: int = 5000
    acquire_timeout_ms: int = 2000
    connect_timeout_s: int = 3
    # POST /v1/runs bodies are small; anything larger is 413 before it is parsed.
    max_body_bytes: int = 8192
    header_timeout_s: float = 15.0
    body_timeout_s: float = 10.0
    shutdown_timeout_s: float = 30.0
    unavailable_retry_after_s: int = 2
    # "stderr", "stdout" or a file: one JSON line per authentication decision.
    audit_log: str = "stderr"
    log_level: str = "INFO"
    # When set, written atomically with {"apiUrl", "adminUrl", "pid"} once listening.
    ready_file: str | None = None
    # GET /v1/runs/{id}/log?follow=1 (SPEC 15.3): how often a follower reads the
    # database, how long one stream lasts at most (the client reconnects from
    # its nextOffset), and how many streams run at once (per process, per token).
    log_follow_poll_s: float = 0.5
    log_follow_max_s: float = 300.0
    log_followers_max: int = 64
    log_followers_per_token: int = 4

    def validate(self) -> ProducerConfig:
        for name in ("dsn", "cert_file", "key_file"):
            _require(bool(getattr(self, name)), f"{name} is required")
        for name in ("port", "admin_port"):
            _require(0 <= getattr(self, name) <= 65535, f"{name} out of range")
        _require(1 <= self.pool_min_size <= self.pool_max_size, "pool sizes invalid")
        _require(256 <= self.max_body_bytes <= 65536, "max_body_bytes must be 256..65536")
        _require(0.1 <= self.log_follow_poll_s <= 1.0, "log_follow_poll_s must be 0.1..1")
        _require(1.0 <= self.log_follow_max_s <= 3600.0, "log_follow_max_s must be 1..3600")
        _require(
            1 <= self.log_followers_per_token <= self.log_followers_max <= 10000,
            "log_followers_per_token must be 1..log_followers_max (at most 10000)",
        )
        for name in (
            "statement_timeout_ms",
            "acquire_timeout_ms",
            "connect_timeout_s",
            "header_timeout_s",
            "body_timeout_s",
            "shutdown_timeout_s",
        ):
            _require(getattr(self, name) > 0, f"{name} must be positive")
        return self

    def gateway_config(self) -> IngressConfig:
        """The database settings in the shape service.gateway.Gateway reads."""
        return IngressConfig(
            dsn=self.dsn,
            cert_file=self.cert_file,
            key_file=self.key_file,
            client_ca_file="",
            pool_min_size=self.pool_min_size,
            pool_max_size=self.pool_max_size,
            statement_timeout_ms=self.statement_timeout_ms,
            acquire_timeout_ms=self.acquire_timeout_ms,
            connect_timeout_s=self.connect_timeout_s,
        )


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _coerce(name: str, kind: str, value: Any) -> Any:
    if value is None or (
        isinstance(value, str) and "None" in kind and value.lower() in ("null", "none")
    ):
        if "None" in kind:
            return None
        raise ConfigError(f"{name} may not be null")
    try:
        if kind.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind.startswith("float"):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} has the wrong type") from None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string")
    return value


def _values(raw: Mapping[str, Any], source: str, env: bool) -> dict[str, Any]:
    kinds = {f.name: str(f.type) for f in fields(ProducerConfig)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key[len(ENV_PREFIX) :].lower() if env else _CAMEL.sub("_", key).lower()
        if name not in kinds:
            raise ConfigError(f"unknown config key {key if env else name!r} in {source}")
        out[name] = _coerce(name, kinds[name], value)
    return out


def load_producer_config(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None
) -> ProducerConfig:
    """Read the file (if any), apply `QL_API_*` overrides, validate."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read config file: {type(exc).__name__}") from None
        if not isinstance(raw, dict):
            raise ConfigError("config file must hold a JSON object")
        values.update(_values(raw, "config file", env=False))
        base = Path(path).resolve().parent
    values.update(
        _values(
            {k: v for k, v in environ.items() if k.startswith(ENV_PREFIX)},
            "the environment",
            env=True,
        )
    )
    for name in _PATH_FIELDS:
        value = values.get(name)
        if value and not (name == "audit_log" and value in ("stderr", "stdout")):
            values[name] = str(base / value) if not Path(value).is_absolute() else value
    missing = [
        f.name
        for f in fields(ProducerConfig)
        if f.default is dataclasses.MISSING and f.name not in values
    ]
    if missing:
        raise ConfigError(f"missing required config: {', '.join(missing)}")
    return ProducerConfig(**values).validate()
