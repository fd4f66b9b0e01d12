"""Worker run loop (worker/runner.py) against an in-process fake ingress + fake time,
plus the `qinglong worker run` argument and configuration handling.

The real-ingress behaviour (crash windows, SIGTERM, wire retries) is proven in
test_worker_e2e.py; here every branch of the loop runs in milliseconds.
"""

from __future__ import annotations

import io
import json
import os
import random
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from qinglong.worker.config import ConfigError, WorkerConfig, load_config_file, load_dev_env
from qinglong.worker.coordinator import new_lease_token
from qinglong.worker.errors import NetworkError
from qinglong.worker.eventlog import EventLog
from qinglong.worker.faults import FaultPlan
from qinglong.worker.journal import Journal, PendingClaim
from qinglong.worker.runner import RUN_FOREVER, Runner, RunOptions, StopSignal
from qinglong.worker.session import SessionClient
from tests.py.test_worker_coordinator import idle_body, offered

NOW = 1_700_000_000_000
WORKER = str(uuid.uuid4())
HEARTBEAT_MS = 20_000


def error(status: int, reason: str, retry_after_ms: int | None = None) -> Resp:
    body = {"schema": "qinglong/error@v1", "error": "conflict", "reason": reason}
    return Resp(status, json.dumps(body).encode(), retry_after_ms)


@dataclass(frozen=True)
class Resp:
    status: int
    body: bytes
    retry_after_ms: int | None = None


BATCH_PULL = "qinglong/offer-batch-pull-request@v1"


def batch_pulls(pull: Callable[[dict], Resp]) -> Callable[[dict], Resp]:
    """A fake ingress's single `pull` answering batched pulls too (SPEC §18.1), as
    the real one does: each pair pulled in order, offers (replays and claims)
    collected, the first idle answer ending the batch; any other answer (409
    on the session, 5xx) is the whole batch's."""

    def adapted(body: dict) -> Resp:
        if body.get("schema") != BATCH_PULL:
            return pull(body)
        offers: list[dict] = []
        idle = None
        fence = {k: body[k] for k in ("workerId", "sessionId", "generation")}
        for pair in body["offers"]:
            if idle is not None:
                break
            answer = pull({"schema": "qinglong/offer-pull-request@v1", **fence, **pair})
            if answer.status != 200:
                return answer
            doc = json.loads(answer.body)
            if doc["status"] == "offered":
                offers.append(doc)
            else:
                idle = {k: doc[k] for k in ("reason", "stats", "truncated", "retryAfterMs")}
        batch = {
            "schema": "qinglong/remote-execution-offer-batch@v1",
            "offers": offers,
            "idle": idle,
        }
        return Resp(200, json.dumps(batch).encode())

    return adapted


@dataclass
class Session:
    session_id: str
    generation: int
    state: str = "active"


@dataclass
class FakeIngress:
    """Sessions + recover-first pulls; `queue` runs are handed out, then idle."""

    time: FakeTime
    queue: int = 0
    sessions: list[Session] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)
    leases: dict[str, dict] = field(default_factory=dict)  # by offer id
    pull_script: list[Any] = field(default_factory=list)  # overrides, consumed first
    on_call: Any = None

    def post(self, path: str, body: dict, limit: int) -> Resp:
        self.calls.append((path, dict(body)))
        if self.on_call is not None:
            self.on_call(path, body)
        handler = {
            "/v1/sessions": self._open,
            "/v1/sessions/heartbeat": self._heartbeat,
            "/v1/sessions/close": self._close,
        }[path]
        return handler(body)

    def pull(self, body: dict) -> Resp:
        self.calls.append(("/v1/offers/pull", dict(body)))
        if self.pull_script:
            step = self.pull_script.pop(0)
            if isinstance(step, Exception):
                raise step
            if isinstance(step, Resp):
                return step
        if body["offerId"] in self.leases:  # recover first: same offer, no second lease
            return Resp(200, json.dumps(self.leases[body["offerId"]]).encode())
        session = self._find(body)
        if session is None or session.state != "active":
            return error(409, "session_replaced")
        if self.queue == 0:
            return Resp(200, idle_body(2000))
        self.queue -= 1
        doc = offered(body)
        self.leases[body["offerId"]] = doc
        return Resp(200, json.dumps(doc).encode())

    def _find(self, body: dict) -> Session | None:
        for s in self.sessions:
            if (s.session_id, s.generation) == (body["sessionId"], body["generation"]):
                return s
        return None

    def _doc(self, s: Session) -> bytes:
        doc = {
            "schema": "qinglong/session@v1",
            "workerId": WORKER,
            "sessionId": s.session_id,
            "generation": s.generation,
            "expiresAtMs": self.time.now + 60_000,
            "capabilitiesDigest": "sha256:" + "cd" * 32,
            "heartbeatIntervalMs": HEARTBEAT_MS,
        }
        return json.dumps(doc).encode()

    def _open(self, body: dict) -> Resp:
        for s in self.sessions:
            if s.state == "active":
                s.state = "closed"  # replaced
        s = Session(str(uuid.uuid4()), len(self.sessions) + 1)
        self.sessions.append(s)
        return Resp(201, self._doc(s))

    def _heartbeat(self, body: dict) -> Resp:
        s = self._find(body)
        if s is None:
            return error(409, "session_not_found")
        if s.state != "active":
            return error(409, "session_closed")
        return Resp(200, self._doc(s))

    def _close(self, body: dict) -> Resp:
        s = self._find(body)
        if s is None or s.state != "active":
            return error(409, "session_closed")
        s.state = "closed"
        return Resp(200, self._doc(s))

    def paths(self) -> list[str]:
        return [p for p, _ in self.calls]

    def pulls(self) -> list[dict]:
        return [b for p, b in self.calls if p == "/v1/offers/pull"]


