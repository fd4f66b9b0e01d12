"""Batched pulls in the claim coordinator (SPEC §18.2), with a scripted fake
ingress and a real journal: one durable intent for the whole batch, every
offered entry in the inbox (directory synced once) before the intent is
cleared, exact retries, and a one-slot worker unchanged."""

from __future__ import annotations

import json
import os
import random

import pytest

from qinglong.worker.coordinator import ClaimCoordinator, ClaimOutcome
from qinglong.worker.errors import NetworkError
from qinglong.worker.fsio import FileSystem, Step
from qinglong.worker.journal import Journal
from tests.py.test_worker_coordinator import FENCE, NOW, Clock, Resp, offered

BATCH_REQUEST = "qinglong/offer-batch-pull-request@v1"
STATS = {
    "pages": 0,
    "candidates": 0,
    "claimAttempts": 0,
    "races": 0,
    "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 1},
}


class BatchIngress:
    """Records requests; checks the whole batch is on disk before the send."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.requests: list[dict] = []
        self.script: list = []
        self.leases: dict[str, dict] = {}  # the server's durable leases, by offer id

    def __call__(self, request: dict) -> Resp:
        with open(os.path.join(self.root, "pending-claim.json"), "rb") as f:
            pending = json.load(f)
        on_disk = [(pending["offerId"], pending["leaseToken"])] + [
            (p["offerId"], p["leaseToken"]) for p in pending.get("batch", [])
        ]
        if request["schema"] == BATCH_REQUEST:
            assert on_disk == [(p["offerId"], p["leaseToken"]) for p in request["offers"]]
        else:
            assert on_disk == [(request["offerId"], request["leaseToken"])]
        self.requests.append(request)
        return self.script.pop(0)(request)

    def claim(self, count: int, idle: str | None = "capacity_full"):
        """Claim (or replay) the first `count` ids of the batch; idle for the rest."""

        def answer(request: dict) -> Resp:
            offers = []
            for pair in request["offers"][:count]:
                single = {k: request[k] for k in ("workerId", "sessionId", "generation")}
                doc = self.leases.setdefault(
                    pair["offerId"], offered({**single, "offerId": pair["offerId"]})
                )
                offers.append(doc)
            idle_doc = (
                None
                if idle is None
                else {"reason": idle, "stats": STATS, "truncated": False, "retryAfterMs": 700}
            )
            body = {
                "schema": "qinglong/remote-execution-offer-batch@v1",
                "offers": offers,
                "idle": idle_doc,
            }
            return Resp(200, json.dumps(body).encode())

        return answer


@pytest.fixture
def env(tmp_path):
    root = str(tmp_path / "j")
    syncs: list[str] = []

    def hook(step: Step, path: str) -> None:
        if step is Step.FSYNC_DIR:
            syncs.append(path)

    journal = Journal.open(root, refresher=False, fs=FileSystem(hook))
    ingress = BatchIngress(root)
    clock = Clock()
    coord = ClaimCoordinator(journal, ingress, clock=clock, rng=random.Random(5))
    yield journal, ingress, clock, coord, syncs
    journal.close()


def test_batch_admits_every_offer_with_one_directory_sync(env):
    journal, ingress, _clock, coord, syncs = env
    ingress.script = [ingress.claim(3)]
    syncs.clear()  # the journal's own set-up
    result = coord.step(FENCE, want=4)
    request = ingress.requests[0]
    assert request["schema"] == BATCH_REQUEST and len(request["offers"]) == 4
    assert result.outcome is ClaimOutcome.ACCEPTED
    ids = [p["offerId"] for p in request["offers"][:3]]
    assert [e.offer_id for e in result.entries] == ids
    assert sorted(journal.offer_ids()) == sorted(ids)
    for pair in request["offers"][:3]:
        assert journal.get(pair["offerId"]).lease["leaseToken"] == pair["leaseToken"]
    assert journal.load_pending() is None
    inbox_syncs = [p for p in syncs if p == journal.inbox_dir]
    assert len(inbox_syncs) == 1, "the inbox directory is synced once per batch"
    assert not any(p["leaseToken"] in repr(result) for p in request["offers"])


def test_a_failed_batch_is_retried_exactly_whatever_the_free_slots_are_now(env):
    journal, ingress, clock, coord, _syncs = env

    def down(_request: dict) -> Resp:
        raise NetworkError("reset")

    ingress.script = [down, ingress.claim(2)]
    first = coord.step(FENCE, want=3)
    assert first.outcome is ClaimOutcome.RETRY
    kept = journal.load_pending()
    assert len(kept.pairs()) == 3 and kept.attempts == 1
    clock.now = first.next_attempt_at_ms
    second = coord.step(FENCE, want=1)  # fewer free slots now: the intent is still the batch
    assert second.outcome is ClaimOutcome.ACCEPTED and len(second.entries) == 2
    assert ingress.requests[0] == ingress.requests[1]


def test_replay_after_a_crash_before_the_inbox_write_converges(env, tmp_path):
    """The response of a committed batch is lost (the process died before the
    inbox write): the next step sends the same batch and admits the same offers."""
    journal, ingress, _clock, coord, _syncs = env
    ingress.script = [ingress.claim(2)]

    class Crash(BaseException):
        pass

    def die(point: str) -> None:
        if point == "after_offer_response":
            raise Crash

    crashing = ClaimCoordinator(
        journal, ingress, clock=_clock, rng=random.Random(1), checkpoint=die
    )
    with pytest.raises(Crash):
        crashing.step(FENCE, want=2)
    assert journal.offer_ids() == [] and len(journal.load_pending().pairs()) == 2
    ingress.script = [ingress.claim(2)]
    result = coord.step(FENCE, want=2)
    assert result.outcome is ClaimOutcome.ACCEPTED
    assert ingress.requests[0] == ingress.requests[1]
    sent = ingress.requests[0]["offers"]
    assert sorted(journal.offer_ids()) == sorted(p["offerId"] for p in sent)


def test_idle_batch_clears_the_intent(env):
    journal, ingress, _clock, coord, _syncs = env
    ingress.script = [ingress.claim(0, idle="no_candidates")]
    result = coord.step(FENCE, want=5)
    assert result.outcome is ClaimOutcome.IDLE and result.reason == "no_candidates"
    assert result.next_attempt_at_ms == NOW + 700
    assert journal.load_pending() is None and journal.offer_ids() == []


def test_an_offer_for_an_id_not_in_the_batch_is_refused_and_tokens_not_kept(env):
    journal, ingress, _clock, coord, _syncs = env

    def foreign(request: dict) -> Resp:
        single = {k: request[k] for k in ("workerId", "sessionId", "generation")}
        doc = offered({**single, "offerId": "00000000-0000-4000-8000-000000000001"})
        body = {"schema": "qinglong/remote-execution-offer-batch@v1", "offers": [doc], "idle": None}
        return Resp(200, json.dumps(body).encode())

    ingress.script = [foreign]
    result = coord.step(FENCE, want=2)
    assert result.outcome is ClaimOutcome.REJECTED and result.reason == "offer_id_mismatch"
    assert journal.offer_ids() == [] and journal.load_pending() is None
    (failed,) = os.listdir(journal.failed_dir)
    text = open(os.path.join(journal.failed_dir, failed)).read()
    assert not any(p["leaseToken"] in text for p in ingress.requests[0]["offers"])


def test_one_free_slot_is_a_single_pull_exactly_as_before(env):
    journal, ingress, _clock, coord, _syncs = env

    def single(request: dict) -> Resp:
        return Resp(200, json.dumps(offered(request)).encode())

    ingress.script = [single]
    result = coord.step(FENCE, want=1)
    assert ingress.requests[0]["schema"] == "qinglong/offer-pull-request@v1"
    assert result.outcome is ClaimOutcome.ACCEPTED and result.entries == ()
    with open(os.path.join(journal.root, "inbox", f"{result.offer_id}.json")) as f:
        assert json.load(f)["offerId"] == result.offer_id


def test_every_pair_the_ingress_refused_is_in_the_result(env):
    """A batch's refused pairs (its replay fences) are each the step's outcome for
    that offer id, so the runner logs one claim.conflict per pair, not only the first."""
    journal, ingress, _clock, coord, _syncs = env

    def mixed(request: dict) -> Resp:
        ids = [p["offerId"] for p in request["offers"]]
        accepted = ingress.claim(1, idle=None)(request)
        body = json.loads(accepted.body)
        body["conflicts"] = [{"offerId": i, "category": "lease_expired"} for i in ids[1:]]
        return Resp(200, json.dumps(body).encode())

    ingress.script = [mixed]
    result = coord.step(FENCE, want=3)
    ids = [p["offerId"] for p in ingress.requests[0]["offers"]]
    assert result.outcome is ClaimOutcome.ACCEPTED and journal.offer_ids() == ids[:1]
    assert result.conflicts == tuple((i, "lease_expired") for i in ids[1:])


def test_an_idle_batch_names_an_idle_pair_never_a_refused_one(env):
    """A batch whose first pair was refused (its replay found the lease expired) and
    whose others were answered idle: the idle outcome names a pair that was answered
    idle — the refused one is reported as its conflict only (the chaos checker reads
    `claim.idle offerId=X` as "X answered idle")."""
    journal, ingress, _clock, coord, _syncs = env

    def refused_first(request: dict) -> Resp:
        ids = [p["offerId"] for p in request["offers"]]
        body = json.loads(ingress.claim(0, idle="no_candidates")(request).body)
        body["conflicts"] = [{"offerId": ids[0], "category": "lease_expired"}]
        return Resp(200, json.dumps(body).encode())

    ingress.script = [refused_first]
    result = coord.step(FENCE, want=3)
    ids = [p["offerId"] for p in ingress.requests[0]["offers"]]
    assert result.outcome is ClaimOutcome.IDLE and result.reason == "no_candidates"
    assert result.conflicts == ((ids[0], "lease_expired"),)
    assert result.offer_id == ids[1]
    assert journal.offer_ids() == []
