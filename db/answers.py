"""What a `ql.` function answers, typed: one class per kind of answer.

The worker-facing functions answer a jsonb envelope `{status, ...}`; each
outcome is a frozen dataclass here and each function's answer a union of them
(a pull: `Offered | Idle | Conflict | Denied`), parsed once, where the call runs
(`qinglong.db.api.Call`), so callers branch on classes instead of reading
string keys. Every outcome keeps the envelope itself in `doc`. An answer of
a shape this module does not know raises `AnswerError` (the ingress answers
it 503 `invalid_projection`).

Where the wire repeats the database's document as it is (an offer, a lease, a
session), the answer keeps it untouched in `doc` (or a named field holding
the sub-document), so the bytes sent are the bytes the database built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from qinglong.log_text import LogPage, LogShapeError

JsonObject = dict[str, Any]
A = TypeVar("A")


class AnswerError(Exception):
    """A `ql.` function answered a shape its Python type does not allow."""

    def __init__(self, function: str, detail: str) -> None:
        super().__init__(f"ql.{function}: {detail}")
        self.function = function
        self.detail = detail


def _object(function: str, raw: object) -> JsonObject:
    if not isinstance(raw, dict):
        raise AnswerError(function, f"answer is a {type(raw).__name__}, not an object")
    return raw


def _status(function: str, raw: object) -> tuple[JsonObject, str]:
    doc = _object(function, raw)
    status = doc.get("status")
    if not isinstance(status, str):
        raise AnswerError(function, "answer is not an envelope (no status)")
    return doc, status


def _sub_object(function: str, doc: JsonObject, key: str) -> JsonObject:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise AnswerError(function, f"{doc['status']} answer without an object {key!r}")
    return value


def _int(function: str, doc: JsonObject, key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise AnswerError(function, f"{key!r} is not an integer")
    return value


def _unknown(function: str, status: str) -> AnswerError:
    return AnswerError(function, f"unexpected status {status!r}")


class Envelope:
    """Every outcome keeps the envelope as the database built it (`doc`), and
    its `status` is the envelope's."""

    __slots__ = ()
    doc: JsonObject

    @property
    def status(self) -> str:
        return str(self.doc["status"])


# ------------------------------------------------------------ outcomes shared by many calls


@dataclass(frozen=True, slots=True)
class Denied(Envelope):
    """The credential was refused (SPEC §16.2): stored in security_audit already."""

    reason: str
    http_status: int | None
    doc: JsonObject

    @classmethod
    def parse(cls, doc: JsonObject) -> Denied:
        reason, http_status = doc.get("reason", "denied"), doc.get("httpStatus")
        return cls(str(reason), http_status if isinstance(http_status, int) else None, doc)


@dataclass(frozen=True, slots=True)
class Conflict(Envelope):
    """A fence moved (lease lost, offer taken, ...): `category` says which; a
    `log_offset` conflict of `append_log` also names the stored length."""

    category: str
    doc: JsonObject

    @classmethod
    def parse(cls, doc: JsonObject) -> Conflict:
        return cls(str(doc.get("category", "conflict")), doc)

    @property
    def stored_bytes(self) -> int | None:
        stored = self.doc.get("storedBytes")
        return stored if isinstance(stored, int) and not isinstance(stored, bool) else None


def _denied_or(
    function: str, raw: object, outcomes: dict[str, Callable[[JsonObject], A]]
) -> A | Denied:
    doc, status = _status(function, raw)
    if status == "denied":
        return Denied.parse(doc)
    parse = outcomes.get(status)
    if parse is None:
        raise _unknown(function, status)
    return parse(doc)


# ------------------------------------------------------------ credentials and sessions


@dataclass(frozen=True, slots=True)
class Authenticated(Envelope):
    doc: JsonObject


AuthAnswer: TypeAlias = Authenticated | Denied


def parse_auth(raw: object) -> AuthAnswer:
    return _denied_or("authenticate_worker", raw, {"ok": Authenticated})