@dataclass
class FakeTime:
    now: int = NOW

    def clock(self) -> int:
        return self.now


class FakeStop(StopSignal):
    """Waiting advances fake time; a budget ends runaway loops."""

    def __init__(self, time: FakeTime, budget_ms: int = 600_000) -> None:
        super().__init__()
        self.time = time
        self.deadline = time.now + budget_ms
        self.waits: list[int] = []

    def wait(self, seconds: float) -> bool:
        ms = int(seconds * 1000)
        self.waits.append(ms)
        self.time.now += ms
        if self.time.now >= self.deadline:
            self.request("budget")
        return self.requested


@dataclass
class Harness:
    root: str
    time: FakeTime
    ingress: FakeIngress
    stop: FakeStop
    out: io.StringIO
    config: WorkerConfig
    journal: Journal | None = None

    def open_journal(self) -> Journal:
        if self.journal is None:
            self.journal = Journal.open(self.root, refresher=False)
        return self.journal

    def runner(self, options: RunOptions = RUN_FOREVER, **kw: Any) -> Runner:
        return Runner(
            self.config,
            self.open_journal(),
            SessionClient(self.ingress.post, WORKER),
            self.ingress.pull,
            events=EventLog(self.out),
            stop=self.stop,
            options=options,
            clock=self.time.clock,
            rng=random.Random(7),
            **kw,
        )

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.out.getvalue().splitlines()]

    def names(self) -> list[str]:
        return [e["event"] for e in self.events()]


@pytest.fixture
def h(tmp_path: Path):
    time = FakeTime()
    config = WorkerConfig(
        ingress_url="https://127.0.0.1:1",
        worker_id=WORKER,
        cert_file="c",
        key_file="k",
        ca_file="a",
        credential_file="x",
        journal=str(tmp_path / "j"),
    )
    harness = Harness(
        str(tmp_path / "j"), time, FakeIngress(time), FakeStop(time), io.StringIO(), config
    )
    yield harness
    harness.stop.close()
    if harness.journal is not None:
        harness.journal.close()


def test_idle_opens_session_pulls_and_closes(h: Harness) -> None:
    code = h.runner(RunOptions(exit_when_idle=True)).run()
    assert code == 0
    assert h.ingress.paths() == ["/v1/sessions", "/v1/offers/pull", "/v1/sessions/close"]
    opened = h.ingress.calls[0][1]
    assert opened["capabilities"] == {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {},
        "runtimes": {},
        "slots": 1,
    }
    assert h.journal.load_pending() is None and h.journal.offer_ids() == []
    assert h.names()[-1] == "worker.stopped"


