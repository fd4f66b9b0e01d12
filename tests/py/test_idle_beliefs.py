"""The idle view's belief store (service/idle_beliefs.py), without PostgreSQL:
a probe answer starts a belief; a `q`, another listener incarnation, age, the
wake-up and a lost listener end it; the database clock is the probe's."""

from __future__ import annotations

import time

import pytest

from qinglong.db.answers import AnswerError, IdleProbed
from qinglong.service.idle_beliefs import Beliefs, ProbeVerdict

STALENESS_S = 1.0
T0 = 1000.0  # the monotonic instant the probe was sent


def _installed(idle: bool = True, **extra: int) -> Beliefs:
    beliefs = Beliefs(STALENESS_S)
    answer = IdleProbed.parse({"idle": idle, "nowMs": 5_000_000, **extra})
    verdict = beliefs.install(answer, 1, beliefs.epoch, T0)
    assert verdict is (ProbeVerdict.IDLE if idle else ProbeVerdict.BUSY)
    return beliefs


def test_a_probe_answer_starts_a_belief_under_its_incarnation():
    beliefs = Beliefs(STALENESS_S)
    assert beliefs.current(1, T0) is None and not beliefs.knows_db_clock
    idle = _installed(idle=True).current(1, T0 + 0.1)
    busy = _installed(idle=False).current(1, T0 + 0.1)
    assert idle is not None and idle.idle and (idle.incarnation, idle.formed_at) == (1, T0)
    assert busy is not None and not busy.idle
    assert _installed().current(2, T0 + 0.1) is None  # another listener incarnation


@pytest.mark.parametrize(
    "result",
    [
        None,
        [],
        {},
        {"idle": True},
        {"idle": True, "nowMs": "5"},
        {"idle": True, "nowMs": 5.0},
        {"idle": "yes", "nowMs": 5},
        {"idle": True, "nowMs": 5, "wakeAtMs": "6"},
    ],
)
def test_an_answer_that_is_not_a_probe_answer_installs_nothing(result):
    with pytest.raises(AnswerError):
        IdleProbed.parse(result)
    beliefs = Beliefs(STALENESS_S)
    assert beliefs.install(None, 1, 0, T0) is ProbeVerdict.ERROR  # what the view passes then
    assert beliefs.current(1, T0) is None
    assert not beliefs.knows_db_clock and beliefs.db_now_ms(T0) is None


def test_a_queue_notification_ends_the_belief():
    beliefs = _installed()
    beliefs.queue_changed()
    assert beliefs.current(1, T0) is None


def test_a_queue_notification_while_the_probe_ran_leaves_it_stale_from_the_start():
    beliefs = Beliefs(STALENESS_S)
    epoch_at_sending = beliefs.epoch
    beliefs.queue_changed()  # arrived with the probe's answer: may postdate its snapshot
    beliefs.install(IdleProbed.parse({"idle": True, "nowMs": 1}), 1, epoch_at_sending, T0)
    assert beliefs.current(1, T0) is None
    # A probe sent after it holds.
    beliefs.install(IdleProbed.parse({"idle": True, "nowMs": 1}), 1, beliefs.epoch, T0)
    assert beliefs.current(1, T0) is not None


def test_a_belief_lapses_at_its_maximum_staleness():
    beliefs = _installed()
    assert beliefs.current(1, T0 + STALENESS_S - 0.001) is not None
    assert beliefs.current(1, T0 + STALENESS_S) is None


def test_a_belief_lapses_at_its_wake_up():
    beliefs = _installed(wakeAtMs=5_000_250)  # a run becomes due 250 ms after nowMs
    assert beliefs.current(1, T0 + 0.249) is not None
    assert beliefs.current(1, T0 + 0.25) is None


def test_drop_forgets_the_belief_and_the_database_clock():
    beliefs = _installed()
    beliefs.drop()
    assert beliefs.current(1, T0) is None
    assert not beliefs.knows_db_clock and beliefs.db_now_ms(T0) is None


def test_the_database_clock_is_the_probes_advanced_by_the_monotonic_clock(monkeypatch):
    """Pinned to the instant the probe was sent; the wall clock is never read
    (fault injected: reading it fails the test)."""

    def no_wall_clock() -> float:
        raise AssertionError("the wall clock was read")

    monkeypatch.setattr(time, "time", no_wall_clock)
    monkeypatch.setattr(time, "time_ns", no_wall_clock)
    beliefs = _installed()
    assert beliefs.knows_db_clock
    assert beliefs.db_now_ms(T0) == 5_000_000
    assert beliefs.db_now_ms(T0 + 1.5) == 5_001_500
    # Still known after the belief itself lapsed (a `q` ends the belief only).
    beliefs.queue_changed()
    assert beliefs.db_now_ms(T0 + 2) == 5_002_000
