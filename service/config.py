"""Ingress configuration: one JSON file, overridable by `QL_INGRESS_*` variables.

The file is a flat JSON object. Keys may be snake_case (`client_ca_file`) or
camelCase (`clientCaFile`); both spell the same field. Every field can be
overridden by the environment variable `QL_INGRESS_<FIELD_IN_UPPER_SNAKE>`
(e.g. `QL_INGRESS_DSN`, `QL_INGRESS_PORT=0`); `null`/`none` in a variable clears
an optional field. Unknown keys are refused so a typo never silently falls back
to a default.

Minimal file:

    {"dsn": "host=... user=qinglong_ingress dbname=...",
     "certFile": "server.pem", "keyFile": "server.key",
     "clientCaFile": "worker-ca.pem", "port": 8443}

Relative paths are resolved against the directory of the config file.

The nested layout used by `qinglong dev up` is accepted too and flattened first:
`listen{host,port}`, `admin{host,port}`, `tls{certFile,keyFile,workerCaFile}`,
`database{poolMin,poolMax,statementTimeoutMs,preparedStatements,...}`,
`limits{ratePerSecond,burst,maxConnections,headerTimeoutS,bodyTimeoutS,...}`.
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

ENV_PREFIX = "QL_INGRESS_"
_PATH_FIELDS = ("cert_file", "key_file", "client_ca_file", "audit_log", "ready_file", "kek_file")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class ConfigError(ValueError):
    """The configuration cannot be used (message names the field, never a value)."""


@dataclass(frozen=True)
class IngressConfig:
    """Every tunable of the ingress. Defaults are the production defaults."""

    # May carry a password: never in a repr (so never in a log line or traceback).
    dsn: str = field(repr=False)
    cert_file: str
    key_file: str
    client_ca_file: str
    host: str = "127.0.0.1"
    port: int = 8443
    admin_host: str = "127.0.0.1"
    admin_port: int = 9464
    # Database pool. prepare_threshold=0 prepares every statement server-side on
    # first use; None turns server-side prepares off (PgBouncer transaction pooling).
    pool_min_size: int = 1
    pool_max_size: int = 10
    pool_max_waiting: int = 256
    prepare_threshold: int | None = 0
    # "options" passes -c statement_timeout at connect; "set" runs SET once per new
    # connection (for poolers that refuse startup options); "off" leaves the server's.
    statement_timeout_mode: str = "options"
    statement_timeout_ms: int = 3000
    acquire_timeout_ms: int = 2000
    connect_timeout_s: int = 3
    ready_timeout_ms: int = 1000
    # Connection protection (per process; service/tls_site.py). max_connections
    # bounds established TLS connections; max_handshakes the handshakes in
    # progress (a complete ClientHello received); max_hello_waits the accepted
    # connections whose ClientHello is incomplete (the oldest is closed to make
    # room). handshake_timeout_s runs from accept to an established connection.
    max_connections: int = 512
    max_handshakes: int = 64
    max_hello_waits: int = 1024
    max_connections_per_worker: int = 4
    # The accept loop never pauses, so the backlog only absorbs bursts while the
    # event loop is busy; a full one drops SYNs (a 1 s retransmit for a worker).
    backlog: int = 1024
    handshake_timeout_s: float = 3.0
    # Within that deadline, each step after a handshake turn is granted: the
    # server's flight within this, then the client's reply (certificate,
    # Finished) within this of the flight. A real worker needs one round trip;
    # a client that stalls after the server's flight (a replayed or abandoned
    # ClientHello) is closed this long after it, not at the full deadline.
    handshake_step_timeout_s: float = 1.0
    header_timeout_s: float = 15.0  # also the keep-alive idle timeout
    body_timeout_s: float = 10.0
    max_body_bytes: int = 4096
    # /v1/leases/complete carries the run's result (SPEC §9.3): up to 16 KiB.
    max_complete_body_bytes: int = 16384
    shutdown_timeout_s: float = 30.0
    # Per-worker token buckets (per replica): one for polling (pulls, session
    # calls), one for lease calls. Lease calls are bounded by the worker's live
    # leases (two ACKs + a completion per run, heartbeats on a cadence), so a
    # busy data-centre worker must not be throttled by the polling budget: with
    # one shared 5/s bucket an executing worker was capped at ~1.25 runs/s.
    rate_per_s: float = 5.0
    rate_burst: int = 10
    lease_rate_per_s: float = 100.0
    lease_rate_burst: int = 200
    rate_max_tracked: int = 100_000
    # Idle pulls: the worker waits retryAfterMs = cadence + uniform jitter.
    idle_retry_after_ms: int = 2000
    idle_jitter_ms: int = 1000
    unavailable_retry_after_s: int = 2
    # Idle view (service/idle_view.py): answer idle pulls from a per-replica,
    # LISTEN/NOTIFY-fed view. Dormant (one database call per pull) until the
    # replica sees idle_view_engage_rate_per_s worker requests in a second; 0
    # engages it at startup.
    idle_view_enabled: bool = True
    idle_view_engage_rate_per_s: float = 20.0
    idle_view_max_staleness_ms: int = 1000
    # One barrier per interval serves every waiting pull: idle answers wait about
    # one interval; at 2,000 idle workers per process (~800 pulls/s) 100 ms keeps
    # barriers near 0.013 per pull (docs/BENCHMARKS.md, "Idle fleets").
    idle_view_ping_interval_ms: int = 100
    idle_view_ping_timeout_ms: int = 500
    idle_view_probe_min_interval_ms: int = 100
    # A cached session is only trusted while it has this much lease left.
    idle_view_session_margin_ms: int = 5000
    # A credential the database confirmed is trusted from the cache this long at
    # most (SPEC §5: a per-replica credential cache of at most 5 s).
    idle_view_credential_max_age_ms: int = 5000
    # Session heartbeats batched into one call while the idle view is engaged. A
    # heartbeat is due every 20 s: waiting a quarter second for company costs the
    # session nothing and makes the batches (not the heartbeats) the calls.
    heartbeat_batch_window_ms: int = 250
    heartbeat_batch_max: int = 64
    # "stderr", "stdout" or a file path; one JSON line per auth decision.
    audit_log: str = "stderr"
    log_level: str = "INFO"
    # When set, written (atomically) with {"ingressUrl","adminUrl","pid"} once listening.
    ready_file: str | None = None
    # The key-encryption key file (SPEC §14.1, 0600) that unwraps the projects'
    # data keys for POST /v1/leases/secrets; unset: that endpoint answers 503
    # secrets_unavailable.
    kek_file: str | None = None

    def validate(self) -> IngressConfig:
        _require(bool(self.dsn), "dsn is required")
        for name in ("cert_file", "key_file", "client_ca_file"):
            _require(bool(getattr(self, name)), f"{name} is required")
        for name in ("port", "admin_port"):
            _require(0 <= getattr(self, name) <= 65535, f"{name} out of range")
        _require(1 <= self.pool_min_size <= self.pool_max_size, "pool sizes invalid")
        _require(
            self.prepare_threshold is None or self.prepare_threshold >= 0,
            "prepare_threshold must be >= 0 or null",
        )
        _require(
            self.statement_timeout_mode in ("options", "set", "off"),
            "statement_timeout_mode must be options|set|off",
        )
        _require(1 <= self.max_body_bytes <= 4096, "max_body_bytes must be 1..4096")
        _require(
            self.max_body_bytes <= self.max_complete_body_bytes <= 16384,
            "max_complete_body_bytes must be max_body_bytes..16384",
        )
        for name in (
            "max_connections",
            "max_handshakes",
            "max_hello_waits",
            "max_connections_per_worker",
        ):
            _require(getattr(self, name) >= 1, f"{name} must be >= 1")
        _require(self.rate_per_s > 0 and self.rate_burst >= 1, "rate limits must be positive")
        _require(
            self.lease_rate_per_s > 0 and self.lease_rate_burst >= 1,
            "lease rate limits must be positive",
        )
        for name in ("statement_timeout_ms", "acquire_timeout_ms", "ready_timeout_ms"):
            _require(getattr(self, name) > 0, f"{name} must be positive")
        for name in (
            "handshake_timeout_s",
            "handshake_step_timeout_s",
            "header_timeout_s",
            "body_timeout_s",
        ):
            _require(getattr(self, name) > 0, f"{name} must be positive")
        for name in (
            "idle_view_max_staleness_ms",
            "idle_view_ping_interval_ms",
            "idle_view_ping_timeout_ms",
        ):
            _require(getattr(self, name) > 0, f"{name} must be positive")
        for name in (
            "idle_view_probe_min_interval_ms",
            "idle_view_session_margin_ms",
            "heartbeat_batch_window_ms",
        ):
            _require(getattr(self, name) >= 0, f"{name} must be >= 0")
        _require(self.idle_view_engage_rate_per_s >= 0, "idle_view_engage_rate_per_s must be >= 0")
        _require(
            0 <= self.idle_view_credential_max_age_ms <= 5000,
            "idle_view_credential_max_age_ms must be 0..5000",
        )
        _require(1 <= self.heartbeat_batch_max <= 64, "heartbeat_batch_max must be 1..64")
        return self


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def _field_types() -> dict[str, Any]:
    return {f.name: f.type for f in fields(IngressConfig)}


def _coerce(name: str, type_text: Any, value: Any) -> Any:
    """Coerce a JSON or environment value to the field's declared type."""
    text = str(type_text)
    optional = "None" in text
    if value is None or (isinstance(value, str) and optional and value.lower() in ("null", "none")):
        if optional:
            return None
        raise ConfigError(f"{name} may not be null")
    try:
        if text.startswith("bool"):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
                return value.lower() in ("true", "1")
            raise ValueError
        if text.startswith("int"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if text.startswith("float"):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} has the wrong type") from None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string")
    return value