@dataclass(frozen=True, slots=True)
class Rotated(Envelope):
    """The new credential's public fields (the secret never crosses the database)."""

    credential: JsonObject
    doc: JsonObject


RotateAnswer: TypeAlias = Rotated | Denied


def parse_rotate(raw: object) -> RotateAnswer:
    return _denied_or(
        "rotate_credential",
        raw,
        {"ok": lambda doc: Rotated(_sub_object("rotate_credential", doc, "credential"), doc)},
    )


@dataclass(frozen=True, slots=True)
class SessionOk(Envelope):
    """A session's projection (`session`, sent as it is); `draining`: an operator
    drain is under way (heartbeat), so the session takes no new offer."""

    session: JsonObject
    draining: bool
    doc: JsonObject


SessionAnswer: TypeAlias = SessionOk | Denied


def _session_parser(function: str) -> Callable[[object], SessionAnswer]:
    def parse(raw: object) -> SessionAnswer:
        return _denied_or(
            function,
            raw,
            {
                "ok": lambda doc: SessionOk(
                    _sub_object(function, doc, "session"), doc.get("draining") is True, doc
                )
            },
        )

    return parse


parse_open_session = _session_parser("open_session")
parse_heartbeat_session = _session_parser("heartbeat_session")
parse_close_session = _session_parser("close_session")


@dataclass(frozen=True, slots=True)
class ItemFailed(Envelope):
    """One item of a batched call raised `sqlstate` (the rest went on)."""

    sqlstate: str | None
    doc: JsonObject


HeartbeatItemAnswer: TypeAlias = SessionOk | Denied | ItemFailed


def parse_heartbeat_sessions(raw: object) -> list[HeartbeatItemAnswer]:
    if not isinstance(raw, list):
        raise AnswerError("heartbeat_sessions", "answer is not a list")
    items: list[HeartbeatItemAnswer] = []
    for one in raw:
        doc, status = _status("heartbeat_sessions", one)
        if status == "error":
            sqlstate = doc.get("sqlstate")
            items.append(ItemFailed(sqlstate if isinstance(sqlstate, str) else None, doc))
        else:
            items.append(parse_heartbeat_session(doc))
    return items


# ------------------------------------------------------------ pulls


@dataclass(frozen=True, slots=True)
class Offered(Envelope):
    """An offer (`offer`, sent as it is); `status` `idempotent` when it is the
    replay of one already claimed with this offer id and token."""

    offer: JsonObject
    doc: JsonObject

    @property
    def replayed(self) -> bool:
        return self.status == "idempotent"


@dataclass(frozen=True, slots=True)
class Idle(Envelope):
    """Nothing to offer: the envelope (`doc`: reason, stats, truncated) as built."""

    doc: JsonObject


PullAnswer: TypeAlias = Offered | Idle | Conflict | Denied


def parse_pull(raw: object) -> PullAnswer:
    def offered(doc: JsonObject) -> Offered:
        return Offered(_sub_object("pull_offer", doc, "offer"), doc)

    return _denied_or(
        "pull_offer",
        raw,
        {"offered": offered, "idempotent": offered, "idle": Idle, "conflict": Conflict.parse},
    )


@dataclass(frozen=True, slots=True)
class PulledBatch(Envelope):
    """A batched pull: the offers (the first `recovered` are replays), the
    pairs that conflicted, and the idle envelope when the queue ran dry."""

    offers: list[JsonObject]
    conflicts: list[Any]
    idle: JsonObject | None
    recovered: int
    doc: JsonObject


PullBatchAnswer: TypeAlias = PulledBatch | Denied


def parse_pull_batch(raw: object) -> PullBatchAnswer:
    def batch(doc: JsonObject) -> PulledBatch:
        offers, conflicts, idle = doc.get("offers"), doc.get("conflicts"), doc.get("idle")
        if (
            not isinstance(offers, list)
            or not isinstance(conflicts, list)
            or not isinstance(idle, dict | None)
        ):
            raise AnswerError("pull_offers", "batch answer without offers/conflicts/idle")
        recovered = doc.get("recovered")
        recovered = recovered if isinstance(recovered, int) and 0 <= recovered <= len(offers) else 0
        return PulledBatch(
            [o for o in offers if isinstance(o, dict)], conflicts, idle, recovered, doc
        )

    return _denied_or("pull_offers", raw, {"batch": batch})


