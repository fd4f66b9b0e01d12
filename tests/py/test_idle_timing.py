"""The idle view's timing (service/idle_timing.py), without PostgreSQL: one
barrier per ping interval, one probe per probe interval, re-confirmation at
most once per quarter trust period, engagement by request rate."""

from __future__ import annotations

import pytest

from qinglong.service.idle_timing import BarrierClock, EngageMeter

T0 = 1000.0


def _clock(probe_min_interval_s: float = 0.5, credential_max_age_s: float = 5.0) -> BarrierClock:
    return BarrierClock(0.1, probe_min_interval_s, credential_max_age_s)


def test_the_first_barrier_is_due_at_once():
    assert _clock().barrier_due_in(T0, belief_holds=True) <= 0
    assert _clock().barrier_due_in(T0, belief_holds=False) <= 0


def test_one_barrier_per_ping_interval():
    timing = _clock()
    timing.barrier_sent(T0, probe=False)
    assert timing.barrier_due_in(T0 + 0.05, belief_holds=True) > 0
    assert timing.barrier_due_in(T0 + 0.1, belief_holds=True) <= 0


def test_a_probe_waits_for_the_probe_interval_a_sync_barrier_does_not():
    timing = _clock(probe_min_interval_s=0.5)
    timing.barrier_sent(T0, probe=True)
    # The belief still holds: a `SELECT 1` barrier after one ping interval.
    assert timing.barrier_due_in(T0 + 0.1, belief_holds=True) <= 0
    # No belief (a `q` ended it, forged or not): the next probe waits.
    assert timing.barrier_due_in(T0 + 0.1, belief_holds=False) == pytest.approx(0.4)
    assert timing.barrier_due_in(T0 + 0.499, belief_holds=False) > 0
    assert timing.barrier_due_in(T0 + 0.5, belief_holds=False) <= 0
    # A sync barrier does not move the probe's turn.
    timing.barrier_sent(T0 + 0.2, probe=False)
    assert timing.barrier_due_in(T0 + 0.5, belief_holds=False) <= 0


def test_reconfirmation_at_most_once_per_quarter_trust_period():
    timing = _clock(credential_max_age_s=4.0)
    assert timing.confirm_window_open(T0)
    timing.confirm_sent(T0)
    assert not timing.confirm_window_open(T0 + 0.999)
    assert timing.confirm_window_open(T0 + 1.0)


def test_no_reconfirmation_when_credentials_are_never_trusted():
    assert not _clock(credential_max_age_s=0).confirm_window_open(T0)


def test_engages_once_a_second_reaches_the_rate():
    meter = EngageMeter(3)
    assert [meter.note(T0), meter.note(T0 + 0.5)] == [False, False]
    assert meter.note(T0 + 1.0) is False  # a new second starts counting again
    assert [meter.note(T0 + 1.1), meter.note(T0 + 1.9)] == [False, True]
    assert EngageMeter(0).note(T0) is True
