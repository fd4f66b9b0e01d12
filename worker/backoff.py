"""Full-jitter exponential backoff for claim retries (SPEC §6.2, ADR-0110 §2).

Pure functions: the coordinator asks for ``next_attempt_at_ms`` and persists it;
nothing here sleeps or owns a timer. ``attempt`` is the 0-based index of the
request that just failed (at most 16 requests: indices 0..15):
``cap_n = min(cap, base * 2**attempt)`` and the delay before the next one is
uniform in ``[0, cap_n]`` ("full jitter"), which spreads a fleet of workers that
lost the ingress at the same instant.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BASE_MS = 250
CAP_MS = 60_000
MAX_ATTEMPTS = 16

__all__ = [
    "BASE_MS",
    "CAP_MS",
    "DEFAULT_POLICY",
    "MAX_ATTEMPTS",
    "AttemptsExhausted",
    "BackoffPolicy",
]


class AttemptsExhausted(Exception):
    """The claim used all its attempts; the caller moves it aside."""


@dataclass(frozen=True)
class BackoffPolicy:
    base_ms: int = BASE_MS
    cap_ms: int = CAP_MS
    max_attempts: int = MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if not 1 <= self.base_ms <= self.cap_ms <= CAP_MS:
            raise ValueError(f"need 1 <= base_ms <= cap_ms <= {CAP_MS}")
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"max_attempts must be 1..{MAX_ATTEMPTS}")

    def exhausted(self, attempts: int) -> bool:
        """True once ``attempts`` requests were made and none may follow."""
        return attempts >= self.max_attempts

    def cap_for(self, attempt: int) -> int:
        if attempt < 0:
            raise ValueError("attempt must be >= 0")
        # Clamp the exponent first: 2**attempt of a huge attempt is wasted work.
        return min(self.cap_ms, self.base_ms << min(attempt, 32))

    def delay_ms(self, attempt: int, rng: random.Random) -> int:
        return rng.randint(0, self.cap_for(attempt))

    def next_attempt_at_ms(self, now_ms: int, attempt: int, rng: random.Random) -> int:
        """When request ``attempt + 1`` may start; raises if that would exceed the limit."""
        if self.exhausted(attempt + 1):
            raise AttemptsExhausted(f"{self.max_attempts} attempts used")
        return now_ms + self.delay_ms(attempt, rng)


DEFAULT_POLICY = BackoffPolicy()
