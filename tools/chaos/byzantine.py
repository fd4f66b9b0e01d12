"""The soak's hostile worker (docs/RELIABILITY.md "The hostile worker").

`python -m tools.chaos.byzantine CONFIG` runs one process with an identity of its
own (certificate + `ql3w_` credential, provisioned like every worker's) that
speaks to the real ingress, through the chaos proxy, over real mTLS, and keeps
trying — at a bounded rate — what a compromised or buggy worker would:

* another worker's offer ids with their real tokens (read from that worker's
  inbox: the soak has every journal) in pulls and in ACKs, heartbeats and
  completions, with the victim's session and generation or with its own;
* wrong session generations, its own replaced sessions, another worker's
  session (pull, heartbeat, close); the body naming another worker; another
  worker's credential; a wrong secret;
* sessions declaring labels it was not granted (SPEC §13.2; it is not
  self-labels): the honest fleet's exact `fleet=exec`, or a case/space variant
  other than its own granted `fleet=Exec` — each must be refused 403
  label_not_granted; its own sessions declare only its granted label;
* it is granted only its own pool (`chaos/hostile`, SPEC §13.1): its honest pulls
  are offered that pool's runs, and its replays of the honest workers' offer ids
  (runs of `chaos/default`) must be refused;
* on the leases it honestly claims (one slot): a wrong token, a wrong
  generation, a stale version, a heartbeat or completion before starting, ACKs
  and completions of a lease it let expire, replays of its own old requests.

Every request and its answer is one op of `byzantine.jsonl` (f `byz`, process
`byz`), with the answers the contract allows for it (`expect`, from the
checker's own table, byzantine_check.EXPECT, which is what judges it); no token
or secret is ever recorded. The checker (tools/chaos/byzantine_check.py, class
j) judges them against the database. Requests whose answer was lost (a proxy drop,
a killed ingress) are recorded without a status and not judged.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qinglong.worker.transport import (
    Credentials,
    FileCredentialProvider,
    HttpsTransport,
    read_credential_file,
)
from tools.chaos.byzantine_check import expected_answers
from tools.chaos.history import INFO, OK, HistoryWriter, Op

PROCESS = "byz"
F = "byz"
RECORD_FILE = "byzantine.jsonl"
PULL, SESSIONS = "/v1/offers/pull", "/v1/sessions"
ACK, HEARTBEAT, COMPLETE = "/v1/leases/ack", "/v1/leases/heartbeat", "/v1/leases/complete"
# Label values that differ from `exec` only by case or spaces (printable: valid, but
# granted only as its own `Exec`), and a key that differs by case (keys are lowercase).
LABEL_VARIANTS = ("Exec", "EXEC", " exec", "exec ", "eXec")
BAD_KEY = "Fleet"

__all__ = ["Hostile", "HostileConfig", "main"]


@dataclass(frozen=True)
class Victim:
    name: str
    worker_id: str
    journal: Path
    credential_file: str


@dataclass(frozen=True)
class HostileConfig:
    ingress_url: str
    worker_id: str
    cert_file: str
    key_file: str
    ca_file: str
    credential_file: str
    record: Path
    victims: tuple[Victim, ...]
    labels: dict[str, str]  # granted to it: all its own sessions declare
    foreign_labels: dict[str, str]  # the honest fleet's, never granted to it
    rate_per_s: float = 4.0
    lease_ttl_s: float = 5.0
    seed: int = 0

    @classmethod
    def load(cls, path: Path) -> HostileConfig:
        doc = json.loads(path.read_text(encoding="utf-8"))
        victims = tuple(Victim(v["name"], v["workerId"], Path(v["journal"]), v["credentialFile"])
                        for v in doc.pop("victims"))  # fmt: skip
        return cls(doc["ingressUrl"], doc["workerId"], doc["certFile"], doc["keyFile"],
                   doc["caFile"], doc["credentialFile"], Path(doc["record"]), victims,
                   dict(doc["labels"]), dict(doc["foreignLabels"]),
                   float(doc.get("ratePerS", 4.0)), float(doc.get("leaseTtlS", 5.0)),
                   int(doc.get("seed", 0)))  # fmt: skip


@dataclass(frozen=True)
class Stolen:
    """What the hostile read from a victim's inbox entry (kept in memory only)."""

    victim: Victim
    offer_id: str
    token: str
    session_id: str
    generation: int
    version: int


