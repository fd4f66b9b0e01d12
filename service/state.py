"""Per-app state, reached through `web.AppKey`s (no module-level mutable state)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from qinglong.service.audit import AuditLog
from qinglong.service.config import IngressConfig
from qinglong.service.gateway import Gateway
from qinglong.service.heartbeat_batch import HeartbeatBatcher
from qinglong.service.identity import PeerIdentities
from qinglong.service.idle_answer import IdleAnswers
from qinglong.service.idle_view import IDLE_RESULT, IdleView
from qinglong.service.metrics import IngressMetrics
from qinglong.service.ratelimit import TokenBucketLimiter
from qinglong.service.secrets_crypto import KekSource

# (route name, response document) -> document actually sent. Tests install one to
# inject a corrupted projection; production leaves it unset.
ProjectionHook = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass
class IngressState:
    config: IngressConfig
    gateway: Gateway
    metrics: IngressMetrics
    audit: AuditLog
    limiter: TokenBucketLimiter  # polling: pulls and session calls
    lease_limiter: TokenBucketLimiter  # lease ACK / heartbeat / complete
    idle_view: IdleView
    heartbeats: HeartbeatBatcher
    # Jitter for idle retry guidance only; not security relevant.
    rng: random.Random = field(default_factory=random.Random)
    peers: PeerIdentities = field(default_factory=PeerIdentities)
    idle_answers: IdleAnswers = field(default_factory=lambda: IdleAnswers(IDLE_RESULT))
    # The KEK for secret delivery (SPEC §14.3); None without `kekFile`.
    kek: KekSource | None = None

    def idle_retry_after_ms(self) -> int:
        return self.config.idle_retry_after_ms + self.rng.randint(0, self.config.idle_jitter_ms)


STATE: web.AppKey[IngressState] = web.AppKey("qinglong_ingress_state", IngressState)
# A Callable is no class: the subscripted key carries the type (aiohttp's way for these).
PROJECTION_HOOK = web.AppKey[ProjectionHook]("qinglong_projection_hook")
