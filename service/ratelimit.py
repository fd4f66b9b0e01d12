"""Per-replica token bucket per worker (429 + Retry-After when empty).

Stateless across replicas by design: each replica limits what it sees, so N
replicas admit at most N x the rate — acceptable, since the database is the
authority and the limiter only sheds abusive polling. The table is bounded:
the least recently used buckets are dropped (a dropped bucket restarts full).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0


@dataclass
class TokenBucketLimiter:
    rate_per_s: float
    burst: int
    max_tracked: int = 100_000
    clock: Callable[[], float] = time.monotonic
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    def take(self, key: str) -> Decision:
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self.burst), updated=now)
            self._buckets[key] = bucket
            self._evict()
        else:
            self._buckets.move_to_end(key)
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate_per_s)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return Decision(True)
        wait = (1.0 - bucket.tokens) / self.rate_per_s
        return Decision(False, max(1, math.ceil(wait)))

    def _evict(self) -> None:
        while len(self._buckets) > self.max_tracked:
            self._buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)