def test_offer_lands_in_inbox_private_and_pending_cleared(h: Harness) -> None:
    h.ingress.queue = 2
    runner = h.runner(RunOptions(max_offers=2))
    assert runner.run() == 0 and runner.accepted == 2
    pulls = h.ingress.pulls()
    assert len({p["offerId"] for p in pulls}) == 2  # one fresh intent per claim
    assert h.journal.offer_ids() == sorted(p["offerId"] for p in pulls)
    root = Path(h.root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "inbox").stat().st_mode) == 0o700
    for offer_id in h.journal.offer_ids():
        assert stat.S_IMODE((root / "inbox" / f"{offer_id}.json").stat().st_mode) == 0o600
    assert not (root / "pending-claim.json").exists()
    # The log names offers but never carries the token.
    tokens = [p["leaseToken"] for p in pulls]
    assert not any(t in h.out.getvalue() for t in tokens)
    assert h.names().count("claim.accepted") == 2


def _pending(session_id: str, generation: int, *, attempts: int = 1) -> PendingClaim:
    return PendingClaim(
        offer_id=str(uuid.uuid4()),
        lease_token=new_lease_token(),
        worker_id=WORKER,
        session_id=session_id,
        generation=generation,
        capabilities_digest="sha256:" + "cd" * 32,
        attempts=attempts,
        next_attempt_at_ms=NOW,
        created_at_ms=NOW,
    )


def test_restart_resumes_the_pending_session_and_replays_the_same_offer(h: Harness) -> None:
    old = Session(str(uuid.uuid4()), 1)
    h.ingress.sessions.append(old)
    h.ingress.queue = 1
    claim = _pending(old.session_id, 1)
    h.open_journal().save_pending(claim)
    assert h.runner(RunOptions(max_offers=1)).run() == 0
    assert h.ingress.paths()[:2] == ["/v1/sessions/heartbeat", "/v1/offers/pull"]
    assert "/v1/sessions" not in h.ingress.paths()  # no new session: it would replace the old
    pull = h.ingress.pulls()[0]
    assert (pull["offerId"], pull["leaseToken"]) == (claim.offer_id, claim.lease_token)
    assert h.journal.offer_ids() == [claim.offer_id]
    assert h.journal.load_pending() is None
    assert "session.resumed" in h.names()


def test_restart_with_a_dead_session_sets_the_claim_aside_and_opens_anew(h: Harness) -> None:
    claim = _pending(str(uuid.uuid4()), 4)  # unknown to the ingress
    h.open_journal().save_pending(claim)
    assert h.runner(RunOptions(exit_when_idle=True)).run() == 0
    assert h.ingress.paths()[:2] == ["/v1/sessions/heartbeat", "/v1/sessions"]
    assert claim.offer_id not in {p["offerId"] for p in h.ingress.pulls()}
    assert h.journal.failed_claim_ids() == [claim.offer_id]
    abandoned = [e for e in h.events() if e["event"] == "claim.abandoned"]
    assert abandoned[0]["reason"] == "session_lost"


def test_pull_conflict_on_a_replaced_session_reopens(h: Harness) -> None:
    h.ingress.pull_script = [error(409, "session_replaced")]
    h.ingress.queue = 1
    assert h.runner(RunOptions(max_offers=1)).run() == 0
    assert h.ingress.paths()[:4] == [
        "/v1/sessions",
        "/v1/offers/pull",
        "/v1/sessions",
        "/v1/offers/pull",
    ]
    assert h.ingress.sessions[1].generation == 2
    assert {"session.lost", "claim.conflict"} <= set(h.names())


def test_heartbeat_at_the_server_interval_and_reopen_when_expired(h: Harness) -> None:
    beats: list[int] = []

    def watch(path: str, body: dict) -> None:
        if path == "/v1/sessions/heartbeat":
            beats.append(h.time.now)
            if len(beats) == 2:
                h.ingress.sessions[0].state = "closed"  # expired meanwhile

    h.ingress.on_call = watch
    h.stop.deadline = NOW + 3 * HEARTBEAT_MS - 1
    h.runner().run()
    assert beats[0] >= NOW + HEARTBEAT_MS and beats[0] < NOW + HEARTBEAT_MS + 5_000
    assert beats[1] - beats[0] >= HEARTBEAT_MS
    assert [s.generation for s in h.ingress.sessions] == [1, 2]
    assert "session.lost" in h.names()