# ------------------------------------------------------------ leases


@dataclass(frozen=True, slots=True)
class LeaseOk(Envelope):
    """The lease's projection after the call (`lease`, sent as it is); `status`
    `idempotent` for a replay of the same transition."""

    lease: JsonObject
    doc: JsonObject


LeaseAnswer: TypeAlias = LeaseOk | Conflict | Denied


def _lease_parser(function: str) -> Callable[[object], LeaseAnswer]:
    def lease(doc: JsonObject) -> LeaseOk:
        return LeaseOk(_sub_object(function, doc, "lease"), doc)

    def parse(raw: object) -> LeaseAnswer:
        return _denied_or(
            function, raw, {"ok": lease, "idempotent": lease, "conflict": Conflict.parse}
        )

    return parse


parse_ack_lease = _lease_parser("ack_lease")
parse_heartbeat_lease = _lease_parser("heartbeat_lease")
parse_complete_lease = _lease_parser("complete_lease")


@dataclass(frozen=True, slots=True)
class LogAppended(Envelope):
    """The live log now holds `stored_bytes`; `truncated`: its cap was reached."""

    stored_bytes: int
    truncated: bool
    doc: JsonObject


LogAnswer: TypeAlias = LogAppended | Conflict | Denied


def parse_append_log(raw: object) -> LogAnswer:
    def appended(doc: JsonObject) -> LogAppended:
        truncated = doc.get("truncated")
        if not isinstance(truncated, bool):
            raise AnswerError("append_log", "'truncated' is not a boolean")
        return LogAppended(_int("append_log", doc, "storedBytes"), truncated, doc)

    return _denied_or(
        "append_log", raw, {"ok": appended, "idempotent": appended, "conflict": Conflict.parse}
    )


@dataclass(frozen=True, slots=True)
class WrappedSecrets(Envelope):
    """A started lease's secrets, still wrapped (`doc`: runId, projectId,
    dataKey, secrets; hex): the ingress opens them with its KEK."""

    doc: JsonObject


SecretsAnswer: TypeAlias = WrappedSecrets | Conflict | Denied


def parse_lease_secrets(raw: object) -> SecretsAnswer:
    return _denied_or("lease_secrets", raw, {"ok": WrappedSecrets, "conflict": Conflict.parse})


# ------------------------------------------------------------ operator calls (documents)
# The control-plane functions answer one document each (no envelope): the
# commands print it as it is (`doc`); the fields Python acts on are typed.


