"""A small Prometheus registry owned by one app (no module-level state).

Counters and histograms with a fixed label set; `render()` produces the text
exposition format 0.0.4. Label values are low-cardinality codes only (route,
status, outcome, reason) — never worker ids or credentials.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

LabelValues = tuple[str, ...]

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


@dataclass
class Counter:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    _values: dict[LabelValues, float] = field(default_factory=dict)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(labels, 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        for labels, value in sorted(self._values.items()):
            lines.append(f"{self.name}{_labels(self.label_names, labels)} {_num(value)}")
        return lines


@dataclass
class Gauge:
    """A gauge read from a callback at scrape time (e.g. open connections)."""

    name: str
    help: str
    read: Callable[[], float]

    def render(self) -> list[str]:
        return [
            f"# HELP {self.name} {self.help}",
            f"# TYPE {self.name} gauge",
            f"{self.name} {_num(self.read())}",
        ]


@dataclass
class _HistogramSeries:
    counts: list[int]
    total: float = 0.0
    count: int = 0


@dataclass
class Histogram:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    buckets: tuple[float, ...] = DEFAULT_BUCKETS
    _series: dict[LabelValues, _HistogramSeries] = field(default_factory=dict)

    def observe(self, value: float, *labels: str) -> None:
        series = self._series.get(labels)
        if series is None:
            series = _HistogramSeries(counts=[0] * len(self.buckets))
            self._series[labels] = series
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.buckets):
            series.counts[index] += 1
        series.total += value
        series.count += 1

    def count(self, *labels: str) -> int:
        series = self._series.get(labels)
        return series.count if series else 0

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for labels, series in sorted(self._series.items()):
            cumulative = 0
            for bound, hits in zip(self.buckets, series.counts, strict=True):
                cumulative += hits
                le = f'le="{_num(bound)}"'
                lines.append(
                    f"{self.name}_bucket{_labels(self.label_names, labels, le)} {cumulative}"
                )
            inf = 'le="+Inf"'
            lines.append(
                f"{self.name}_bucket{_labels(self.label_names, labels, inf)} {series.count}"
            )
            lines.append(f"{self.name}_sum{_labels(self.label_names, labels)} {_num(series.total)}")
            lines.append(f"{self.name}_count{_labels(self.label_names, labels)} {series.count}")
        return lines


@dataclass
class IngressMetrics:
    """Every metric the ingress exports."""

    requests: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_requests_total",
            "HTTP requests answered, by route and status.",
            ("route", "status"),
        )
    )
    request_seconds: Histogram = field(
        default_factory=lambda: Histogram(
            "qinglong_ingress_request_duration_seconds", "Request handling time.", ("route",)
        )
    )
    auth_decisions: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_auth_decisions_total",
            "Authentication decisions.",
            ("action", "outcome", "reason"),
        )
    )
    pulls: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_pull_results_total", "Pull results by outcome.", ("result",)
        )
    )
    lease_transitions: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_lease_transitions_total",
            "Lease ACK/heartbeat/completion results by endpoint, requested transition and outcome.",
            ("endpoint", "transition", "outcome"),
        )
    )
    db_calls: Histogram = field(
        default_factory=lambda: Histogram(
            "qinglong_ingress_db_call_duration_seconds", "Database call time.", ("function",)
        )
    )
    db_errors: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_db_errors_total", "Database calls that failed.", ("kind",)
        )
    )
    rate_limited: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_rate_limited_total", "Requests refused by the per-worker limiter."
        )
    )
    invalid_projections: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_invalid_projections_total",
            "Database results that failed their response schema.",
        )
    )
    connections_refused: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_tls_handshake_failures_total", "TLS handshakes that failed."
        )
    )
    # Every handshake by outcome (full, resumed, failed): with keep-alive workers a
    # full handshake should be rare next to requests; bench e2e checks ≤ 1 %.
    tls_handshakes: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_tls_handshakes_total",
            "TLS handshakes on the worker listener by outcome (full, resumed, failed).",
            ("outcome",),
        )
    )
    idle_view_pulls: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_pulls_total",
            "Authenticated pulls by who answered: the replica's idle view or the database.",
            ("source",),
        )
    )
    idle_view_barriers: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_barriers_total",
            "Idle view queries on the LISTEN connection by kind (sync: SELECT 1 barrier, "
            "probe: ql.idle_probe barrier, confirm: credential re-confirmation; any: a "
            "pull's wait) and outcome (ok, retried, discarded, error, timeout).",
            ("kind", "outcome"),
        )
    )
    idle_view_probes: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_probes_total",
            "Idle view probes by result (idle, busy, discarded, error).",
            ("result",),
        )
    )
    idle_view_notifications: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_notifications_total",
            "Notifications received on the listener, by kind (q, c, s; invalid: not a payload "
            "the database sends, dropped unread).",
            ("kind",),
        )
    )
    idle_view_overflows: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_overflows_total",
            "Idle view tables found full (marks: emptied, fills in flight refused; credentials, "
            "sessions: the new entry not kept).",
            ("table",),
        )
    )
    idle_view_listener: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_idle_view_listener_events_total",
            "LISTEN connection events (connected, lost, connect_failed).",
            ("event",),
        )
    )
    heartbeat_batches: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_heartbeat_batches_total",
            "Session heartbeat database calls made by the batcher.",
        )
    )
    heartbeat_batch_items: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_heartbeat_batch_items_total",
            "Session heartbeats sent through the batcher.",
        )
    )
    # The listener's caps (SPEC §12): why a connection was closed before it could
    # carry a request.
    connections_shed: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_connections_shed_total",
            "Connections closed by a listener cap, by reason (hello_evicted, deadline, "
            "replayed_hello, identity_cap, connection_cap).",
            ("reason",),
        )
    )
    tls_reloads: Counter = field(
        default_factory=lambda: Counter(
            "qinglong_ingress_tls_reloads_total",
            "SIGHUP reloads of the server chain and worker CA bundle, by outcome (ok, failed).",
            ("outcome",),
        )
    )
    gauges: list[Gauge] = field(default_factory=list)

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.gauges.append(Gauge(name, help_text, read))

    def render(self) -> str:
        lines: list[str] = []
        metrics: list[Counter | Histogram | Gauge] = [
            self.requests,
            self.request_seconds,
            self.auth_decisions,
            self.pulls,
            self.lease_transitions,
            self.db_calls,
            self.db_errors,
            self.rate_limited,
            self.invalid_projections,
            self.connections_refused,
            self.tls_handshakes,
            self.idle_view_pulls,
            self.idle_view_barriers,
            self.idle_view_probes,
            self.idle_view_notifications,
            self.idle_view_overflows,
            self.idle_view_listener,
            self.heartbeat_batches,
            self.heartbeat_batch_items,
            self.connections_shed,
            self.tls_reloads,
            *self.gauges,
        ]
        for metric in metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"
