"""Claim coordinator + offer validation (SPEC §6.1-6.3), with a scripted fake pull."""

from __future__ import annotations

import copy
import json
import os
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from qinglong.schemas.canonical import content_digest
from qinglong.worker.coordinator import (
    AUTH_MIN_DELAY_MS,
    ClaimCoordinator,
    ClaimOutcome,
    SessionFence,
)
from qinglong.worker.errors import NetworkError, ProtocolViolation, TimeoutError_, TlsClientRejected
from qinglong.worker.fsio import FileSystem, Step
from qinglong.worker.journal import Journal

WORKER, SESSION = str(uuid.uuid4()), str(uuid.uuid4())
FENCE = SessionFence(WORKER, SESSION, 3, "sha256:" + "ab" * 32)
NOW = 1_700_000_000_000


@dataclass(frozen=True)
class Resp:
    status: int
    body: bytes
    retry_after_ms: int | None = None


def idle_body(retry_after_ms: int = 1000) -> bytes:
    return json.dumps(
        {
            "schema": "qinglong/remote-execution-offer@v1",
            "status": "idle",
            "reason": "no_candidates",
            "stats": {
                "pages": 1,
                "candidates": 0,
                "claimAttempts": 0,
                "races": 0,
                "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 0},
            },
            "truncated": False,
            "retryAfterMs": retry_after_ms,
        }
    ).encode()


def offered(request: dict) -> dict:
    run, attempt, task, rev = (str(uuid.uuid4()) for _ in range(4))
    spec = {"schema": "qinglong/command@v1", "argv": ["echo", "hi"], "env": {}, "timeoutS": 60}
    placement = {
        "required": {"executors": ["remote-worker"], "labels": {}, "runtimes": {}},
        "preferred": [],
    }
    _, digest = content_digest("qinglong/command@v1", "remote_worker", spec, placement)
    return {
        "schema": "qinglong/remote-execution-offer@v1",
        "status": "offered",
        "offerId": request["offerId"],
        "target": {
            "workerId": request["workerId"],
            "sessionId": request["sessionId"],
            "generation": request["generation"],
        },
        "candidate": {
            "runId": run,
            "attemptId": attempt,
            "projectId": str(uuid.uuid4()),
            "taskId": task,
            "executionRevisionId": rev,
            "priority": 0,
            "queuedAtMs": NOW - 10,
        },
        "executionRevision": {
            "id": rev,
            "taskId": task,
            "revision": 1,
            "kind": "qinglong/command@v1",
            "executor": "remote_worker",
            "spec": spec,
            "placement": placement,
            "contentDigest": digest,
            "createdAtMs": NOW - 100,
        },
        "contentDigest": digest,
        "placementScore": 0,
        "lease": {
            "runId": run,
            "attemptId": attempt,
            "workerId": request["workerId"],
            "sessionId": request["sessionId"],
            "sessionGeneration": request["generation"],
            "leaseGeneration": 1,
            "leaseVersion": 1,
            "offerId": request["offerId"],
            "claimedAtMs": NOW,
            "expiresAtMs": NOW + 60_000,
            "updatedAtMs": NOW,
        },
    }


class FakeIngress:
    """Records requests; each call runs the next scripted behaviour."""

    def __init__(self, journal_root: str) -> None:
        self.root = journal_root
        self.requests: list[dict] = []
        self.script: list[Callable[[dict], Resp]] = []
        self.offers: dict[str, dict] = {}  # the server's durable leases, by offer id

    def __call__(self, request: dict) -> Resp:
        # The intent must be on disk before the first byte leaves.
        with open(os.path.join(self.root, "pending-claim.json"), "rb") as f:
            pending = json.load(f)
        assert (pending["offerId"], pending["leaseToken"]) == (
            request["offerId"],
            request["leaseToken"],
        )
        self.requests.append(request)
        return self.script.pop(0)(request)

    def offer(self, request: dict) -> Resp:
        doc = self.offers.setdefault(request["offerId"], offered(request))  # recover-first
        return Resp(200, json.dumps(doc).encode())


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def env(tmp_path):
    root = str(tmp_path / "j")
    journal = Journal.open(root, refresher=False)
    ingress = FakeIngress(root)
    clock = Clock()
    coord = ClaimCoordinator(journal, ingress, clock=clock, rng=random.Random(3))
    yield journal, ingress, clock, coord
    journal.close()


def test_idle_clears_intent(env):
    journal, ingress, _clock, coord = env
    ingress.script = [lambda r: Resp(200, idle_body(1500))]
    result = coord.step(FENCE)
    assert result.outcome is ClaimOutcome.IDLE and result.next_attempt_at_ms == NOW + 1500
    assert journal.load_pending() is None
    req = ingress.requests[0]
    assert req["schema"] == "qinglong/offer-pull-request@v1" and len(req["leaseToken"]) == 43
    assert (req["workerId"], req["sessionId"], req["generation"]) == (WORKER, SESSION, 3)