def test_idle_waits_retry_after_plus_jitter(h: Harness) -> None:
    h.stop.deadline = NOW + 10_000
    h.runner().run()
    assert len(h.ingress.pulls()) >= 3
    # retryAfterMs 2000 (> idlePollMs 1000) plus jitter in [0, 500]
    idle_waits = [w for w in h.stop.waits if w > 0]
    assert all(2000 <= w <= 2500 for w in idle_waits[:2]), idle_waits


def test_transient_pull_failure_keeps_the_claim_and_retries_with_the_same_offer(
    h: Harness,
) -> None:
    h.ingress.pull_script = [NetworkError("reset"), error(503, "db_unavailable", 1500)]
    h.ingress.queue = 1
    assert h.runner(RunOptions(max_offers=1)).run() == 0
    pulls = h.ingress.pulls()
    assert len(pulls) == 3 and len({(p["offerId"], p["leaseToken"]) for p in pulls}) == 1
    assert h.journal.offer_ids() == [pulls[0]["offerId"]]
    assert [e["reason"] for e in h.events() if e["event"] == "claim.retry"] == [
        "NetworkError",
        "http_503",
    ]


def test_stop_mid_claim_keeps_the_pending_claim_and_closes_the_session(h: Harness) -> None:
    h.ingress.pull_script = [error(503, "db_unavailable", 5000)]
    original = h.ingress.pull

    def pull(body: dict) -> Resp:
        response = original(body)
        h.stop.request("sigterm")  # SIGTERM while the claim is kept for a retry
        return response

    h.ingress.queue = 1
    runner = Runner(
        h.config,
        h.open_journal(),
        SessionClient(h.ingress.post, WORKER),
        pull,
        events=EventLog(h.out),
        stop=h.stop,
        clock=h.time.clock,
        rng=random.Random(1),
    )
    assert runner.run() == 0
    pending = h.journal.load_pending()
    assert pending is not None and pending.offer_id == h.ingress.pulls()[0]["offerId"]
    assert h.ingress.paths()[-1] == "/v1/sessions/close"
    assert h.ingress.sessions[0].state == "closed"
    assert len(h.ingress.pulls()) == 1  # nothing sent after the stop


def test_stop_before_send_sends_nothing(h: Harness) -> None:
    def stop_at_open(path: str, body: dict) -> None:
        if path == "/v1/sessions":
            h.stop.request("sigterm")

    h.ingress.on_call = stop_at_open
    assert h.runner().run() == 0
    assert h.ingress.paths() == ["/v1/sessions", "/v1/sessions/close"]


def test_pause_fault_then_stop_raises_drain_at_before_send(h: Harness) -> None:
    class StopDuringPause(FakeStop):
        def wait(self, seconds: float) -> bool:
            self.request("sigterm")
            return True

    h.stop = StopDuringPause(h.time)
    plan = FaultPlan.from_env({"QL_WORKER_PAUSE_AT": "before_send", "QL_WORKER_PAUSE_S": "5"})
    assert h.runner(faults=plan).run() == 0
    assert h.ingress.paths() == ["/v1/sessions", "/v1/sessions/close"]
    assert h.journal.load_pending() is not None  # durable intent, never sent
    assert "fault.pause" in h.names()


def test_auth_refusal_on_open_backs_off_slowly(h: Harness) -> None:
    responses = [error(401, "bad_secret")]
    original = h.ingress._open

    def open_(body: dict) -> Resp:
        return responses.pop(0) if responses else original(body)

    h.ingress._open = open_  # type: ignore[method-assign]
    assert h.runner(RunOptions(exit_when_idle=True)).run() == 0
    assert h.stop.waits[0] >= 30_000
    failed = [e for e in h.events() if e["event"] == "session.open_failed"]
    assert failed[0]["level"] == "error" and failed[0]["reason"] == "http_401_bad_secret"


def test_stop_signal_wakes_a_wait_and_is_sticky() -> None:
    stop = StopSignal()
    try:
        assert stop.wait(0.01) is False
        stop.request("sigterm")
        stop.request("done")
        assert stop.wait(30) is True and stop.reason == "sigterm"
    finally:
        stop.close()


def test_fault_plan_parsing() -> None:
    assert not FaultPlan.from_env({}).active
    plan = FaultPlan.from_env({"QL_WORKER_CRASH_AT": "after_inbox_write,before_send"})
    assert {p.value for p in plan.crash_at} == {"after_inbox_write", "before_send"}
    with pytest.raises(ValueError):
        FaultPlan.from_env({"QL_WORKER_CRASH_AT": "somewhere"})