@dataclass
class Session:
    session_id: str
    generation: int
    labels: dict[str, str]


@dataclass
class Held:
    """A lease the hostile claimed honestly, and what it did with it."""

    offer_id: str
    token: str
    session_id: str
    generation: int
    version: int
    claimed_at: float
    let_expire: bool
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # old requests


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no answer (network)
    reason: str | None
    doc: dict[str, Any] | None

    @property
    def key(self) -> str:
        return f"{self.status}:{self.reason}" if self.reason else str(self.status)


def new_token() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")


def _other_token(token: str) -> str:
    """A token that is not `token` (also 43 characters, canonical)."""
    while True:
        candidate = new_token()
        if candidate != token:
            return candidate


def _answer(status: int, body: bytes) -> Answer:
    try:
        doc = json.loads(body)
    except ValueError:
        return Answer(status, "unparseable", None)
    if not isinstance(doc, dict):
        return Answer(status, "unparseable", None)
    if status == 200 and doc.get("schema") == "qinglong/remote-execution-offer@v1":
        return Answer(status, str(doc.get("status")), doc)
    reason = doc.get("reason") if status >= 400 else None
    return Answer(status, str(reason) if reason is not None else None, doc)


class _Provider:
    """Its own certificate with a credential of its choosing (someone else's)."""

    def __init__(self, config: HostileConfig, authorization: Callable[[], str]) -> None:
        self._config = config
        self._authorization = authorization

    def credentials(self) -> Credentials:
        c = self._config
        return Credentials(c.cert_file, c.key_file, c.ca_file, self._authorization())