def test_offer_is_admitted_before_intent_is_cleared(env):
    journal, ingress, _clock, coord = env
    ingress.script = [ingress.offer]
    result = coord.step(FENCE)
    assert result.outcome is ClaimOutcome.ACCEPTED
    entry = journal.get(result.offer_id)
    assert entry.lease["leaseToken"] == ingress.requests[0]["leaseToken"]
    assert journal.load_pending() is None
    # The result carries the durable entry (the runner logs its ids from it), never
    # its token in a repr that could reach a log line.
    assert result.entry == entry
    assert ingress.requests[0]["leaseToken"] not in repr(result)


@pytest.mark.parametrize(
    "failure",
    [
        NetworkError("reset"),
        TimeoutError_("deadline"),
        ProtocolViolation("content_length_mismatch"),
        "truncated_json",
        "http_503",
    ],
)
def test_transient_failures_keep_the_same_intent(env, failure):
    journal, ingress, clock, coord = env

    def fail(r: dict) -> Resp:
        if failure == "truncated_json":
            return Resp(200, idle_body()[:-5])
        if failure == "http_503":
            body = b'{"schema":"qinglong/error@v1","error":"unavailable","reason":"db"}'
            return Resp(503, body, 2000)
        raise failure

    ingress.script = [fail, fail, ingress.offer]
    first = coord.step(FENCE)
    assert first.outcome is ClaimOutcome.RETRY
    assert NOW <= first.next_attempt_at_ms <= NOW + 250 + (2000 if failure == "http_503" else 0)
    clock.now = first.next_attempt_at_ms - 1
    if first.next_attempt_at_ms > NOW:
        assert coord.step(FENCE).outcome is ClaimOutcome.NOT_DUE
    clock.now = first.next_attempt_at_ms
    second = coord.step(FENCE)
    assert second.outcome is ClaimOutcome.RETRY
    assert journal.load_pending().attempts == 2
    clock.now = second.next_attempt_at_ms
    assert coord.step(FENCE).outcome is ClaimOutcome.ACCEPTED
    ids = {(r["offerId"], r["leaseToken"], r["sessionId"]) for r in ingress.requests}
    assert len(ids) == 1 and len(ingress.requests) == 3  # same intent every time


def test_sixteen_attempts_then_moved_aside_and_fresh_intent(env):
    journal, ingress, clock, coord = env

    def down(r: dict) -> Resp:
        raise NetworkError("down")

    ingress.script = [down] * 16 + [lambda r: Resp(200, idle_body())]
    outcomes = []
    for _ in range(16):
        result = coord.step(FENCE)
        outcomes.append(result.outcome)
        clock.now = result.next_attempt_at_ms or clock.now
    assert outcomes == [ClaimOutcome.RETRY] * 15 + [ClaimOutcome.EXHAUSTED]
    assert journal.load_pending() is None
    first_id = ingress.requests[0]["offerId"]
    assert journal.failed_claim_ids() == [first_id]
    assert coord.step(FENCE).outcome is ClaimOutcome.IDLE
    assert ingress.requests[-1]["offerId"] != first_id


@pytest.mark.parametrize("how", ["tls", "401", "403"])
def test_auth_failure_is_slow_retry_with_same_intent(env, how):
    journal, ingress, _clock, coord = env

    def reject(r: dict) -> Resp:
        if how == "tls":
            raise TlsClientRejected("certificate refused")
        body = b'{"schema":"qinglong/error@v1","error":"unauthorized","reason":"bad_secret"}'
        return Resp(int(how), body)

    ingress.script = [reject]
    result = coord.step(FENCE)
    assert result.outcome is ClaimOutcome.AUTH_FAILED
    assert result.next_attempt_at_ms >= NOW + AUTH_MIN_DELAY_MS
    kept = journal.load_pending()
    assert kept.offer_id == ingress.requests[0]["offerId"] and kept.attempts == 1