def test_eventlog_drops_secret_looking_fields() -> None:
    out = io.StringIO()
    EventLog(out).info("x", leaseToken="SECRET", credential="SECRET", offerId="o")
    line = json.loads(out.getvalue())
    assert "SECRET" not in out.getvalue() and line["offerId"] == "o"


# ----------------------------------------------------------------- configuration


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _config_doc(**over: Any) -> dict:
    doc = {
        "ingressUrl": "https://127.0.0.1:8443",
        "workerId": WORKER,
        "certFile": "worker.pem",
        "keyFile": "worker-key.pem",
        "caFile": "/etc/ca.pem",
        "credentialFile": "credential",
        "journal": "journal",
    }
    doc.update(over)
    return doc


def test_config_file_resolves_relative_paths_and_defaults(tmp_path: Path) -> None:
    config = load_config_file(str(_write(tmp_path / "w.json", _config_doc())), journal=None,
                              slots=None)  # fmt: skip
    assert config.cert_file == str(tmp_path / "worker.pem")
    assert config.ca_file == "/etc/ca.pem" and config.journal == str(tmp_path / "journal")
    assert config.capabilities["slots"] == 1 and config.cadence.idle_poll_ms == 1000
    assert config.lock_stale_ms == 30_000 and config.inbox_capacity == 64


def test_config_overrides_and_capabilities(tmp_path: Path) -> None:
    caps = {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {"region": "eu-1"},
        "runtimes": {"python": "3.11.4"},
        "slots": 4,
    }
    doc = _config_doc(capabilities=caps, cadence={"idlePollMs": 50, "jitterMs": 0},
                      lockStaleMs=5000)  # fmt: skip
    config = load_config_file(str(_write(tmp_path / "w.json", doc)), journal="/j", slots=2)
    assert config.journal == "/j" and config.capabilities["slots"] == 2
    assert config.capabilities["labels"] == {"region": "eu-1"}
    assert config.cadence.idle_poll_ms == 50 and config.lock_stale_ms == 5000


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"bogus": 1}, "invalid_config"),
        ({"ingressUrl": "http://127.0.0.1:1"}, "invalid_ingress_url"),
        ({"ingressUrl": "https://u@h:1/path"}, "invalid_ingress_url"),
        ({"workerId": "NOT-A-UUID"}, "invalid_worker_id"),
        ({"lockStaleMs": 1000}, "invalid_value"),
        ({"inboxCapacity": 2000}, "invalid_value"),
        ({"requestTimeoutS": 61}, "invalid_value"),
        ({"cadence": {"idlePollMs": -1}}, "invalid_value"),
        ({"capabilities": {"schema": "qinglong/worker-capabilities@v1"}}, "invalid_capabilities"),
    ],
)
def test_config_refusals(tmp_path: Path, over: dict, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_file(str(_write(tmp_path / "w.json", _config_doc(**over))), journal=None,
                         slots=None)  # fmt: skip
    assert info.value.reason == reason


def test_config_refuses_duplicate_keys_and_missing_journal(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text('{"workerId": "a", "workerId": "b"}')
    with pytest.raises(ConfigError):
        load_config_file(str(path), journal=None, slots=None)
    doc = _config_doc()
    del doc["journal"]
    with pytest.raises(ConfigError) as info:
        load_config_file(str(_write(path, doc)), journal=None, slots=None)
    assert "journal" in info.value.detail


def test_dev_env_form(tmp_path: Path) -> None:
    env = {
        "dsn": "x",
        "ingressUrl": "https://127.0.0.1:4443",
        "caFile": "/s/ca/ca.pem",
        "worker": {
            "workerId": WORKER,
            "certFile": "/s/worker/worker.pem",
            "keyFile": "/s/worker/worker-key.pem",
            "credentialFile": "/s/worker/credential",
        },
    }
    config = load_dev_env(str(_write(tmp_path / "dev-env.json", env)), journal="j", slots=3)
    assert config.ingress_url == "https://127.0.0.1:4443" and config.ca_file == "/s/ca/ca.pem"
    assert config.credential_file == "/s/worker/credential"
    assert config.capabilities == {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": {},
        "runtimes": {},
        "slots": 3,
    }
    assert config.journal == os.path.abspath("j")


# ----------------------------------------------------------------- CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "worker", "run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _last_error(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--dev-env", "x.json"], "missing_argument"),
        (["--dev-env", "x.json", "--journal", "j", "--slots", "0"], "invalid_argument"),
        (["--dev-env", "x.json", "--journal", "j", "--slots", "two"], "invalid_argument"),
        (["--dev-env", "x.json", "--execute"], "missing_argument"),  # --execute exists now
        (["--dev-env", "/nonexistent/dev-env.json", "--journal", "j"], "dev_env_unreadable"),
    ],
)
def test_cli_usage_errors_exit_2_with_a_json_line(args: list[str], reason: str) -> None:
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    line = _last_error(result)
    assert line["event"] == "worker.failed" and line["reason"] == reason