# Nested sections: inner key -> field (keys not listed fall back to snake_case).
_SECTIONS: dict[str, dict[str, str]] = {
    "listen": {"host": "host", "port": "port"},
    "admin": {"host": "admin_host", "port": "admin_port"},
    "tls": {"workerCaFile": "client_ca_file"},
    "database": {
        "poolMin": "pool_min_size",
        "poolMax": "pool_max_size",
        "preparedStatements": "prepared_statements",
    },
    "limits": {
        "ratePerSecond": "rate_per_s",
        "burst": "rate_burst",
        "leaseRatePerSecond": "lease_rate_per_s",
        "leaseBurst": "lease_rate_burst",
    },
}


def _flatten(raw: Mapping[str, Any]) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for key, value in raw.items():
        aliases = _SECTIONS.get(key)
        if aliases is None or not isinstance(value, Mapping):
            pairs.append((_snake(key), value))
            continue
        for inner, inner_value in value.items():
            name = aliases.get(inner, _snake(inner))
            if name == "prepared_statements":
                # true = server-side prepares (threshold 0); false = off (PgBouncer).
                if not isinstance(inner_value, bool):
                    raise ConfigError("database.preparedStatements must be a boolean")
                name, inner_value = "prepare_threshold", 0 if inner_value else None
            pairs.append((name, inner_value))
    return pairs


