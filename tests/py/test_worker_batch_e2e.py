"""Batched pulls end to end (SPEC §18.2): `qinglong worker run --slots 4` against a
real ingress + PostgreSQL (`qinglong dev up`), with the batch protocol's crash
windows forced by a real SIGKILL (QL_WORKER_CRASH_AT, worker/faults.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.py.test_worker_e2e import (
    Admin,
    admin,
    dev_args,
    dev_env,
    env_file,
    events,
    inbox,
    pending,
    run,
)

__all__ = ["admin", "dev_env", "env_file"]  # fixtures, used by name


def _intent_ids(intent: dict) -> list[str]:
    return [intent["offerId"], *(p["offerId"] for p in intent.get("batch", []))]


def test_free_slots_pull_one_batch(env_file: dict, admin: Admin, tmp_path: Path):
    run_ids = admin.enqueue(3)
    journal = tmp_path / "journal"
    result = run(dev_args(env_file, journal, "--slots", "4", "--max-offers", "3"))
    assert result.returncode == 0, result.stderr
    accepted = [e for e in events(result.stderr) if e["event"] == "claim.accepted"]
    assert sorted(e["runId"] for e in accepted) == sorted(run_ids)
    assert inbox(journal) == sorted(e["offerId"] for e in accepted) and pending(journal) is None
    for run_id in run_ids:
        assert len(admin.leases(run_id)) == 1 and admin.leases(run_id) == admin.dispatched(run_id)


@pytest.mark.parametrize(
    "point",
    [
        "before_send",  # the whole batch durable, nothing sent
        "after_pull_response",  # claims committed, the answer lost before anything is written
        "after_offer_response",  # the same, the answer known to be valid
        "inbox_link",  # the first entry about to be linked into the inbox
        "after_inbox_write",  # every entry in the inbox, the intent not cleared
    ],
)
def test_batch_crash_window_converges_on_the_same_offers(
    env_file: dict, admin: Admin, tmp_path: Path, point: str
):
    run_ids = admin.enqueue(3)
    journal = tmp_path / "journal"
    args = dev_args(env_file, journal, "--slots", "4", "--max-offers", "3")
    crashed = run(args, QL_WORKER_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    intent = pending(journal)
    assert intent is not None
    offer_ids = _intent_ids(intent)
    assert len(offer_ids) == 3, "one intent holds the whole batch"
    assert inbox(journal) == (sorted(offer_ids) if point == "after_inbox_write" else [])
    # Claimed (and committed) by the time of every point but the first.
    assert all(admin.lease_exists(o) is (point != "before_send") for o in offer_ids)

    restarted = run(args)
    assert restarted.returncode == 0, restarted.stderr
    assert inbox(journal) == sorted(offer_ids) and pending(journal) is None
    for run_id in run_ids:
        (lease,) = admin.leases(run_id)
        assert lease in offer_ids and admin.dispatched(run_id) == [lease]
    resumed = [e for e in events(restarted.stderr) if e["event"] == "session.resumed"]
    assert resumed and resumed[0]["offerId"] == intent["offerId"]