def test_cli_needs_exactly_one_source() -> None:
    assert cli().returncode == 2
    assert cli("--config", "a", "--dev-env", "b").returncode == 2


def test_cli_unusable_credentials_are_a_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.json", _config_doc())
    result = cli("--config", str(path))
    assert result.returncode == 2
    assert _last_error(result)["reason"] == "credentials_unusable"


@pytest.mark.parametrize("stop", ["done", "sigterm"])
def test_stop_without_the_executor_leaves_the_inbox_leased(h: Harness, stop: str) -> None:
    """SPEC §7: closing the session would release the inbox's leases, so a worker
    without --execute that holds offers leaves its session to expire instead."""
    h.ingress.queue = 1
    options = RunOptions(max_offers=1) if stop == "done" else RUN_FOREVER
    if stop == "sigterm":

        def sigterm_after_the_offer(path: str, body: dict) -> None:
            if h.journal is not None and h.journal.offer_ids():
                h.stop.request("sigterm")

        h.ingress.on_call = sigterm_after_the_offer
    runner = h.runner(options)
    assert runner.run() == 0 and runner.accepted == 1
    assert "/v1/sessions/close" not in h.ingress.paths()
    assert h.ingress.sessions[0].state == "active"
    assert len(h.journal.offer_ids()) == 1
    (left,) = [e for e in h.events() if e["event"] == "session.left_open"]
    assert (left["reason"], left["sessionId"]) == ("inbox_leased", h.ingress.sessions[0].session_id)
    assert "session.closed" not in h.names()


# ------------------------------------------------------------------ the inbox keeper


def _keeper(h: Harness, lease_answers: Any = None) -> Any:
    """The keeper as `worker run` wires it without --execute; lease heartbeats
    (the fence probe) are answered by ``lease_answers(index of the offer)``."""
    from qinglong.worker.inbox_keeper import InboxKeeper
    from qinglong.worker.lease_client import LeaseClient

    def post(path: str, body: dict, limit: int) -> Resp:
        assert path == "/v1/leases/heartbeat", path
        h.ingress.calls.append((path, dict(body)))
        return lease_answers(list(h.ingress.leases).index(body["offerId"]))

    return InboxKeeper(h.open_journal(), LeaseClient(post), worker_id=WORKER,
                       events=EventLog(h.out), clock=h.time.clock)  # fmt: skip


def test_restart_without_the_executor_resumes_the_inbox_session(h: Harness) -> None:
    h.ingress.queue = 2
    assert h.runner(RunOptions(max_offers=2), keeper=_keeper(h)).run() == 0
    (first,) = h.ingress.sessions
    h.ingress.calls.clear()
    h.ingress.queue = 2  # more work: a new session would claim it beside the inbox
    h.stop.close()
    h.stop = FakeStop(h.time)  # a new process
    restarted = h.runner(RunOptions(exit_when_idle=True, max_offers=1), keeper=_keeper(h))
    assert restarted.run() == 0
    assert "/v1/sessions" not in h.ingress.paths()  # never opened a second one
    resumed = [e for e in h.events() if e["event"] == "session.resumed"]
    assert resumed[-1]["source"] == "inbox" and resumed[-1]["sessionId"] == first.session_id
    assert {p["sessionId"] for p in h.ingress.pulls()} == {first.session_id}
    assert len(h.open_journal().offer_ids()) == 3 and h.open_journal().aside_ids() == []