class Hostile:
    def __init__(self, config: HostileConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.writer = HistoryWriter(config.record)
        own = FileCredentialProvider(config.cert_file, config.key_file, config.ca_file,
                                     config.credential_file)  # fmt: skip
        self.http = HttpsTransport(config.ingress_url, own, timeout_s=5)
        self.session: Session | None = None
        self.old_sessions: list[Session] = []
        self.held: Held | None = None
        self.done: list[Held] = []  # finished scripts: their old requests replay
        self.stop = threading.Event()
        self.variant = 0
        self.last_heartbeat = 0.0

    # -- plumbing -----------------------------------------------------------------

    def post(self, path: str, body: dict[str, Any],
             http: HttpsTransport | None = None) -> Answer:  # fmt: skip
        try:
            response = (http or self.http).post_json(path, body)
        except Exception as exc:  # network, TLS, a refused handshake: no answer
            return Answer(None, type(exc).__name__, None)
        return _answer(response.status, response.body)

    def record(self, kind: str, path: str, answer: Answer, *, target: str,
               offer_id: str | None = None, sent_at: int,
               extra: dict[str, Any] | None = None) -> None:  # fmt: skip
        """One op; `expect` is what the checker will hold the answer to (its table)."""
        fields: dict[str, Any] = {"path": path, "status": answer.status,
                                  "expect": list(expected_answers(kind, path)),
                                  "target": target, "sentAtMs": sent_at}  # fmt: skip
        lease = (answer.doc or {}).get("lease") if answer.status == 200 else None
        if isinstance(lease, dict):
            fields["answerVersion"] = lease.get("leaseVersion")
            fields["answerOfferId"] = lease.get("offerId")
            fields["answerWorkerId"] = lease.get("workerId")
        elif answer.status == 200 and answer.doc is not None and "leaseVersion" in answer.doc:
            fields["answerVersion"] = answer.doc.get("leaseVersion")
            fields["answerOfferId"] = answer.doc.get("offerId")
            fields["answerWorkerId"] = answer.doc.get("workerId")
        if answer.status == 200 and answer.doc is not None and "sessionId" in answer.doc:
            fields["answerSessionId"] = answer.doc.get("sessionId")
        fields.update(extra or {})
        kind_type = OK if answer.status is not None else INFO
        self.writer.write(Op(time.time_ns() // 1_000_000, PROCESS, kind_type, F,
                             offer_id=offer_id, value=kind, reason=answer.reason,
                             src="byzantine", extra=fields))  # fmt: skip

    def send(self, kind: str, path: str, body: dict[str, Any], *, target: str,
             offer_id: str | None = None, http: HttpsTransport | None = None,
             extra: dict[str, Any] | None = None) -> Answer:  # fmt: skip
        sent_at = time.time_ns() // 1_000_000
        answer = self.post(path, body, http)
        version = body.get("leaseVersion")
        more = dict(extra or {})
        if isinstance(version, int):
            more["sentVersion"] = version
        if "sessionId" in body:
            more["sentSessionId"], more["sentGeneration"] = body["sessionId"], body["generation"]
        self.record(
            kind, path, answer, target=target, offer_id=offer_id, sent_at=sent_at, extra=more
        )
        return answer

    def _victim_entries(self) -> list[Stolen]:
        found: list[Stolen] = []
        for victim in self.config.victims:
            with contextlib.suppress(OSError):
                names = [n for n in os.listdir(victim.journal / "inbox") if n.endswith(".json")]
                for name in self.rng.sample(names, min(2, len(names))):
                    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                        doc = json.loads((victim.journal / "inbox" / name).read_bytes())
                        lease = doc["lease"]
                        found.append(Stolen(victim, str(doc["offerId"]), str(lease["leaseToken"]),
                                            str(lease["sessionId"]),
                                            int(lease["sessionGeneration"]),
                                            int(lease["leaseVersion"])))  # fmt: skip
        return found

    def _steal(self) -> Stolen | None:
        found = self._victim_entries()
        return self.rng.choice(found) if found else None

    # -- its own session -------------------------------------------------------------

    def capabilities(self, labels: dict[str, str]) -> dict[str, Any]:
        return {"schema": "qinglong/worker-capabilities@v1", "executors": ["remote-worker"],
                "labels": labels, "runtimes": {}, "slots": 1}  # fmt: skip

    def open_session(self) -> None:
        """A new session declaring its own granted labels (replaces its current one)."""
        labels = dict(self.config.labels)
        body = {"schema": "qinglong/session-open-request@v1", "workerId": self.config.worker_id,
                "capabilities": self.capabilities(labels)}  # fmt: skip
        answer = self.send("session_open", SESSIONS, body, target="own",
                           extra={"labels": labels})  # fmt: skip
        for _ in range(4):  # a lost answer may have replaced its session: open until told
            if answer.status is not None and answer.status != 503:
                break
            time.sleep(0.3)
            answer = self.send("session_open", SESSIONS, body, target="own",
                               extra={"labels": labels, "repeat": True})  # fmt: skip
        if answer.status == 201 and answer.doc is not None:
            if self.session is not None:
                self.old_sessions.append(self.session)
            self.session = Session(str(answer.doc["sessionId"]), int(answer.doc["generation"]),
                                   labels)  # fmt: skip
            self.last_heartbeat = time.monotonic()

    def heartbeat_session(self) -> None:
        assert self.session is not None
        body = self._fence("qinglong/session-heartbeat-request@v1", self.session.session_id,
                           self.session.generation)  # fmt: skip
        answer = self.send("session_heartbeat", "/v1/sessions/heartbeat", body, target="own")
        if answer.status == 200:
            self.last_heartbeat = time.monotonic()
        elif answer.status == 409:
            self.session = None

    def _fence(self, schema: str, session_id: str, generation: int,
               worker_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        return {"schema": schema, "workerId": worker_id or self.config.worker_id,
                "sessionId": session_id, "generation": generation}  # fmt: skip

    # -- the probes -----------------------------------------------------------------

    def pull_body(
        self,
        session: Session | Stolen,
        offer_id: str,
        token: str,
        generation: int | None = None,
        worker_id: str | None = None,
    ) -> dict[str, Any]:
        gen = session.generation if generation is None else generation
        body = self._fence("qinglong/offer-pull-request@v1", session.session_id, gen, worker_id)
        body.update(offerId=offer_id, leaseToken=token)
        return body

    def lease_body(self, kind: str, stolen: Stolen | Held, *, session_id: str | None = None,
                   generation: int | None = None, token: str | None = None,
                   version: int | None = None, **more: Any) -> dict[str, Any]:  # fmt: skip
        body = self._fence(
            f"qinglong/lease-{kind}-request@v1",
            session_id or stolen.session_id,
            stolen.generation if generation is None else generation,
        )
        body.update(offerId=stolen.offer_id, leaseToken=token or stolen.token,
                    leaseVersion=stolen.version if version is None else version)  # fmt: skip
        body.update(more)
        return body

    def probe_foreign_pull(self) -> None:
        stolen, own = self._steal(), self.session
        if stolen is None or own is None:
            return
        token = stolen.token if self.rng.random() < 0.5 else new_token()
        # In its own session, or in the victim's (session and generation read with the
        # entry): the offer id alone must decide (offer_foreign).
        theirs = self.rng.random() < 0.5
        body = self.pull_body(stolen if theirs else own, stolen.offer_id, token)
        self.send("pull_foreign_offer", PULL, body, target="foreign",
                  offer_id=stolen.offer_id,
                  extra={"victim": stolen.victim.name, "stolenToken": token == stolen.token,
                         "victimSession": theirs})  # fmt: skip

    def probe_foreign_lease(self) -> None:
        stolen = self._steal()
        if stolen is None:
            return
        path, kind, more = self.rng.choice((
            (ACK, "ack", {"phase": "starting"}), (ACK, "ack", {"phase": "running"}),
            (ACK, "ack", {"phase": "start_failed", "reason": "start_failed"}),
            (HEARTBEAT, "heartbeat", {}),
            (COMPLETE, "complete", {"outcome": "succeeded", "exitCode": 0}),
            (COMPLETE, "complete", {"outcome": "failed", "exitCode": 3, "reason": "exit_nonzero"}),
        ))  # fmt: skip
        own = self.session
        use_own = own is not None and self.rng.random() < 0.3
        version = stolen.version + self.rng.choice((0, 0, 1, -1 if stolen.version > 1 else 0))
        body = self.lease_body(
            kind,
            stolen,
            version=version,
            session_id=own.session_id if use_own and own else None,
            generation=own.generation if use_own and own else None,
            **more,
        )
        self.send(f"{kind}_foreign", path, body, target="foreign",
                  offer_id=stolen.offer_id,
                  extra={"victim": stolen.victim.name, "ownSession": use_own})  # fmt: skip

    def probe_unknown_offer(self) -> None:
        if self.session is None:
            return
        ghost = Stolen(
            self.config.victims[0],
            str(uuid.uuid4()),
            new_token(),
            self.session.session_id,
            self.session.generation,
            1,
        )
        body = self.lease_body("ack", ghost, phase="starting")
        self.send("ack_unknown_offer", ACK, body, target="none", offer_id=ghost.offer_id)

    def probe_wrong_generation(self) -> None:
        """A fresh offer id under its own session with a generation not its own."""
        own = self.session
        if own is None:
            return
        generation = own.generation + self.rng.choice((1, 2, -1 if own.generation > 1 else 7))
        offer_id = str(uuid.uuid4())
        body = self.pull_body(own, offer_id, new_token(), generation)
        self.send("pull_wrong_generation", PULL, body, target="none", offer_id=offer_id)

    def probe_old_session(self) -> None:
        """A fresh offer id under a session it replaced itself."""
        if not self.old_sessions:
            return
        old = self.rng.choice(self.old_sessions)
        offer_id = str(uuid.uuid4())
        self.send(
            "pull_replaced_session",
            PULL,
            self.pull_body(old, offer_id, new_token()),
            target="none",
            offer_id=offer_id,
        )

    def probe_foreign_session(self) -> None:
        """Another worker's session: pull in it, heartbeat it, close it."""
        stolen = self._steal()
        if stolen is None:
            return
        which = self.rng.randrange(4)  # a close half the time: it must never take
        if which == 0:
            offer_id = str(uuid.uuid4())
            self.send("pull_foreign_session", PULL, self.pull_body(stolen, offer_id, new_token()),
                      target="foreign_session", offer_id=offer_id,
                      extra={"victim": stolen.victim.name})  # fmt: skip
            return
        kind, path, schema = (("session_heartbeat_foreign", "/v1/sessions/heartbeat",
                               "qinglong/session-heartbeat-request@v1") if which == 1 else
                              ("session_close_foreign", "/v1/sessions/close",
                               "qinglong/session-close-request@v1"))  # fmt: skip
        self.send(
            kind,
            path,
            self._fence(schema, stolen.session_id, stolen.generation),
            target="foreign_session",
            extra={"victim": stolen.victim.name},
        )

    def probe_identity(self) -> None:
        """The body names another worker: with its own credential, with the victim's."""
        stolen = self._steal()
        if stolen is None:
            return
        impersonate = self.rng.random() < 0.5
        body = self._fence("qinglong/session-heartbeat-request@v1", stolen.session_id,
                           stolen.generation, stolen.victim.worker_id)  # fmt: skip
        http = (
            self._http_as(lambda: read_credential_file(stolen.victim.credential_file))
            if impersonate
            else None
        )
        try:
            self.send("identity_foreign_credential" if impersonate else "identity_body",
                      "/v1/sessions/heartbeat", body,
                      target="foreign_session", http=http,
                      extra={"victim": stolen.victim.name})  # fmt: skip
        finally:
            if http is not None:
                http.close()

    def probe_credentials(self) -> None:
        """Its own body with another worker's credential, or its own with a wrong secret."""
        own = self.session
        if own is None:
            return
        body = self._fence("qinglong/session-heartbeat-request@v1", own.session_id,
                           own.generation)  # fmt: skip
        if self.rng.random() < 0.5:
            victim = self.rng.choice(self.config.victims)
            http = self._http_as(lambda: read_credential_file(victim.credential_file))
            kind = "credential_foreign"
        else:

            def wrong() -> str:
                mine = read_credential_file(self.config.credential_file)
                return mine[:-43] + _other_token(mine[-43:])

            http, kind = self._http_as(wrong), "credential_wrong_secret"
        try:
            self.send(kind, "/v1/sessions/heartbeat", body, target="own", http=http)
        finally:
            http.close()

    def probe_foreign_labels(self) -> None:
        """A session declaring labels it was not granted: the honest fleet's exact ones,
        or a variant of them other than its own (refused: nothing replaced)."""
        variants = [v for v in LABEL_VARIANTS if v not in self.config.labels.values()]
        if self.variant % 2 == 0:
            labels = dict(self.config.foreign_labels)
        else:
            labels = {k: variants[self.variant // 2 % len(variants)]
                      for k in self.config.foreign_labels}  # fmt: skip
        self.variant += 1
        body = {"schema": "qinglong/session-open-request@v1", "workerId": self.config.worker_id,
                "capabilities": self.capabilities(labels)}  # fmt: skip
        answer = self.send("session_open_foreign_labels", SESSIONS, body, target="own",
                           extra={"labels": labels})  # fmt: skip
        if answer.status == 201:  # it should not have: its session was replaced
            self.session = None

    def probe_bad_label_key(self) -> None:
        body = {"schema": "qinglong/session-open-request@v1", "workerId": self.config.worker_id,
                "capabilities": self.capabilities({BAD_KEY: "exec"})}  # fmt: skip
        self.send("session_open_bad_label", SESSIONS, body, target="own")

    def _http_as(self, authorization: Callable[[], str]) -> HttpsTransport:
        return HttpsTransport(self.config.ingress_url, _Provider(self.config, authorization),
                              timeout_s=5)  # fmt: skip

    # -- its own leases -----------------------------------------------------------------

    def pull_own(self) -> None:
        """An honest pull (fresh offer id) from its own session (its granted labels)."""
        own = self.session
        if own is None or self.held is not None:
            return
        offer_id, token = str(uuid.uuid4()), new_token()
        body = self.pull_body(own, offer_id, token)
        answer = self.send("pull_own", PULL, body, target="own", offer_id=offer_id,
                           extra={"labels": own.labels})  # fmt: skip
        for _ in range(4):  # a lost answer: replay the same intent, as a worker would
            if answer.status is not None and answer.status != 503:
                break
            time.sleep(0.3)
            answer = self.send(
                "pull_own",
                PULL,
                body,
                target="own",
                offer_id=offer_id,
                extra={"labels": own.labels},
            )
        if answer.status == 409:
            self.session = None  # open another one next
        if answer.status == 200 and answer.reason == "offered" and answer.doc is not None:
            version = int(answer.doc["lease"]["leaseVersion"])
            self.held = Held(offer_id, token, own.session_id, own.generation, version,
                             time.monotonic(), let_expire=self.rng.random() < 0.25,
                             sent=[(PULL, body)])  # fmt: skip

    def legit(self, kind: str, path: str, body: dict[str, Any], held: Held) -> Answer:
        """A call the holder may make: answered 200, or refused with a cause the
        checker verifies (its lease expired under load). A lost answer is repeated
        with the same version, as the contract says."""
        answer = self.send(kind, path, body, target="own", offer_id=held.offer_id)
        for _ in range(4):
            if answer.status is not None and answer.status != 503:
                break
            time.sleep(0.3)
            answer = self.send(kind, path, body, target="own", offer_id=held.offer_id,
                               extra={"repeat": True})  # fmt: skip
        held.sent.append((path, body))
        return answer

    def own_step(self) -> None:
        """One step of the script on the lease it holds."""
        held = self.held
        assert held is not None
        if held.let_expire:
            if time.monotonic() - held.claimed_at < self.config.lease_ttl_s + 1.5:
                return
            self.lost_lease(held)
            return
        # In a row: the lease TTL (5 s in the soak) leaves no time for one per tick.
        for kind, path, body in self._own_refusals(held):
            self.send(kind, path, body, target="own", offer_id=held.offer_id)
        self.own_lifecycle(held)

    def _own_refusals(self, held: Held) -> list[tuple[str, str, dict[str, Any]]]:
        """A wrong token, a wrong generation, a stale version, a heartbeat and a
        completion before starting: each refused, none changes the lease."""
        return [
            (
                "own_ack_wrong_token",
                ACK,
                self.lease_body("ack", held, phase="starting", token=_other_token(held.token)),
            ),
            (
                "own_ack_wrong_generation",
                ACK,
                self.lease_body("ack", held, phase="starting", generation=held.generation + 1),
            ),
            (
                "own_ack_stale_version",
                ACK,
                self.lease_body("ack", held, phase="starting", version=held.version + 1),
            ),
            ("own_heartbeat_unstarted", HEARTBEAT, self.lease_body("heartbeat", held)),
            (
                "own_complete_unstarted",
                COMPLETE,
                self.lease_body("complete", held, outcome="succeeded", exitCode=0),
            ),
        ]

    def own_lifecycle(self, held: Held) -> None:
        """Start, replay the start, complete, replay the completion; then the old
        requests of a finished lease must all be refused."""
        start = self.lease_body("ack", held, phase="starting")
        answer = self.legit("own_ack_starting", ACK, start, held)
        if answer.status != 200:
            self.finish(held)
            return
        version = int((answer.doc or {}).get("leaseVersion", held.version + 1))
        self.send("own_ack_replay", ACK, start, target="own",
                  offer_id=held.offer_id, extra={"expectVersion": version})  # fmt: skip
        held.version = version
        for stale in (version + 1, version - 1):  # a completion decided on another version
            self.send("own_complete_stale", COMPLETE,
                      self.lease_body("complete", held, version=stale, outcome="succeeded",
                                      exitCode=0), target="own",
                      offer_id=held.offer_id)  # fmt: skip
        self.send("own_heartbeat_stale", HEARTBEAT,
                  self.lease_body("heartbeat", held, version=version - 1), target="own",
                  offer_id=held.offer_id)  # fmt: skip
        done = self.lease_body("complete", held, outcome="succeeded", exitCode=0)
        answer = self.legit("own_complete", COMPLETE, done, held)
        if answer.status == 200:
            final = int((answer.doc or {}).get("leaseVersion", version + 1))
            self.send("own_complete_replay", COMPLETE, done, target="own",
                      offer_id=held.offer_id, extra={"expectVersion": final})  # fmt: skip
            held.version = final
            self.send(
                "own_heartbeat_terminal",
                HEARTBEAT,
                self.lease_body("heartbeat", held),
                target="own",
                offer_id=held.offer_id,
            )
        self.finish(held)

    def lost_lease(self, held: Held) -> None:
        """It let the lease expire: its ACK and completion must be refused."""
        self.send("lost_ack", ACK, self.lease_body("ack", held, phase="starting"),
                  target="own", offer_id=held.offer_id)  # fmt: skip
        self.send("lost_complete", COMPLETE,
                  self.lease_body("complete", held, outcome="succeeded", exitCode=0),
                  target="own", offer_id=held.offer_id)  # fmt: skip
        self.finish(held)

    def finish(self, held: Held) -> None:
        self.done.append(held)
        self.done = self.done[-8:]
        self.held = None

    def probe_replay_old(self) -> None:
        """A replay of one of its own old requests of a lease that is over. A pull
        replay may be answered idle by the idle view (the lease released)."""
        finished = [h for h in self.done if h.sent]
        if not finished:
            return
        held = self.rng.choice(finished)
        path, body = self.rng.choice(held.sent)
        if path == COMPLETE:
            return  # an exact completion repeat is answered 200: own_complete_replay
        self.send("replay_old", path, body, target="own", offer_id=held.offer_id)

    # -- the loop -----------------------------------------------------------------------

    PROBES = (
        "probe_foreign_pull",
        "probe_foreign_lease",
        "probe_foreign_lease",
        "probe_unknown_offer",
        "probe_wrong_generation",
        "probe_old_session",
        "probe_foreign_session",
        "probe_foreign_session",
        "probe_identity",
        "probe_credentials",
        "probe_bad_label_key",
        "probe_foreign_labels",
        "probe_replay_old",
    )

    def tick(self) -> None:
        if self.session is None or time.monotonic() - self.last_heartbeat > 90:
            self.open_session()
            return
        if time.monotonic() - self.last_heartbeat > 10:
            self.heartbeat_session()
            return
        if self.held is not None:
            self.own_step()
            return
        if self.held is None and self.rng.random() < 0.03:
            self.open_session()  # another session (replaces its current one: an old one)
            return
        if self.held is None and self.rng.random() < 0.3:
            self.pull_own()  # often: the others take most runs first
            return
        getattr(self, self.rng.choice(self.PROBES))()

    def run(self) -> None:
        gap = 1.0 / self.config.rate_per_s
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                self.tick()
            except Exception as exc:  # a bug of ours: say so, keep going
                print(f"byz tick failed: {type(exc).__name__}: {exc}", file=sys.stderr,
                      flush=True)  # fmt: skip
            self.stop.wait(max(0.0, gap - (time.monotonic() - began)))
        self.http.close()
        self.writer.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    hostile = Hostile(HostileConfig.load(Path(args[0])))
    signal.signal(signal.SIGTERM, lambda *_: hostile.stop.set())
    signal.signal(signal.SIGINT, lambda *_: hostile.stop.set())
    hostile.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