def _str(function: str, doc: JsonObject, key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise AnswerError(function, f"{key!r} is not a non-empty string")
    return value


def _bool(function: str, doc: JsonObject, key: str) -> bool:
    value = doc.get(key)
    if not isinstance(value, bool):
        raise AnswerError(function, f"{key!r} is not a boolean")
    return value


def _counts(function: str, doc: JsonObject, keys: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(_int(function, doc, key) for key in keys)


@dataclass(frozen=True, slots=True)
class WorkerRegistered:
    worker_id: str
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WorkerRegistered:
        doc = _object("register_worker", raw)
        return cls(_str("register_worker", doc, "workerId"), doc)


@dataclass(frozen=True, slots=True)
class CredentialIssued:
    """`expires_at_ms` None: the credential never expires."""

    credential_id: str
    worker_id: str
    expires_at_ms: int | None
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> CredentialIssued:
        function = "issue_credential"
        doc = _object(function, raw)
        expires = None if doc.get("expiresAtMs") is None else _int(function, doc, "expiresAtMs")
        return cls(
            _str(function, doc, "credentialId"), _str(function, doc, "workerId"), expires, doc
        )


@dataclass(frozen=True, slots=True)
class RevisionPublished:
    """The task's current revision after a publish; `created` false: the same
    content (and signature, pool) was already current."""

    task_id: str
    content_digest: str
    created: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RevisionPublished:
        function = "publish_revision"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "taskId"),
            _str(function, doc, "contentDigest"),
            _bool(function, doc, "created"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class TaskPrepared:
    task_id: str
    created: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> TaskPrepared:
        doc = _object("prepare_task", raw)
        return cls(_str("prepare_task", doc, "taskId"), _bool("prepare_task", doc, "created"), doc)


@dataclass(frozen=True, slots=True)
class RunsEnqueued:
    """The new runs' ids; `existing`: the idempotency key named a run already there."""

    run_ids: list[str]
    existing: bool
    doc: JsonObject

    @classmethod
    def parse_as(cls, function: str) -> Callable[[object], RunsEnqueued]:
        def parse(raw: object) -> RunsEnqueued:
            doc = _object(function, raw)
            run_ids = doc.get("runIds")
            if not isinstance(run_ids, list) or not all(isinstance(r, str) for r in run_ids):
                raise AnswerError(function, "'runIds' is not a list of ids")
            return cls(run_ids, _bool(function, doc, "existing"), doc)

        return parse


SWEPT = ("expired", "lost", "retried", "failed", "cancelled", "skipped", "promoted")


@dataclass(frozen=True, slots=True)
class Swept:
    """One batch of `sweep_leases`: what it did to each kind, and whether more is due."""

    counts: dict[str, int]  # by the names of SWEPT, as the sweeper logs them
    more: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> Swept:
        doc = _object("sweep_leases", raw)
        counts = dict(zip(SWEPT, _counts("sweep_leases", doc, SWEPT), strict=True))
        return cls(counts, _bool("sweep_leases", doc, "more"), doc)


@dataclass(frozen=True, slots=True)
class RunsPruned:
    runs: int
    attempts: int
    leases: int
    events: int
    more: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RunsPruned:
        doc = _object("prune_runs", raw)
        runs, attempts, leases, events = _counts(
            "prune_runs", doc, ("runs", "attempts", "leases", "events")
        )
        return cls(runs, attempts, leases, events, _bool("prune_runs", doc, "more"), doc)


@dataclass(frozen=True, slots=True)
class AuditPruned:
    security_audit: int
    more: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> AuditPruned:
        doc = _object("prune_audit", raw)
        return cls(
            _int("prune_audit", doc, "securityAudit"), _bool("prune_audit", doc, "more"), doc
        )


@dataclass(frozen=True, slots=True)
class FleetPruned:
    sessions: int
    placement_classes: int
    fleet_events: int
    more: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> FleetPruned:
        doc = _object("prune_fleet", raw)
        sessions, classes, events = _counts(
            "prune_fleet", doc, ("sessions", "placementClasses", "fleetEvents")
        )
        return cls(sessions, classes, events, _bool("prune_fleet", doc, "more"), doc)


def _list(function: str, doc: JsonObject, key: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise AnswerError(function, f"{key!r} is not a list")
    return value


# ------------------------------------------------------------ secrets (SPEC §14.1)
# Wrapped keys and ciphertexts only; the hex fields stay in `doc` for
# `secrets_crypto.WrappedKey.from_json`.


@dataclass(frozen=True, slots=True)
class DataKeyStored:
    """The project's wrapped data key (`doc`: keyId, kekId, nonce, wrappedKey, hex);
    `created`: the offered one was installed."""

    project_id: str
    created: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> DataKeyStored:
        function = "project_data_key"
        doc = _object(function, raw)
        return cls(_str(function, doc, "projectId"), _bool(function, doc, "created"), doc)


@dataclass(frozen=True, slots=True)
class SecretListed:
    name: str
    version: int


@dataclass(frozen=True, slots=True)
class SecretList:
    """A project's secrets by name and latest version (never a value)."""

    secrets: list[SecretListed]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> SecretList:
        function = "list_secrets"
        doc = _object(function, raw)
        rows = [_object(function, row) for row in _list(function, doc, "secrets")]
        return cls(
            [
                SecretListed(_str(function, row, "name"), _int(function, row, "version"))
                for row in rows
            ],
            doc,
        )

    def version_of(self, name: str) -> int:
        """The latest version of `name` (0: none yet)."""
        return next((s.version for s in self.secrets if s.name == name), 0)


@dataclass(frozen=True, slots=True)
class SecretVersion:
    """A secret version stored (`set_secret`) or deleted (`delete_secret`)."""

    name: str
    version: int
    doc: JsonObject

    @classmethod
    def parse_as(cls, function: str) -> Callable[[object], SecretVersion]:
        def parse(raw: object) -> SecretVersion:
            doc = _object(function, raw)
            return cls(_str(function, doc, "name"), _int(function, doc, "version"), doc)

        return parse


@dataclass(frozen=True, slots=True)
class DataKeys:
    """Every project's wrapped data key (each `{projectId, keyId, kekId, nonce, wrappedKey}`)."""

    keys: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> DataKeys:
        doc = _object("list_data_keys", raw)
        return cls(
            [_object("list_data_keys", k) for k in _list("list_data_keys", doc, "keys")], doc
        )


@dataclass(frozen=True, slots=True)
class KeysRewrapped:
    rewrapped: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> KeysRewrapped:
        doc = _object("rewrap_data_keys", raw)
        return cls(_int("rewrap_data_keys", doc, "rewrapped"), doc)


# ------------------------------------------------------------ certificates (SPEC §16.3)


@dataclass(frozen=True, slots=True)
class ExpiringCounts:
    credentials: int
    certificates: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> ExpiringCounts:
        doc = _object("expiring_counts", raw)
        credentials, certificates = _counts("expiring_counts", doc, ("credentials", "certificates"))
        return cls(credentials, certificates, doc)


@dataclass(frozen=True, slots=True)
class RevokedSerials:
    """One page of revoked certificate serials (canonical), oldest first."""

    serials: list[str]
    last_seq: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RevokedSerials:
        function = "revoked_certificates"
        doc = _object(function, raw)
        serials = _list(function, doc, "serials")
        if not all(isinstance(s, str) for s in serials):
            raise AnswerError(function, "'serials' holds a non-string")
        return cls(serials, _int(function, doc, "lastSeq"), doc)


# ------------------------------------------------------------ live logs (SPEC §15.3)


def _log_page_parser(function: str) -> Callable[[object], LogPage]:
    """A page of an attempt's stored log, as `qinglong.log_text.LogPage` reads it."""

    def parse(raw: object) -> LogPage:
        try:
            return LogPage.from_json(raw)
        except LogShapeError as exc:
            raise AnswerError(function, str(exc)) from None

    return parse


parse_run_log = _log_page_parser("run_log")
parse_producer_run_log = _log_page_parser("producer_run_log")


# ------------------------------------------------------------ workers, pools, sessions


@dataclass(frozen=True, slots=True)
class WorkerDisabled:
    """`drain`: its active sessions drain instead of closing."""

    worker_id: str
    drain: bool
    sessions_closed: int
    sessions_draining: int
    leases_released: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WorkerDisabled:
        function = "disable_worker"
        doc = _object(function, raw)
        closed, draining, released = _counts(
            function, doc, ("sessionsClosed", "sessionsDraining", "leasesReleased")
        )
        return cls(
            _str(function, doc, "workerId"),
            _bool(function, doc, "drain"),
            closed,
            draining,
            released,
            doc,
        )


@dataclass(frozen=True, slots=True)
class WorkerEnabled:
    worker_id: str
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WorkerEnabled:
        doc = _object("enable_worker", raw)
        return cls(_str("enable_worker", doc, "workerId"), doc)


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """An operator close: `state` closed, or draining (`drain`) until its
    `leases_running` end."""

    session_id: str
    worker_id: str
    state: str
    leases_released: int
    leases_running: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> SessionEnded:
        function = "end_session"
        doc = _object(function, raw)
        released, running = _counts(function, doc, ("leasesReleased", "leasesRunning"))
        return cls(
            _str(function, doc, "sessionId"),
            _str(function, doc, "workerId"),
            _str(function, doc, "state"),
            released,
            running,
            doc,
        )


@dataclass(frozen=True, slots=True)
class PoolCreated:
    pool_id: str
    project: str
    name: str
    created: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> PoolCreated:
        function = "create_pool"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "poolId"),
            _str(function, doc, "project"),
            _str(function, doc, "name"),
            _bool(function, doc, "created"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class PoolGranted:
    """`granted` false: the worker held the grant already."""

    worker_id: str
    pool: str
    granted: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> PoolGranted:
        function = "grant_pool"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "workerId"),
            _str(function, doc, "pool"),
            _bool(function, doc, "granted"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class PoolRevoked:
    """`leases_released`: the unstarted leases the revoke released at once."""

    worker_id: str
    pool: str
    revoked: bool
    leases_released: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> PoolRevoked:
        function = "revoke_pool"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "workerId"),
            _str(function, doc, "pool"),
            _bool(function, doc, "revoked"),
            _int(function, doc, "leasesReleased"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class WorkerLabelled:
    """The worker's granted labels after the change, and what it cost."""

    worker_id: str
    labels: dict[str, str]
    self_labels: bool
    sessions_draining: int
    leases_released: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WorkerLabelled:
        function = "label_worker"
        doc = _object(function, raw)
        labels = doc.get("labels")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise AnswerError(function, "'labels' is not an object of strings")
        draining, released = _counts(function, doc, ("sessionsDraining", "leasesReleased"))
        return cls(
            _str(function, doc, "workerId"),
            labels,
            _bool(function, doc, "selfLabels"),
            draining,
            released,
            doc,
        )


# ------------------------------------------------------------ identities and tokens


@dataclass(frozen=True, slots=True)
class CredentialRevoked:
    credential_id: str
    revoked_at_ms: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> CredentialRevoked:
        function = "revoke_credential"
        doc = _object(function, raw)
        return cls(_str(function, doc, "credentialId"), _int(function, doc, "revokedAtMs"), doc)


@dataclass(frozen=True, slots=True)
class CertificateRecorded:
    worker_id: str
    serial: str
    not_after_ms: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> CertificateRecorded:
        function = "record_certificate"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "workerId"),
            _str(function, doc, "serial"),
            _int(function, doc, "notAfterMs"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class CertificateRevoked:
    """`revoked` false: it already was (the first revocation's time stays);
    `worker_id` None: no worker's recorded certificate has this serial."""

    serial: str
    worker_id: str | None
    revoked: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> CertificateRevoked:
        function = "revoke_certificate"
        doc = _object(function, raw)
        worker = None if doc.get("workerId") is None else _str(function, doc, "workerId")
        return cls(_str(function, doc, "serial"), worker, _bool(function, doc, "revoked"), doc)


@dataclass(frozen=True, slots=True)
class ProjectTokenCreated:
    token_id: str
    project: str
    scopes: list[str]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> ProjectTokenCreated:
        function = "create_project_token"
        doc = _object(function, raw)
        scopes = _list(function, doc, "scopes")
        if not all(isinstance(s, str) for s in scopes):
            raise AnswerError(function, "'scopes' holds a non-string")
        return cls(_str(function, doc, "tokenId"), _str(function, doc, "project"), scopes, doc)


@dataclass(frozen=True, slots=True)
class ProjectTokenRevoked:
    """`revoked` false: it already was."""

    token_id: str
    revoked: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> ProjectTokenRevoked:
        function = "revoke_project_token"
        doc = _object(function, raw)
        return cls(_str(function, doc, "tokenId"), _bool(function, doc, "revoked"), doc)


# ------------------------------------------------------------ tasks and runs


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """A task's run policy (SPEC §9.1), as `configure_task` left it or `task_settings` reads it."""

    task_id: str
    lease_ttl_s: int
    max_attempts: int
    retry_base_ms: int
    retry_cap_ms: int
    enabled: bool
    log_limit_bytes: int
    doc: JsonObject

    @classmethod
    def parse_as(cls, function: str) -> Callable[[object], TaskPolicy]:
        def parse(raw: object) -> TaskPolicy:
            doc = _object(function, raw)
            ttl, attempts, base, cap, log_limit = _counts(
                function,
                doc,
                ("leaseTtlS", "maxAttempts", "retryBaseMs", "retryCapMs", "logLimitBytes"),
            )
            return cls(
                _str(function, doc, "taskId"),
                ttl,
                attempts,
                base,
                cap,
                _bool(function, doc, "enabled"),
                log_limit,
                doc,
            )

        return parse


@dataclass(frozen=True, slots=True)
class RunCancel:
    """The run after a cancel: `state` cancelled, or still running with
    `cancel_requested` (its worker learns it at the next heartbeat)."""

    run_id: str
    state: str
    cancel_requested: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RunCancel:
        function = "cancel_run"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "runId"),
            _str(function, doc, "state"),
            _bool(function, doc, "cancelRequested"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class RunRetried:
    run_id: str
    attempt_id: str
    attempt_no: int
    state: str
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RunRetried:
        function = "retry_run"
        doc = _object(function, raw)
        return cls(
            _str(function, doc, "runId"),
            _str(function, doc, "attemptId"),
            _int(function, doc, "attemptNo"),
            _str(function, doc, "state"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class RunsCancelled:
    """A bulk cancel: how many, and each run it left (`{runId, state, reason}`)."""

    cancelled: int
    not_cancelled: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RunsCancelled:
        function = "cancel_runs"
        doc = _object(function, raw)
        left = [_object(function, r) for r in _list(function, doc, "notCancelled")]
        return cls(_int(function, doc, "cancelled"), left, doc)


# ------------------------------------------------------------ run reads (operator, producer)


@dataclass(frozen=True, slots=True)
class RunShown:
    """One run: `run` (its row), `attempts` and its latest `events`, oldest first;
    the producer API and `admin run show` send `doc` as it is."""

    run: JsonObject
    attempts: list[JsonObject]
    events: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse_as(cls, function: str) -> Callable[[object], RunShown]:
        def parse(raw: object) -> RunShown:
            doc = _object(function, raw)
            run = doc.get("run")
            if not isinstance(run, dict):
                raise AnswerError(function, "'run' is not an object")
            attempts = [_object(function, a) for a in _list(function, doc, "attempts")]
            events = [_object(function, e) for e in _list(function, doc, "events")]
            return cls(run, attempts, events, doc)

        return parse


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of runs, newest first; `next`: the cursor of the page after (None: last)."""

    runs: list[JsonObject]
    next: str | None
    doc: JsonObject

    @classmethod
    def parse_as(cls, function: str) -> Callable[[object], RunPage]:
        def parse(raw: object) -> RunPage:
            doc = _object(function, raw)
            runs = [_object(function, r) for r in _list(function, doc, "runs")]
            after = doc.get("next")
            if after is not None and not isinstance(after, str):
                raise AnswerError(function, "'next' is not a cursor")
            return cls(runs, after, doc)

        return parse


# ------------------------------------------------------------ fleet and queue reads
# What the console, `admin worker list`, `admin token list` and `qinglong status`
# render: the rows stay documents (`doc` is sent or rendered as it is); the
# lists and flags Python pages or branches on are typed.


def _objects(function: str, doc: JsonObject, key: str) -> list[JsonObject]:
    return [_object(function, row) for row in _list(function, doc, key)]


@dataclass(frozen=True, slots=True)
class WorkerList:
    workers: list[JsonObject]
    next: str | None
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WorkerList:
        doc = _object("list_workers", raw)
        after = doc.get("next")
        if after is not None and not isinstance(after, str):
            raise AnswerError("list_workers", "'next' is not a cursor")
        return cls(_objects("list_workers", doc, "workers"), after, doc)


@dataclass(frozen=True, slots=True)
class ProjectTokens:
    tokens: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> ProjectTokens:
        doc = _object("list_project_tokens", raw)
        return cls(_objects("list_project_tokens", doc, "tokens"), doc)


@dataclass(frozen=True, slots=True)
class ExpiringIdentities:
    credentials: list[JsonObject]
    certificates: list[JsonObject]
    truncated: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> ExpiringIdentities:
        function = "expiring_identities"
        doc = _object(function, raw)
        return cls(
            _objects(function, doc, "credentials"),
            _objects(function, doc, "certificates"),
            _bool(function, doc, "truncated"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    generated_at_ms: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> StatusSnapshot:
        doc = _object("status_snapshot", raw)
        return cls(_int("status_snapshot", doc, "generatedAtMs"), doc)


@dataclass(frozen=True, slots=True)
class RunStateCounts:
    states: list[JsonObject]
    cap: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RunStateCounts:
        doc = _object("run_state_counts", raw)
        return cls(
            _objects("run_state_counts", doc, "states"), _int("run_state_counts", doc, "cap"), doc
        )


@dataclass(frozen=True, slots=True)
class QueueDepth:
    by_priority: list[JsonObject]
    by_task: list[JsonObject]
    tasks_with_runs: int
    cap: int
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> QueueDepth:
        function = "queue_depth"
        doc = _object(function, raw)
        with_runs, cap = _counts(function, doc, ("tasksWithRuns", "cap"))
        return cls(
            _objects(function, doc, "byPriority"),
            _objects(function, doc, "byTask"),
            with_runs,
            cap,
            doc,
        )


@dataclass(frozen=True, slots=True)
class Throughput:
    """Per-minute counts (`doc` also says which of them reached their cap)."""

    minutes: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> Throughput:
        doc = _object("throughput", raw)
        return cls(_objects("throughput", doc, "minutes"), doc)


@dataclass(frozen=True, slots=True)
class WaitingRuns:
    runs: list[JsonObject]
    live_sessions: int
    sessions_capped: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> WaitingRuns:
        function = "waiting_runs"
        doc = _object(function, raw)
        return cls(
            _objects(function, doc, "runs"),
            _int(function, doc, "liveSessions"),
            _bool(function, doc, "sessionsCapped"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class LiveSessions:
    sessions: list[JsonObject]
    truncated: bool
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> LiveSessions:
        doc = _object("live_sessions", raw)
        return cls(
            _objects("live_sessions", doc, "sessions"),
            _bool("live_sessions", doc, "truncated"),
            doc,
        )


@dataclass(frozen=True, slots=True)
class RecentDenials:
    denials: list[JsonObject]
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> RecentDenials:
        doc = _object("recent_denials", raw)
        return cls(_objects("recent_denials", doc, "denials"), doc)


# ------------------------------------------------------------ the idle view's reads


@dataclass(frozen=True, slots=True)
class IdleProbed:
    """`ql.idle_probe`: whether a pull would now find nothing (`idle`), the
    database's clock (`now_ms`) and when the first scheduled run or unstarted
    offer becomes due (`wake_at_ms`, None when nothing is pending)."""

    idle: bool
    now_ms: int
    wake_at_ms: int | None
    doc: JsonObject

    @classmethod
    def parse(cls, raw: object) -> IdleProbed:
        doc = _object("idle_probe", raw)
        idle = doc.get("idle")
        if not isinstance(idle, bool):
            raise AnswerError("idle_probe", "'idle' is not a boolean")
        wake = doc.get("wakeAtMs")
        if wake is not None and (not isinstance(wake, int) or isinstance(wake, bool)):
            raise AnswerError("idle_probe", "'wakeAtMs' is not an integer")
        return cls(idle, _int("idle_probe", doc, "nowMs"), wake, doc)


@dataclass(frozen=True, slots=True)
class ConfirmedCredentials:
    """`ql.confirm_credentials`: the ids, of those asked about, that the
    database still allows (active, unexpired, digest matching, worker enabled)."""

    credential_ids: frozenset[str]

    @classmethod
    def parse(cls, raw: object) -> ConfirmedCredentials:
        if raw is None:  # an empty question: the array of nothing is NULL
            return cls(frozenset())
        if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
            raise AnswerError("confirm_credentials", "answer is not an array of text")
        return cls(frozenset(raw))