def test_a_new_session_moves_the_old_sessions_entries_aside(h: Harness) -> None:
    h.ingress.queue = 2
    assert h.runner(RunOptions(max_offers=2), keeper=_keeper(h)).run() == 0
    old = h.open_journal().offer_ids()
    h.ingress.sessions[0].state = "closed"  # expired / closed meanwhile
    h.ingress.queue = 1
    h.stop.close()
    h.stop = FakeStop(h.time)  # a new process
    assert h.runner(RunOptions(max_offers=1), keeper=_keeper(h)).run() == 0
    assert len(h.ingress.sessions) == 2
    assert h.open_journal().aside_ids() == old
    (new,) = h.open_journal().offer_ids()
    assert h.ingress.leases[new]["lease"]["sessionId"] == h.ingress.sessions[1].session_id
    moved = [e for e in h.events() if e["event"] == "inbox.set_aside"]
    assert sorted(e["offerId"] for e in moved) == old
    assert {e["reason"] for e in moved} == {"session_replaced"}


def test_the_fence_probe_moves_only_dead_leases_aside(h: Harness) -> None:
    """Past expiresAtMs each unstarted entry is probed at an impossible version:
    stale_lease_version = usable (kept), a fence category = dead (aside), a
    transient failure = ask again later."""
    from qinglong.worker.inbox_keeper import PROBE_VERSION

    answers = [error(409, "stale_lease_version"), error(409, "lease_expired"),
               Resp(503, b"{}", 1000)]  # fmt: skip
    h.ingress.queue = 3
    h.stop.deadline = NOW + 120_000
    assert h.runner(keeper=_keeper(h, lambda i: answers[i])).run() == 0
    live, dead, unknown = list(h.ingress.leases)
    assert h.open_journal().offer_ids() == sorted([live, unknown])
    assert h.open_journal().aside_ids() == [dead]
    probes = [b for p, b in h.ingress.calls if p == "/v1/leases/heartbeat"]
    assert {b["leaseVersion"] for b in probes} == {PROBE_VERSION}
    assert all(b["offerId"] != dead for b in probes[3:])  # asked once, then gone
    assert sum(b["offerId"] == unknown for b in probes) >= 2  # asked again
    (moved,) = [e for e in h.events() if e["event"] == "inbox.set_aside"]
    assert (moved["offerId"], moved["reason"]) == (dead, "lease_expired")


def test_load_keeps_only_the_newest_entry_of_a_run(h: Harness) -> None:
    from qinglong.worker.inbox_keeper import InboxKeeper
    from qinglong.worker.journal import InboxEntry

    journal = h.open_journal()
    ids = []
    for claimed in (NOW, NOW + 5_000):
        request = {"offerId": str(uuid.uuid4()), "workerId": WORKER, "sessionId": "s",
                   "generation": 1}  # fmt: skip
        doc = offered(request)
        doc["lease"].update(runId="run-1", claimedAtMs=claimed)
        doc["candidate"]["runId"] = "run-1"
        journal.accept(InboxEntry(doc, dict(doc["lease"], leaseToken=new_lease_token()), NOW))
        ids.append(request["offerId"])
    keeper = InboxKeeper(journal, None, worker_id=WORKER, events=EventLog(h.out))
    keeper.load()
    assert journal.offer_ids() == [ids[1]] and journal.aside_ids() == [ids[0]]
    assert len(keeper) == 1


def test_a_full_inbox_asks_about_its_entries_at_most_every_30_s(h: Harness) -> None:
    """At capacity, every entry not asked within 30 s is probed at once: a dead
    one frees its place for new work; live ones are not asked again per poll."""
    h.journal = Journal.open(h.root, capacity=2, refresher=False)
    h.ingress.queue = 3
    h.stop.deadline = NOW + 20_000  # before any lease expires (NOW + 60 s)
    answers = [error(409, "lease_terminal"), error(409, "stale_lease_version"),
               error(409, "stale_lease_version")]  # fmt: skip
    assert h.runner(keeper=_keeper(h, lambda i: answers[i])).run() == 0
    first, second, third = list(h.ingress.leases)
    assert h.journal.offer_ids() == sorted([second, third])
    assert h.journal.aside_ids() == [first]
    probes = [b["offerId"] for p, b in h.ingress.calls if p == "/v1/leases/heartbeat"]
    assert sorted(probes) == sorted([first, second, third])  # each asked once
    assert "claim.inbox_full" in h.names()