def _from_mapping(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    types = _field_types()
    out: dict[str, Any] = {}
    for name, value in _flatten(raw):
        if name not in types:
            raise ConfigError(f"unknown config key {name!r} in {source}")
        out[name] = _coerce(name, types[name], value)
    return out


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    types = _field_types()
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX) :].lower()
        if name not in types:
            raise ConfigError(f"unknown environment override {key}")
        out[name] = _coerce(name, types[name], value)
    return out


def _resolve_paths(values: dict[str, Any], base: Path) -> None:
    for name in _PATH_FIELDS:
        value = values.get(name)
        if not value or (name == "audit_log" and value in ("stderr", "stdout")):
            continue
        path = Path(value)
        values[name] = str(path if path.is_absolute() else base / path)


def load_config(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None
) -> IngressConfig:
    """Read the file (if any), apply `QL_INGRESS_*` overrides, validate."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        file_path = Path(path)
        try:
            raw = json.loads(file_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read config file: {type(exc).__name__}") from None
        if not isinstance(raw, dict):
            raise ConfigError("config file must hold a JSON object")
        values.update(_from_mapping(raw, "config file"))
        base = file_path.resolve().parent
    values.update(_env_overrides(environ))
    _resolve_paths(values, base)
    missing = [
        f.name
        for f in fields(IngressConfig)
        if f.default is dataclasses.MISSING and f.name not in values
    ]
    if missing:
        raise ConfigError(f"missing required config: {', '.join(missing)}")
    return IngressConfig(**values).validate()