def test_conflict_moves_intent_aside_with_category(env, tmp_path):
    journal, ingress, _clock, coord = env
    body = b'{"schema":"qinglong/error@v1","error":"conflict","reason":"session_replaced"}'
    ingress.script = [lambda r: Resp(409, body)]
    result = coord.step(FENCE)
    assert result.outcome is ClaimOutcome.CONFLICT and result.reason == "session_replaced"
    assert journal.load_pending() is None
    with open(os.path.join(journal.failed_dir, f"{result.offer_id}.json")) as f:
        assert json.load(f)["reason"] == "conflict_session_replaced"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(offerId=str(uuid.uuid4())), "offer_id_mismatch"),
        (lambda d: d["target"].update(generation=4), "target_mismatch"),
        (lambda d: d["lease"].update(runId=str(uuid.uuid4())), "ids_not_closed"),
        (lambda d: d["candidate"].update(taskId=str(uuid.uuid4())), "ids_not_closed"),
        (lambda d: d["executionRevision"]["spec"].update(argv=["rm", "-rf"]), "digest_mismatch"),
        (lambda d: d["lease"].update(updatedAtMs=NOW + 120_000), "lease_invalid"),
        (lambda d: d["lease"].update(claimedAtMs=NOW + 1), "lease_invalid"),
    ],
)
def test_invalid_offer_is_refused_and_never_admitted(env, mutate, reason):
    journal, ingress, _clock, coord = env

    def bad(r: dict) -> Resp:
        doc = copy.deepcopy(offered(r))
        mutate(doc)
        return Resp(200, json.dumps(doc).encode())

    ingress.script = [bad]
    result = coord.step(FENCE)
    assert (result.outcome, result.reason) == (ClaimOutcome.REJECTED, reason)
    assert journal.count() == 0 and journal.load_pending() is None


def test_schema_invalid_offer_keeps_intent(env):
    journal, ingress, _clock, coord = env

    def with_token(r: dict) -> Resp:
        doc = offered(r)
        doc["lease"]["leaseToken"] = r["leaseToken"]  # never allowed on the wire
        return Resp(200, json.dumps(doc).encode())

    ingress.script = [with_token]
    assert coord.step(FENCE).outcome is ClaimOutcome.RETRY
    assert journal.count() == 0 and journal.load_pending() is not None


def test_crash_between_inbox_and_clear_replays_same_offer(tmp_path):
    root = str(tmp_path / "j")

    def kill_on_clear(step: Step, path: str) -> None:
        if step is Step.UNLINK_FINAL and path.endswith("pending-claim.json"):
            raise OSError(5, "injected")

    journal = Journal.open(root, fs=FileSystem(kill_on_clear), refresher=False)
    ingress = FakeIngress(root)
    ingress.script = [ingress.offer]
    coord = ClaimCoordinator(journal, ingress, clock=Clock(), rng=random.Random(1))
    with pytest.raises(OSError):
        coord.step(FENCE)
    assert journal.count() == 1 and journal.load_pending() is not None
    journal.close()

    journal = Journal.open(root, refresher=False)
    ingress.script = [ingress.offer]
    coord = ClaimCoordinator(journal, ingress, clock=Clock(), rng=random.Random(1))
    assert coord.step(FENCE).outcome is ClaimOutcome.ACCEPTED
    assert journal.count() == 1 and journal.load_pending() is None
    assert len({r["offerId"] for r in ingress.requests}) == 1
    journal.close()


def test_cancellation_propagates_and_keeps_intent(env):
    journal, ingress, _clock, coord = env

    def cancelled(r: dict) -> Resp:
        raise KeyboardInterrupt

    ingress.script = [cancelled]
    with pytest.raises(KeyboardInterrupt):
        coord.step(FENCE)
    kept = journal.load_pending()
    assert kept.offer_id == ingress.requests[0]["offerId"] and kept.last_outcome == "sent"


def test_session_change_abandons_old_intent(env):
    journal, ingress, clock, coord = env

    def down(r: dict) -> Resp:
        raise NetworkError("down")

    ingress.script = [down, lambda r: Resp(200, idle_body())]
    coord.step(FENCE)
    clock.now += 120_000
    new_fence = SessionFence(WORKER, str(uuid.uuid4()), 4, FENCE.capabilities_digest)
    assert coord.step(new_fence).outcome is ClaimOutcome.IDLE
    assert ingress.requests[0]["offerId"] != ingress.requests[1]["offerId"]
    assert ingress.requests[1]["generation"] == 4
    assert journal.failed_claim_ids() == [ingress.requests[0]["offerId"]]


def test_full_inbox_does_not_pull(tmp_path):
    root = str(tmp_path / "j")
    journal = Journal.open(root, capacity=1, refresher=False)
    ingress = FakeIngress(root)
    ingress.script = [ingress.offer]
    coord = ClaimCoordinator(journal, ingress, clock=Clock(), rng=random.Random(1))
    assert coord.step(FENCE).outcome is ClaimOutcome.ACCEPTED
    assert coord.step(FENCE).outcome is ClaimOutcome.INBOX_FULL
    assert len(ingress.requests) == 1
    journal.close()
