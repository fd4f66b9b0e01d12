"""Full-jitter exponential backoff (SPEC §6.2): bounds, cap, 16-attempt limit."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.worker.backoff import (
    BASE_MS,
    CAP_MS,
    DEFAULT_POLICY,
    MAX_ATTEMPTS,
    AttemptsExhausted,
    BackoffPolicy,
)


def test_constants_match_spec():
    assert (BASE_MS, CAP_MS, MAX_ATTEMPTS) == (250, 60_000, 16)


def test_cap_doubles_then_saturates():
    caps = [DEFAULT_POLICY.cap_for(n) for n in range(16)]
    assert caps[:5] == [250, 500, 1000, 2000, 4000]
    assert all(b == min(2 * a, CAP_MS) for a, b in itertools.pairwise(caps))
    assert caps[-1] == CAP_MS and max(caps) == CAP_MS
    assert DEFAULT_POLICY.cap_for(10_000) == CAP_MS  # no huge exponent work


@given(attempt=st.integers(0, 14), now=st.integers(0, 2**42), seed=st.integers(0, 2**32))
def test_next_attempt_within_full_jitter_window(attempt, now, seed):
    at = DEFAULT_POLICY.next_attempt_at_ms(now, attempt, random.Random(seed))
    assert now <= at <= now + min(CAP_MS, BASE_MS * 2**attempt)


def test_distribution_is_uniform_over_the_window():
    rng = random.Random(7)
    for attempt in (0, 3, 12):
        cap = DEFAULT_POLICY.cap_for(attempt)
        samples = [DEFAULT_POLICY.delay_ms(attempt, rng) for _ in range(20_000)]
        assert min(samples) >= 0 and max(samples) <= cap
        # Full jitter: mean ~ cap/2, and both ends of the window are reached.
        assert abs(statistics.fmean(samples) - cap / 2) < cap * 0.02
        assert min(samples) < cap * 0.01 and max(samples) > cap * 0.99


def test_sixteen_attempts_then_exhausted():
    rng = random.Random(1)
    now = 0
    attempts = 0
    while True:
        attempts += 1  # a request was made and failed
        try:
            now = DEFAULT_POLICY.next_attempt_at_ms(now, attempts - 1, rng)
        except AttemptsExhausted:
            break
    assert attempts == MAX_ATTEMPTS
    assert DEFAULT_POLICY.exhausted(16) and not DEFAULT_POLICY.exhausted(15)


def test_deterministic_with_injected_rng():
    a = [DEFAULT_POLICY.delay_ms(n, random.Random(42)) for n in range(15)]
    b = [DEFAULT_POLICY.delay_ms(n, random.Random(42)) for n in range(15)]
    assert a == b


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_ms": 0},
        {"cap_ms": CAP_MS + 1},
        {"base_ms": 1000, "cap_ms": 500},
        {"max_attempts": 0},
        {"max_attempts": 17},
    ],
)
def test_policy_bounds(kwargs):
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)


def test_negative_attempt_refused():
    with pytest.raises(ValueError):
        DEFAULT_POLICY.cap_for(-1)
