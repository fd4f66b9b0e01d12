"""The typed database API: the only way Python calls a `ql.` function.

One function here per `ql.` SQL function, with the same name. Each takes
keyword-only arguments named like the SQL parameters without their `p_` prefix
and returns a `Call`: a constant SQL statement in named notation, every
placeholder cast to the parameter's declared type, plus its parameters. A
reordered or renamed SQL signature therefore can never bind a value to the wrong
parameter silently: the statement fails, and `tests/py/test_db_api.py` compares
this module with `pg_proc` (names, argument names, order and types), so the
change fails CI in this one place.

A `Call` runs on a sync connection (`run`: control plane, CLI, tools, tests) or
an async one (`run_async`: the ingress); both are one round trip answering the
function's single value, typed by the statement's parser (`qinglong.db.answers`:
a pull answers `Offered | Idle | Conflict | Denied`). Constant SQL text is also
what lets the ingress reuse its server-side prepared statements. Errors are not
translated here: callers translate them once through `qinglong.db.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from psycopg.types.json import Jsonb

from qinglong.db import answers
from qinglong.log_text import LogPage

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T", covariant=True)  # a Call[X] is a Call[Y] for any Y above X
JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Statement(Generic[T]):
    """A `ql.` function as Python sees it: its name, the one SQL text that calls
    it, and how its value is read (`parse`: the typed answer of
    `qinglong.db.answers`; None: the value as psycopg loads it)."""

    function: str
    sql: str
    parse: Callable[[Any], T] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One bound call of a `ql.` function: one round trip, one value back."""

    statement: Statement[T]
    # Not in the repr: the parameters hold secret and token digests.
    params: Mapping[str, Any] = field(repr=False)

    @property
    def function(self) -> str:
        return self.statement.function

    def run(self, conn: psycopg.Connection[Any], *, prepare: bool | None = None) -> T:
        """On `conn` as it is (autocommit or inside the caller's transaction);
        `prepare` as psycopg's (None: after the connection's prepare_threshold)."""
        row = conn.execute(self.statement.sql, self.params, prepare=prepare).fetchone()
        return self._answer(None if row is None else row[0])

    async def run_async(self, conn: psycopg.AsyncConnection[Any]) -> T:
        cursor = await conn.execute(self.statement.sql, self.params)
        row = await cursor.fetchone()
        return self._answer(None if row is None else row[0])

    def _answer(self, value: Any) -> T:
        """The typed answer (`answers.AnswerError` when the value has another shape)."""
        parse = self.statement.parse
        return value if parse is None else parse(value)


# ------------------------------------------------------------ worker-facing (ql_worker_ingress)

AUTHENTICATE_WORKER: Statement[answers.AuthAnswer] = Statement(
    "authenticate_worker",
    (
        "SELECT ql.authenticate_worker(p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
        " p_action => %(action)s::text)"
    ),
    answers.parse_auth,
)


def authenticate_worker(
    *, credential_id: str, secret_digest: bytes, worker_id: str, action: str
) -> Call[answers.AuthAnswer]:
    return Call(
        AUTHENTICATE_WORKER,
        {
            "credential_id": credential_id,
            "secret_digest": secret_digest,
            "worker_id": worker_id,
            "action": action,
        },
    )


ROTATE_CREDENTIAL: Statement[answers.RotateAnswer] = Statement(
    "rotate_credential",
    (
        "SELECT ql.rotate_credential(p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
        " p_new_credential_id => %(new_credential_id)s::text,"
        " p_new_secret_digest => %(new_secret_digest)s::bytea)"
    ),
    answers.parse_rotate,
)


def rotate_credential(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    new_credential_id: str,
    new_secret_digest: bytes,
) -> Call[answers.RotateAnswer]:
    """-> `{status: ok, credential: {...}}` or the denial envelope (SPEC §16.2)."""
    return Call(
        ROTATE_CREDENTIAL,
        {
            "credential_id": credential_id,
            "secret_digest": secret_digest,
            "worker_id": worker_id,
            "new_credential_id": new_credential_id,
            "new_secret_digest": new_secret_digest,
        },
    )


RECORD_AUTH_DENIAL: Statement[None] = Statement(
    "record_auth_denial",
    (
        "SELECT ql.record_auth_denial(p_credential_id => %(credential_id)s::text,"
        " p_worker_id => %(worker_id)s::text, p_action => %(action)s::text,"
        " p_reason => %(reason)s::text)"
    ),
)


def record_auth_denial(
    *, credential_id: str | None, worker_id: str | None, action: str, reason: str
) -> Call[None]:
    return Call(
        RECORD_AUTH_DENIAL,
        {
            "credential_id": credential_id,
            "worker_id": worker_id,
            "action": action,
            "reason": reason,
        },
    )


OPEN_SESSION: Statement[answers.SessionAnswer] = Statement(
    "open_session",
    (
        "SELECT ql.open_session(p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
        " p_capabilities_canonical => %(capabilities_canonical)s::bytea)"
    ),
    answers.parse_open_session,
)


def open_session(
    *, credential_id: str, secret_digest: bytes, worker_id: str, capabilities_canonical: bytes
) -> Call[answers.SessionAnswer]:
    return Call(
        OPEN_SESSION,
        {
            "credential_id": credential_id,
            "secret_digest": secret_digest,
            "worker_id": worker_id,
            "capabilities_canonical": capabilities_canonical,
        },
    )


_SESSION_ARGS = (
    "p_credential_id => %(credential_id)s::text,"
    " p_secret_digest => %(secret_digest)s::bytea,"
    " p_worker_id => %(worker_id)s::text, p_session_id => %(session_id)s::text,"
    " p_generation => %(generation)s::bigint"
)

HEARTBEAT_SESSION: Statement[answers.SessionAnswer] = Statement(
    "heartbeat_session",
    f"SELECT ql.heartbeat_session({_SESSION_ARGS})",
    answers.parse_heartbeat_session,
)
CLOSE_SESSION: Statement[answers.SessionAnswer] = Statement(
    "close_session", f"SELECT ql.close_session({_SESSION_ARGS})", answers.parse_close_session
)


def _session_params(
    credential_id: str, secret_digest: bytes, worker_id: str, session_id: str, generation: int
) -> dict[str, Any]:
    return {
        "credential_id": credential_id,
        "secret_digest": secret_digest,
        "worker_id": worker_id,
        "session_id": session_id,
        "generation": generation,
    }


def heartbeat_session(
    *, credential_id: str, secret_digest: bytes, worker_id: str, session_id: str, generation: int
) -> Call[answers.SessionAnswer]:
    return Call(
        HEARTBEAT_SESSION,
        _session_params(credential_id, secret_digest, worker_id, session_id, generation),
    )


def close_session(
    *, credential_id: str, secret_digest: bytes, worker_id: str, session_id: str, generation: int
) -> Call[answers.SessionAnswer]:
    return Call(
        CLOSE_SESSION,
        _session_params(credential_id, secret_digest, worker_id, session_id, generation),
    )


HEARTBEAT_SESSIONS: Statement[list[answers.HeartbeatItemAnswer]] = Statement(
    "heartbeat_sessions",
    "SELECT ql.heartbeat_sessions(p_items => %(items)s::jsonb)",
    answers.parse_heartbeat_sessions,
)


def heartbeat_sessions(
    *, items: Sequence[Mapping[str, Any]]
) -> Call[list[answers.HeartbeatItemAnswer]]:
    """`items`: `{credentialId, secretDigest (hex), workerId, sessionId, generation}` each."""
    return Call(HEARTBEAT_SESSIONS, {"items": Jsonb(list(items))})


PULL_OFFER: Statement[answers.PullAnswer] = Statement(
    "pull_offer",
    (
        "SELECT ql.pull_offer(p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
        " p_session_id => %(session_id)s::text, p_generation => %(generation)s::bigint,"
        " p_offer_id => %(offer_id)s::text, p_token_digest => %(token_digest)s::bytea,"
        " p_bounds => %(bounds)s::jsonb)"
    ),
    answers.parse_pull,
)


def pull_offer(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    bounds: Mapping[str, int] | None = None,
) -> Call[answers.PullAnswer]:
    """`bounds`: `{pages, candidates, claimAttempts}` within the caps; None = defaults."""
    return Call(
        PULL_OFFER,
        {
            **_session_params(credential_id, secret_digest, worker_id, session_id, generation),
            "offer_id": offer_id,
            "token_digest": token_digest,
            "bounds": None if bounds is None else Jsonb(dict(bounds)),
        },
    )


PULL_OFFERS: Statement[answers.PullBatchAnswer] = Statement(
    "pull_offers",
    (
        "SELECT ql.pull_offers(p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
        " p_session_id => %(session_id)s::text, p_generation => %(generation)s::bigint,"
        " p_offer_ids => %(offer_ids)s::text[], p_token_digests => %(token_digests)s::bytea[],"
        " p_bounds => %(bounds)s::jsonb)"
    ),
    answers.parse_pull_batch,
)


def pull_offers(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_ids: Sequence[str],
    token_digests: Sequence[bytes],
    bounds: Mapping[str, int] | None = None,
) -> Call[answers.PullBatchAnswer]:
    """A batched pull (SPEC §18.1): `offer_ids` and their `token_digests` indexed
    alike (1-16); `bounds` per claim, as `pull_offer`. Answers `{status: batch,
    offers, conflicts, idle}` or a denial envelope."""
    return Call(
        PULL_OFFERS,
        {
            **_session_params(credential_id, secret_digest, worker_id, session_id, generation),
            "offer_ids": list(offer_ids),
            "token_digests": list(token_digests),
            "bounds": None if bounds is None else Jsonb(dict(bounds)),
        },
    )


_LEASE_ARGS = (
    f"{_SESSION_ARGS}, p_offer_id => %(offer_id)s::text,"
    " p_token_digest => %(token_digest)s::bytea,"
    " p_lease_version => %(lease_version)s::bigint"
)

ACK_LEASE: Statement[answers.LeaseAnswer] = Statement(
    "ack_lease",
    (
        f"SELECT ql.ack_lease({_LEASE_ARGS}, p_phase => %(phase)s::text,"
        " p_reason => %(reason)s::text)"
    ),
    answers.parse_ack_lease,
)


def _lease_params(
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
) -> dict[str, Any]:
    return {
        **_session_params(credential_id, secret_digest, worker_id, session_id, generation),
        "offer_id": offer_id,
        "token_digest": token_digest,
        "lease_version": lease_version,
    }


def ack_lease(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
    phase: str,
    reason: str | None = None,
) -> Call[answers.LeaseAnswer]:
    """`phase`: starting | running | start_failed (with a `reason`). `lease_version`:
    the version the worker last saw (every lease call; SPEC §7)."""
    return Call(
        ACK_LEASE,
        {
            **_lease_params(
                credential_id,
                secret_digest,
                worker_id,
                session_id,
                generation,
                offer_id,
                token_digest,
                lease_version,
            ),
            "phase": phase,
            "reason": reason,
        },
    )


HEARTBEAT_LEASE: Statement[answers.LeaseAnswer] = Statement(
    "heartbeat_lease", f"SELECT ql.heartbeat_lease({_LEASE_ARGS})", answers.parse_heartbeat_lease
)


def heartbeat_lease(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
) -> Call[answers.LeaseAnswer]:
    return Call(
        HEARTBEAT_LEASE,
        _lease_params(
            credential_id,
            secret_digest,
            worker_id,
            session_id,
            generation,
            offer_id,
            token_digest,
            lease_version,
        ),
    )


COMPLETE_LEASE: Statement[answers.LeaseAnswer] = Statement(
    "complete_lease",
    (
        f"SELECT ql.complete_lease({_LEASE_ARGS}, p_outcome => %(outcome)s::text,"
        " p_exit_code => %(exit_code)s::integer, p_reason => %(reason)s::text,"
        " p_result => %(result)s::jsonb)"
    ),
    answers.parse_complete_lease,
)


def complete_lease(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
    outcome: str,
    exit_code: int | None = None,
    reason: str | None = None,
    result: Mapping[str, Any] | None = None,
) -> Call[answers.LeaseAnswer]:
    """`outcome`: succeeded | failed | cancelled. `result` (SPEC §9.3):
    `{exitCode?, durationMs, outputTail, outputBytes}`, stored with the attempt."""
    return Call(
        COMPLETE_LEASE,
        {
            **_lease_params(
                credential_id,
                secret_digest,
                worker_id,
                session_id,
                generation,
                offer_id,
                token_digest,
                lease_version,
            ),
            "outcome": outcome,
            "exit_code": exit_code,
            "reason": reason,
            "result": None if result is None else Jsonb(dict(result)),
        },
    )


LEASE_SECRETS: Statement[answers.SecretsAnswer] = Statement(
    "lease_secrets", f"SELECT ql.lease_secrets({_LEASE_ARGS})", answers.parse_lease_secrets
)


def lease_secrets(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
) -> Call[answers.SecretsAnswer]:
    """SPEC §14.3: a started lease's secrets, WRAPPED (`{status: ok, runId, projectId,
    dataKey, secrets: [{env, name, version, keyId, nonce, ciphertext}]}`, hex) or a
    conflict; the ingress decrypts (service/secrets_crypto.py). Changes no lease."""
    return Call(
        LEASE_SECRETS,
        _lease_params(
            credential_id,
            secret_digest,
            worker_id,
            session_id,
            generation,
            offer_id,
            token_digest,
            lease_version,
        ),
    )


APPEND_LOG: Statement[answers.LogAnswer] = Statement(
    "append_log",
    (
        f"SELECT ql.append_log({_LEASE_ARGS}, p_offset => %(offset)s::bigint,"
        " p_chunk => %(chunk)s::text)"
    ),
    answers.parse_append_log,
)


def append_log(
    *,
    credential_id: str,
    secret_digest: bytes,
    worker_id: str,
    session_id: str,
    generation: int,
    offer_id: str,
    token_digest: bytes,
    lease_version: int,
    offset: int,
    chunk: str,
) -> Call[answers.LogAnswer]:
    """SPEC §15.1: append `chunk` at byte `offset` of the started lease's live log
    (the lease version is a fence, not bumped) -> `{status: ok|idempotent,
    storedBytes, truncated}` | `{status: conflict, category: log_offset, storedBytes}`
    | a lease conflict | the denial envelope."""
    return Call(
        APPEND_LOG,
        {
            **_lease_params(
                credential_id,
                secret_digest,
                worker_id,
                session_id,
                generation,
                offer_id,
                token_digest,
                lease_version,
            ),
            "offset": offset,
            "chunk": chunk,
        },
    )


IDLE_PROBE: Statement[answers.IdleProbed] = Statement(
    "idle_probe", "SELECT ql.idle_probe()", answers.IdleProbed.parse
)


def idle_probe() -> Call[answers.IdleProbed]:
    return Call(IDLE_PROBE, {})


CONFIRM_CREDENTIALS: Statement[answers.ConfirmedCredentials] = Statement(
    "confirm_credentials",
    (
        "SELECT ql.confirm_credentials(p_credential_ids => %(credential_ids)s::text[],"
        " p_secret_digests => %(secret_digests)s::bytea[], p_worker_ids => %(worker_ids)s::text[])"
    ),
    answers.ConfirmedCredentials.parse,
)


def confirm_credentials(
    *, credential_ids: list[str], secret_digests: list[bytes], worker_ids: list[str]
) -> Call[answers.ConfirmedCredentials]:
    return Call(
        CONFIRM_CREDENTIALS,
        {
            "credential_ids": credential_ids,
            "secret_digests": secret_digests,
            "worker_ids": worker_ids,
        },
    )


# ------------------------------------------------------------ control plane (ql_runtime)

REGISTER_WORKER: Statement[answers.WorkerRegistered] = Statement(
    "register_worker",
    "SELECT ql.register_worker(p_name => %(name)s::text)",
    answers.WorkerRegistered.parse,
)


def register_worker(*, name: str) -> Call[answers.WorkerRegistered]:
    return Call(REGISTER_WORKER, {"name": name})


ISSUE_CREDENTIAL: Statement[answers.CredentialIssued] = Statement(
    "issue_credential",
    (
        "SELECT ql.issue_credential(p_worker_id => %(worker_id)s::text,"
        " p_credential_id => %(credential_id)s::text,"
        " p_secret_digest => %(secret_digest)s::bytea, p_ttl_s => %(ttl_s)s::bigint)"
    ),
    answers.CredentialIssued.parse,
)


def issue_credential(
    *, worker_id: str, credential_id: str, secret_digest: bytes, ttl_s: int | None = None
) -> Call[answers.CredentialIssued]:
    """-> `{credentialId, workerId, expiresAtMs}`; `ttl_s` None: never expires."""
    return Call(
        ISSUE_CREDENTIAL,
        {
            "worker_id": worker_id,
            "credential_id": credential_id,
            "secret_digest": secret_digest,
            "ttl_s": ttl_s,
        },
    )


REVOKE_CREDENTIAL: Statement[answers.CredentialRevoked] = Statement(
    "revoke_credential",
    "SELECT ql.revoke_credential(p_credential_id => %(credential_id)s::text)",
    answers.CredentialRevoked.parse,
)


def revoke_credential(*, credential_id: str) -> Call[answers.CredentialRevoked]:
    return Call(REVOKE_CREDENTIAL, {"credential_id": credential_id})


# ------------------------------------------------ worker certificates (SPEC §16.3)

REVOKE_CERTIFICATE: Statement[answers.CertificateRevoked] = Statement(
    "revoke_certificate",
    "SELECT ql.revoke_certificate(p_serial => %(serial)s::text)",
    answers.CertificateRevoked.parse,
)


def revoke_certificate(*, serial: str) -> Call[answers.CertificateRevoked]:
    """-> `{serial, workerId, revokedAtMs, revoked}`; `serial` hex, any case, colons allowed."""
    return Call(REVOKE_CERTIFICATE, {"serial": serial})


RECORD_CERTIFICATE: Statement[answers.CertificateRecorded] = Statement(
    "record_certificate",
    (
        "SELECT ql.record_certificate(p_worker_id => %(worker_id)s::text,"
        " p_serial => %(serial)s::text, p_not_after_ms => %(not_after_ms)s::bigint)"
    ),
    answers.CertificateRecorded.parse,
)


def record_certificate(
    *, worker_id: str, serial: str, not_after_ms: int
) -> Call[answers.CertificateRecorded]:
    """-> `{workerId, serial, notAfterMs}`."""
    return Call(
        RECORD_CERTIFICATE, {"worker_id": worker_id, "serial": serial, "not_after_ms": not_after_ms}
    )


REVOKED_CERTIFICATES: Statement[answers.RevokedSerials] = Statement(
    "revoked_certificates",
    (
        "SELECT ql.revoked_certificates(p_after_seq => %(after_seq)s::bigint,"
        " p_limit => %(limit)s::integer)"
    ),
    answers.RevokedSerials.parse,
)


def revoked_certificates(*, after_seq: int, limit: int) -> Call[answers.RevokedSerials]:
    """-> `{serials: [canonical serial, ...], lastSeq}` (ingress: revoked certificates)."""
    return Call(REVOKED_CERTIFICATES, {"after_seq": after_seq, "limit": limit})


EXPIRING_IDENTITIES: Statement[answers.ExpiringIdentities] = Statement(
    "expiring_identities",
    (
        "SELECT ql.expiring_identities(p_within_s => %(within_s)s::bigint,"
        " p_limit => %(limit)s::integer)"
    ),
    answers.ExpiringIdentities.parse,
)


def expiring_identities(
    *, within_s: int | None = 1209600, limit: int | None = 100
) -> Call[answers.ExpiringIdentities]:
    """-> `{withinS, credentials, certificates, credentialsTotal, certificatesTotal,
    truncated}` (SPEC §16.3; default window 14 d)."""
    return Call(EXPIRING_IDENTITIES, {"within_s": within_s, "limit": limit})


EXPIRING_COUNTS: Statement[answers.ExpiringCounts] = Statement(
    "expiring_counts",
    "SELECT ql.expiring_counts(p_within_s => %(within_s)s::bigint)",
    answers.ExpiringCounts.parse,
)


def expiring_counts(*, within_s: int) -> Call[answers.ExpiringCounts]:
    """-> `{credentials, certificates}` expiring within `within_s` (ingress /metrics)."""
    return Call(EXPIRING_COUNTS, {"within_s": within_s})


PUBLISH_REVISION: Statement[answers.RevisionPublished] = Statement(
    "publish_revision",
    (
        "SELECT ql.publish_revision(p_project => %(project)s::text, p_task => %(task)s::text,"
        " p_canonical => %(canonical)s::bytea, p_pool => %(pool)s::text,"
        " p_signature => %(signature)s::text)"
    ),
    answers.RevisionPublished.parse,
)


def publish_revision(
    *,
    project: str,
    task: str,
    canonical: bytes,
    pool: str | None = None,
    signature: str | None = None,
) -> Call[answers.RevisionPublished]:
    """`canonical`: the RFC 8785 bytes of a compiled `qinglong/command@v1`; `pool`:
    'P/N' of the same project (None: the task's pool, a new task's 'P/default');
    `signature`: the detached compact JWS over the signed payload (SPEC §16.1)."""
    return Call(
        PUBLISH_REVISION,
        {
            "project": project,
            "task": task,
            "canonical": canonical,
            "pool": pool,
            "signature": signature,
        },
    )


PREPARE_TASK: Statement[answers.TaskPrepared] = Statement(
    "prepare_task",
    ("SELECT ql.prepare_task(p_project => %(project)s::text, p_task => %(task)s::text)"),
    answers.TaskPrepared.parse,
)


def prepare_task(*, project: str, task: str) -> Call[answers.TaskPrepared]:
    """-> `{taskId, created}`: the task's id before a signed publish (same transaction)."""
    return Call(PREPARE_TASK, {"project": project, "task": task})


ENQUEUE_RUNS: Statement[answers.RunsEnqueued] = Statement(
    "enqueue_runs",
    (
        "SELECT ql.enqueue_runs(p_task_id => %(task_id)s::text,"
        " p_priority => %(priority)s::integer, p_count => %(count)s::integer,"
        " p_not_before_ms => %(not_before_ms)s::bigint, p_delay_ms => %(delay_ms)s::bigint,"
        " p_key => %(key)s::text)"
    ),
    answers.RunsEnqueued.parse_as("enqueue_runs"),
)


def enqueue_runs(
    *,
    task_id: str,
    priority: int,
    count: int,
    not_before_ms: int | None = None,
    delay_ms: int | None = None,
    key: str | None = None,
) -> Call[answers.RunsEnqueued]:
    """-> `{runIds, existing}`; at most one of `not_before_ms` (epoch ms) / `delay_ms`;
    `key` (count 1) makes it idempotent per task while the run is retained."""
    return Call(
        ENQUEUE_RUNS,
        {
            "task_id": task_id,
            "priority": priority,
            "count": count,
            "not_before_ms": not_before_ms,
            "delay_ms": delay_ms,
            "key": key,
        },
    )


CONFIGURE_TASK: Statement[answers.TaskPolicy] = Statement(
    "configure_task",
    (
        "SELECT ql.configure_task(p_task_id => %(task_id)s::text,"
        " p_lease_ttl_s => %(lease_ttl_s)s::integer,"
        " p_max_attempts => %(max_attempts)s::integer,"
        " p_retry_base_ms => %(retry_base_ms)s::integer,"
        " p_retry_cap_ms => %(retry_cap_ms)s::integer, p_enabled => %(enabled)s::boolean,"
        " p_log_limit_bytes => %(log_limit_bytes)s::integer)"
    ),
    answers.TaskPolicy.parse_as("configure_task"),
)


def configure_task(
    *,
    task_id: str,
    lease_ttl_s: int | None = None,
    max_attempts: int | None = None,
    retry_base_ms: int | None = None,
    retry_cap_ms: int | None = None,
    enabled: bool | None = None,
    log_limit_bytes: int | None = None,
) -> Call[answers.TaskPolicy]:
    """None leaves a setting unchanged; -> the task's settings (see `task_settings`)."""
    return Call(
        CONFIGURE_TASK,
        {
            "task_id": task_id,
            "lease_ttl_s": lease_ttl_s,
            "max_attempts": max_attempts,
            "retry_base_ms": retry_base_ms,
            "retry_cap_ms": retry_cap_ms,
            "enabled": enabled,
            "log_limit_bytes": log_limit_bytes,
        },
    )


CANCEL_RUN: Statement[answers.RunCancel] = Statement(
    "cancel_run", "SELECT ql.cancel_run(p_run_id => %(run_id)s::text)", answers.RunCancel.parse
)


def cancel_run(*, run_id: str) -> Call[answers.RunCancel]:
    return Call(CANCEL_RUN, {"run_id": run_id})


SWEEP_LEASES: Statement[answers.Swept] = Statement(
    "sweep_leases", "SELECT ql.sweep_leases(p_batch => %(batch)s::integer)", answers.Swept.parse
)


def sweep_leases(*, batch: int = 500) -> Call[answers.Swept]:
    return Call(SWEEP_LEASES, {"batch": batch})


RETRY_RUN: Statement[answers.RunRetried] = Statement(
    "retry_run", "SELECT ql.retry_run(p_run_id => %(run_id)s::text)", answers.RunRetried.parse
)


def retry_run(*, run_id: str) -> Call[answers.RunRetried]:
    """A failed or cancelled run gets a new attempt -> `{runId, attemptId, attemptNo, state}`."""
    return Call(RETRY_RUN, {"run_id": run_id})


CANCEL_RUNS: Statement[answers.RunsCancelled] = Statement(
    "cancel_runs",
    "SELECT ql.cancel_runs(p_task_id => %(task_id)s::text, p_state => %(state)s::text,"
    " p_wait_ms => %(wait_ms)s::integer)",
    answers.RunsCancelled.parse,
)


def cancel_runs(*, task_id: str, state: str, wait_ms: int = 5000) -> Call[answers.RunsCancelled]:
    """Bulk cancel of a task's runs in `state` (`queued`) -> `{cancelled,
    notCancelled: [{runId, state, reason}]}`; waits up to ``wait_ms`` in all for
    runs another transaction holds."""
    return Call(CANCEL_RUNS, {"task_id": task_id, "state": state, "wait_ms": wait_ms})


DISABLE_WORKER: Statement[answers.WorkerDisabled] = Statement(
    "disable_worker",
    "SELECT ql.disable_worker(p_worker_id => %(worker_id)s::text, p_drain => %(drain)s::boolean)",
    answers.WorkerDisabled.parse,
)


def disable_worker(*, worker_id: str, drain: bool = False) -> Call[answers.WorkerDisabled]:
    """-> `{workerId, disabled: true, drain, sessionsClosed, sessionsDraining,
    leasesReleased}`; idempotent. ``drain``: active sessions drain (started
    leases run on) instead of closing."""
    return Call(DISABLE_WORKER, {"worker_id": worker_id, "drain": drain})


ENABLE_WORKER: Statement[answers.WorkerEnabled] = Statement(
    "enable_worker",
    "SELECT ql.enable_worker(p_worker_id => %(worker_id)s::text)",
    answers.WorkerEnabled.parse,
)


def enable_worker(*, worker_id: str) -> Call[answers.WorkerEnabled]:
    return Call(ENABLE_WORKER, {"worker_id": worker_id})


CREATE_POOL: Statement[answers.PoolCreated] = Statement(
    "create_pool",
    "SELECT ql.create_pool(p_project => %(project)s::text, p_name => %(name)s::text)",
    answers.PoolCreated.parse,
)


def create_pool(*, project: str, name: str) -> Call[answers.PoolCreated]:
    """-> `{poolId, project, name, created}`; the project is created when needed."""
    return Call(CREATE_POOL, {"project": project, "name": name})


GRANT_POOL: Statement[answers.PoolGranted] = Statement(
    "grant_pool",
    "SELECT ql.grant_pool(p_worker_id => %(worker_id)s::text, p_pool => %(pool)s::text)",
    answers.PoolGranted.parse,
)


def grant_pool(*, worker_id: str, pool: str) -> Call[answers.PoolGranted]:
    """`pool`: 'P/N', or '*' for every pool present and future -> `{workerId, pool, granted}`."""
    return Call(GRANT_POOL, {"worker_id": worker_id, "pool": pool})


REVOKE_POOL: Statement[answers.PoolRevoked] = Statement(
    "revoke_pool",
    "SELECT ql.revoke_pool(p_worker_id => %(worker_id)s::text, p_pool => %(pool)s::text)",
    answers.PoolRevoked.parse,
)


def revoke_pool(*, worker_id: str, pool: str) -> Call[answers.PoolRevoked]:
    """-> `{workerId, pool, revoked, leasesReleased}`: unstarted leases of pools the
    worker no longer holds are released at once; started ones may finish."""
    return Call(REVOKE_POOL, {"worker_id": worker_id, "pool": pool})


LABEL_WORKER: Statement[answers.WorkerLabelled] = Statement(
    "label_worker",
    (
        "SELECT ql.label_worker(p_worker_id => %(worker_id)s::text,"
        " p_labels => %(labels)s::jsonb, p_remove => %(remove)s::text[],"
        " p_self_labels => %(self_labels)s::boolean)"
    ),
    answers.WorkerLabelled.parse,
)


def label_worker(
    *,
    worker_id: str,
    labels: Mapping[str, str] | None = None,
    remove: Sequence[str] | None = None,
    self_labels: bool | None = None,
) -> Call[answers.WorkerLabelled]:
    """Grant `labels` (key -> value), take the `remove` keys away, switch
    self-labels on/off (None: unchanged) -> `{workerId, labels, selfLabels,
    sessionsDraining, leasesReleased}`; idempotent (SPEC §13.2)."""
    return Call(
        LABEL_WORKER,
        {
            "worker_id": worker_id,
            "labels": Jsonb(dict(labels or {})),
            "remove": list(remove or ()),
            "self_labels": self_labels,
        },
    )


END_SESSION: Statement[answers.SessionEnded] = Statement(
    "end_session",
    "SELECT ql.end_session(p_session_id => %(session_id)s::text, p_drain => %(drain)s::boolean)",
    answers.SessionEnded.parse,
)


def end_session(*, session_id: str, drain: bool = False) -> Call[answers.SessionEnded]:
    """Operator close -> `{sessionId, workerId, state: "closed"|"draining", drain,
    leasesReleased, leasesRunning}`. ``drain``: the session takes no new offer and
    closes when its started leases end."""
    return Call(END_SESSION, {"session_id": session_id, "drain": drain})


_PRUNE_ARGS = (
    "p_retain_s => %(retain_s)s::bigint, p_batch => %(batch)s::integer,"
    " p_dry_run => %(dry_run)s::boolean"
)

PRUNE_RUNS: Statement[answers.RunsPruned] = Statement(
    "prune_runs", f"SELECT ql.prune_runs({_PRUNE_ARGS})", answers.RunsPruned.parse
)
PRUNE_AUDIT: Statement[answers.AuditPruned] = Statement(
    "prune_audit", f"SELECT ql.prune_audit({_PRUNE_ARGS})", answers.AuditPruned.parse
)


def prune_runs(
    *, retain_s: int, batch: int = 1000, dry_run: bool = False
) -> Call[answers.RunsPruned]:
    """One batch -> `{runs, attempts, leases, events, more}` (terminal runs only)."""
    return Call(PRUNE_RUNS, {"retain_s": retain_s, "batch": batch, "dry_run": dry_run})


def prune_audit(
    *, retain_s: int, batch: int = 1000, dry_run: bool = False
) -> Call[answers.AuditPruned]:
    """One batch -> `{securityAudit, more}`."""
    return Call(PRUNE_AUDIT, {"retain_s": retain_s, "batch": batch, "dry_run": dry_run})


PRUNE_FLEET: Statement[answers.FleetPruned] = Statement(
    "prune_fleet", f"SELECT ql.prune_fleet({_PRUNE_ARGS})", answers.FleetPruned.parse
)


def prune_fleet(
    *, retain_s: int, batch: int = 1000, dry_run: bool = False
) -> Call[answers.FleetPruned]:
    """One batch of each kind -> `{sessions, placementClasses, fleetEvents, more}`:
    ended sessions and worker/session events past `retain_s` (the run
    retention), placement classes nothing references."""
    return Call(PRUNE_FLEET, {"retain_s": retain_s, "batch": batch, "dry_run": dry_run})


# ------------------------------------------------------------ reads (ql_readonly)

STATUS_SNAPSHOT: Statement[answers.StatusSnapshot] = Statement(
    "status_snapshot", "SELECT ql.status_snapshot()", answers.StatusSnapshot.parse
)


def status_snapshot() -> Call[answers.StatusSnapshot]:
    return Call(STATUS_SNAPSHOT, {})


TASK_SETTINGS: Statement[answers.TaskPolicy] = Statement(
    "task_settings",
    "SELECT ql.task_settings(p_task_id => %(task_id)s::text)",
    answers.TaskPolicy.parse_as("task_settings"),
)


def task_settings(*, task_id: str) -> Call[answers.TaskPolicy]:
    """-> `{taskId, leaseTtlS, maxAttempts, retryBaseMs, retryCapMs, enabled}`."""
    return Call(TASK_SETTINGS, {"task_id": task_id})


LIST_RUNS: Statement[answers.RunPage] = Statement(
    "list_runs",
    (
        "SELECT ql.list_runs(p_task_id => %(task_id)s::text, p_states => %(states)s::text[],"
        " p_limit => %(limit)s::integer, p_after => %(after)s::text)"
    ),
    answers.RunPage.parse_as("list_runs"),
)


def list_runs(
    *,
    task_id: str | None = None,
    states: Sequence[str] | None = None,
    limit: int = 100,
    after: str | None = None,
) -> Call[answers.RunPage]:
    """Newest first -> `{runs: [...], next}`; `after` is a previous page's `next`."""
    return Call(
        LIST_RUNS,
        {
            "task_id": task_id,
            "states": None if states is None else list(states),
            "limit": limit,
            "after": after,
        },
    )


SHOW_RUN: Statement[answers.RunShown] = Statement(
    "show_run",
    "SELECT ql.show_run(p_run_id => %(run_id)s::text)",
    answers.RunShown.parse_as("show_run"),
)


def show_run(*, run_id: str) -> Call[answers.RunShown]:
    """-> `{run, attempts, events}` (the latest 200 events, oldest first)."""
    return Call(SHOW_RUN, {"run_id": run_id})


RUN_LOG: Statement[LogPage] = Statement(
    "run_log",
    (
        "SELECT ql.run_log(p_run_id => %(run_id)s::uuid, p_attempt_no => %(attempt_no)s::integer,"
        " p_offset => %(offset)s::bigint, p_max_bytes => %(max_bytes)s::integer)"
    ),
    answers.parse_run_log,
)


def run_log(
    *, run_id: str, attempt_no: int | None = None, offset: int = 0, max_bytes: int = 1048576
) -> Call[LogPage]:
    """One page of an attempt's live log (SPEC §15.3; `attempt_no` None = the latest):
    `{runId, attemptNumber, offset, text, storedBytes, logBytes, truncated, complete,
    ended}`. `run_id` must be a UUID (a malformed one fails the cast, 22P02)."""
    return Call(
        RUN_LOG,
        {"run_id": run_id, "attempt_no": attempt_no, "offset": offset, "max_bytes": max_bytes},
    )


LIST_WORKERS: Statement[answers.WorkerList] = Statement(
    "list_workers",
    ("SELECT ql.list_workers(p_limit => %(limit)s::integer, p_after => %(after)s::text)"),
    answers.WorkerList.parse,
)


def list_workers(*, limit: int = 1000, after: str | None = None) -> Call[answers.WorkerList]:
    """-> `{workers: [...], next}`; never a secret or a digest."""
    return Call(LIST_WORKERS, {"limit": limit, "after": after})


RUN_STATE_COUNTS: Statement[answers.RunStateCounts] = Statement(
    "run_state_counts", "SELECT ql.run_state_counts()", answers.RunStateCounts.parse
)


def run_state_counts() -> Call[answers.RunStateCounts]:
    """-> `{states: [{state, runs, capped, estimate}], cap}` (exact up to cap)."""
    return Call(RUN_STATE_COUNTS, {})


QUEUE_DEPTH: Statement[answers.QueueDepth] = Statement(
    "queue_depth", "SELECT ql.queue_depth()", answers.QueueDepth.parse
)


def queue_depth() -> Call[answers.QueueDepth]:
    """-> `{byPriority: [...], byTask: [...], tasksWithRuns, cap}` (counts stop at cap)."""
    return Call(QUEUE_DEPTH, {})


THROUGHPUT: Statement[answers.Throughput] = Statement(
    "throughput",
    "SELECT ql.throughput(p_minutes => %(minutes)s::integer)",
    answers.Throughput.parse,
)


def throughput(*, minutes: int = 15) -> Call[answers.Throughput]:
    """-> `{minutes: [{minuteMs, dispatched, succeeded, failed}], fromMs, capped, cap}`."""
    return Call(THROUGHPUT, {"minutes": minutes})


WAITING_RUNS: Statement[answers.WaitingRuns] = Statement(
    "waiting_runs",
    "SELECT ql.waiting_runs(p_limit => %(limit)s::integer)",
    answers.WaitingRuns.parse,
)


def waiting_runs(*, limit: int = 20) -> Call[answers.WaitingRuns]:
    """-> `{runs: [{..., verdict, sessionsMatching, ...}], liveSessions, sessionsCapped}`."""
    return Call(WAITING_RUNS, {"limit": limit})


LIVE_SESSIONS: Statement[answers.LiveSessions] = Statement(
    "live_sessions",
    (
        "SELECT ql.live_sessions(p_limit => %(limit)s::integer,"
        " p_worker_ids => %(worker_ids)s::text[])"
    ),
    answers.LiveSessions.parse,
)


def live_sessions(
    *, limit: int = 200, worker_ids: Sequence[str] | None = None
) -> Call[answers.LiveSessions]:
    """-> `{sessions: [...], truncated}` (only `worker_ids`' when given); never a secret."""
    return Call(
        LIVE_SESSIONS,
        {"limit": limit, "worker_ids": None if worker_ids is None else list(worker_ids)},
    )


RECENT_DENIALS: Statement[answers.RecentDenials] = Statement(
    "recent_denials",
    "SELECT ql.recent_denials(p_limit => %(limit)s::integer)",
    answers.RecentDenials.parse,
)


def recent_denials(*, limit: int = 20) -> Call[answers.RecentDenials]:
    """-> `{denials: [{atMs, action, reason, workerId, credentialId}], windowS, ...}`."""
    return Call(RECENT_DENIALS, {"limit": limit})


# ------------------------------------------------------------ project tokens (ql_runtime)

CREATE_PROJECT_TOKEN: Statement[answers.ProjectTokenCreated] = Statement(
    "create_project_token",
    (
        "SELECT ql.create_project_token(p_project => %(project)s::text,"
        " p_token_id => %(token_id)s::text, p_token_digest => %(token_digest)s::bytea,"
        " p_scopes => %(scopes)s::text[], p_expires_in_s => %(expires_in_s)s::bigint)"
    ),
    answers.ProjectTokenCreated.parse,
)


def create_project_token(
    *,
    project: str,
    token_id: str,
    token_digest: bytes,
    scopes: Sequence[str],
    expires_in_s: int | None = None,
) -> Call[answers.ProjectTokenCreated]:
    """-> `{tokenId, project, scopes, createdAtMs, expiresAtMs}`; only the digest of
    the whole token string is sent (never the token)."""
    return Call(
        CREATE_PROJECT_TOKEN,
        {
            "project": project,
            "token_id": token_id,
            "token_digest": token_digest,
            "scopes": list(scopes),
            "expires_in_s": expires_in_s,
        },
    )


REVOKE_PROJECT_TOKEN: Statement[answers.ProjectTokenRevoked] = Statement(
    "revoke_project_token",
    "SELECT ql.revoke_project_token(p_token_id => %(token_id)s::text)",
    answers.ProjectTokenRevoked.parse,
)


def revoke_project_token(*, token_id: str) -> Call[answers.ProjectTokenRevoked]:
    """-> `{tokenId, project, revokedAtMs, revoked}` (revoked false: it already was)."""
    return Call(REVOKE_PROJECT_TOKEN, {"token_id": token_id})


LIST_PROJECT_TOKENS: Statement[answers.ProjectTokens] = Statement(
    "list_project_tokens",
    "SELECT ql.list_project_tokens(p_project => %(project)s::text)",
    answers.ProjectTokens.parse,
)


def list_project_tokens(*, project: str | None = None) -> Call[answers.ProjectTokens]:
    """-> `{tokens: [{tokenId, project, scopes, state, ...}]}`; never a digest."""
    return Call(LIST_PROJECT_TOKENS, {"project": project})


# ------------------------------------------------------------ secrets (ql_runtime, SPEC §14.1)
# Only wrapped keys and ciphertexts cross here: the CLI encrypts with its KEK file.

PROJECT_DATA_KEY: Statement[answers.DataKeyStored] = Statement(
    "project_data_key",
    (
        "SELECT ql.project_data_key(p_project => %(project)s::text, p_key_id => %(key_id)s::text,"
        " p_kek_id => %(kek_id)s::text, p_nonce => %(nonce)s::bytea,"
        " p_wrapped_key => %(wrapped_key)s::bytea)"
    ),
    answers.DataKeyStored.parse,
)


def project_data_key(
    *, project: str, key_id: str, kek_id: str, nonce: bytes, wrapped_key: bytes
) -> Call[answers.DataKeyStored]:
    """Install the offered wrapped data key if the project has none; -> the stored one
    `{project, projectId, keyId, kekId, nonce, wrappedKey, created}` (hex)."""
    return Call(
        PROJECT_DATA_KEY,
        {
            "project": project,
            "key_id": key_id,
            "kek_id": kek_id,
            "nonce": nonce,
            "wrapped_key": wrapped_key,
        },
    )


SET_SECRET: Statement[answers.SecretVersion] = Statement(
    "set_secret",
    (
        "SELECT ql.set_secret(p_project => %(project)s::text, p_name => %(name)s::text,"
        " p_version => %(version)s::integer, p_key_id => %(key_id)s::text,"
        " p_nonce => %(nonce)s::bytea, p_ciphertext => %(ciphertext)s::bytea)"
    ),
    answers.SecretVersion.parse_as("set_secret"),
)


def set_secret(
    *, project: str, name: str, version: int, key_id: str, nonce: bytes, ciphertext: bytes
) -> Call[answers.SecretVersion]:
    """-> `{project, name, version, createdAtMs, updatedAtMs}`; QL040 when `version`
    is not the next one."""
    return Call(
        SET_SECRET,
        {
            "project": project,
            "name": name,
            "version": version,
            "key_id": key_id,
            "nonce": nonce,
            "ciphertext": ciphertext,
        },
    )


LIST_SECRETS: Statement[answers.SecretList] = Statement(
    "list_secrets",
    "SELECT ql.list_secrets(p_project => %(project)s::text)",
    answers.SecretList.parse,
)


def list_secrets(*, project: str) -> Call[answers.SecretList]:
    """-> `{project, secrets: [{name, version, createdAtMs, updatedAtMs}]}`; never values."""
    return Call(LIST_SECRETS, {"project": project})


DELETE_SECRET: Statement[answers.SecretVersion] = Statement(
    "delete_secret",
    "SELECT ql.delete_secret(p_project => %(project)s::text, p_name => %(name)s::text)",
    answers.SecretVersion.parse_as("delete_secret"),
)


def delete_secret(*, project: str, name: str) -> Call[answers.SecretVersion]:
    """-> `{project, name, version, deleted}`; QL004 when there is no such secret."""
    return Call(DELETE_SECRET, {"project": project, "name": name})


LIST_DATA_KEYS: Statement[answers.DataKeys] = Statement(
    "list_data_keys", "SELECT ql.list_data_keys()", answers.DataKeys.parse
)


def list_data_keys() -> Call[answers.DataKeys]:
    """-> `{keys: [{projectId, keyId, kekId, nonce, wrappedKey}]}` (wrapped, hex)."""
    return Call(LIST_DATA_KEYS, {})


REWRAP_DATA_KEYS: Statement[answers.KeysRewrapped] = Statement(
    "rewrap_data_keys",
    (
        "SELECT ql.rewrap_data_keys(p_old_kek_id => %(old_kek_id)s::text,"
        " p_new_kek_id => %(new_kek_id)s::text, p_keys => %(keys)s::jsonb)"
    ),
    answers.KeysRewrapped.parse,
)


def rewrap_data_keys(
    *, old_kek_id: str, new_kek_id: str, keys: Sequence[Mapping[str, str]]
) -> Call[answers.KeysRewrapped]:
    """Every data key re-wrapped at once: `keys` [{keyId, nonce, wrappedKey}] (hex)."""
    return Call(
        REWRAP_DATA_KEYS,
        {
            "old_kek_id": old_kek_id,
            "new_kek_id": new_kek_id,
            "keys": Jsonb([dict(k) for k in keys]),
        },
    )


# ------------------------------------------------------------ producer API (ql_producer)

_TOKEN_ARGS = "p_token_id => %(token_id)s::text, p_token_digest => %(token_digest)s::bytea"

PRODUCER_ENQUEUE: Statement[answers.RunsEnqueued] = Statement(
    "producer_enqueue",
    (
        f"SELECT ql.producer_enqueue({_TOKEN_ARGS}, p_task => %(task)s::text,"
        " p_priority => %(priority)s::integer, p_count => %(count)s::integer,"
        " p_not_before_ms => %(not_before_ms)s::bigint, p_delay_ms => %(delay_ms)s::bigint,"
        " p_key => %(key)s::text)"
    ),
    answers.RunsEnqueued.parse_as("producer_enqueue"),
)


def producer_enqueue(
    *,
    token_id: str,
    token_digest: bytes,
    task: str,
    priority: int = 0,
    count: int = 1,
    not_before_ms: int | None = None,
    delay_ms: int | None = None,
    key: str | None = None,
) -> Call[answers.RunsEnqueued]:
    """POST /v1/runs -> `{runIds, existing}` (scope enqueue, the token's project)."""
    return Call(
        PRODUCER_ENQUEUE,
        {
            "token_id": token_id,
            "token_digest": token_digest,
            "task": task,
            "priority": priority,
            "count": count,
            "not_before_ms": not_before_ms,
            "delay_ms": delay_ms,
            "key": key,
        },
    )


PRODUCER_SHOW_RUN: Statement[answers.RunShown] = Statement(
    "producer_show_run",
    (f"SELECT ql.producer_show_run({_TOKEN_ARGS}, p_run_id => %(run_id)s::text)"),
    answers.RunShown.parse_as("producer_show_run"),
)
PRODUCER_CANCEL_RUN: Statement[answers.RunShown] = Statement(
    "producer_cancel_run",
    (f"SELECT ql.producer_cancel_run({_TOKEN_ARGS}, p_run_id => %(run_id)s::text)"),
    answers.RunShown.parse_as("producer_cancel_run"),
)
PRODUCER_RETRY_RUN: Statement[answers.RunShown] = Statement(
    "producer_retry_run",
    (f"SELECT ql.producer_retry_run({_TOKEN_ARGS}, p_run_id => %(run_id)s::text)"),
    answers.RunShown.parse_as("producer_retry_run"),
)


def producer_show_run(*, token_id: str, token_digest: bytes, run_id: str) -> Call[answers.RunShown]:
    """GET /v1/runs/{id} -> the show document (scope read, the token's project)."""
    return Call(
        PRODUCER_SHOW_RUN, {"token_id": token_id, "token_digest": token_digest, "run_id": run_id}
    )


def producer_cancel_run(
    *, token_id: str, token_digest: bytes, run_id: str
) -> Call[answers.RunShown]:
    """POST /v1/runs/{id}/cancel -> the show document after the cancel (scope cancel)."""
    return Call(
        PRODUCER_CANCEL_RUN, {"token_id": token_id, "token_digest": token_digest, "run_id": run_id}
    )


def producer_retry_run(
    *, token_id: str, token_digest: bytes, run_id: str
) -> Call[answers.RunShown]:
    """POST /v1/runs/{id}/retry -> the show document after the retry (scope retry)."""
    return Call(
        PRODUCER_RETRY_RUN, {"token_id": token_id, "token_digest": token_digest, "run_id": run_id}
    )


PRODUCER_LIST_RUNS: Statement[answers.RunPage] = Statement(
    "producer_list_runs",
    (
        f"SELECT ql.producer_list_runs({_TOKEN_ARGS}, p_task => %(task)s::text,"
        " p_states => %(states)s::text[], p_limit => %(limit)s::integer,"
        " p_after => %(after)s::text)"
    ),
    answers.RunPage.parse_as("producer_list_runs"),
)


def producer_list_runs(
    *,
    token_id: str,
    token_digest: bytes,
    task: str | None,
    states: Sequence[str] | None = None,
    limit: int = 100,
    after: str | None = None,
) -> Call[answers.RunPage]:
    """GET /v1/runs -> `{runs, next}` of one task of the token's project (scope read)."""
    return Call(
        PRODUCER_LIST_RUNS,
        {
            "token_id": token_id,
            "token_digest": token_digest,
            "task": task,
            "states": None if states is None else list(states),
            "limit": limit,
            "after": after,
        },
    )


PRODUCER_RUN_LOG: Statement[LogPage] = Statement(
    "producer_run_log",
    (
        f"SELECT ql.producer_run_log({_TOKEN_ARGS}, p_run_id => %(run_id)s::text,"
        " p_attempt_no => %(attempt_no)s::integer, p_offset => %(offset)s::bigint,"
        " p_max_bytes => %(max_bytes)s::integer)"
    ),
    answers.parse_producer_run_log,
)


def producer_run_log(
    *,
    token_id: str,
    token_digest: bytes,
    run_id: str,
    attempt_no: int | None = None,
    offset: int = 0,
    max_bytes: int = 1048576,
) -> Call[LogPage]:
    """GET /v1/runs/{id}/log -> ql.run_log's document (scope log, the token's project)."""
    return Call(
        PRODUCER_RUN_LOG,
        {
            "token_id": token_id,
            "token_digest": token_digest,
            "run_id": run_id,
            "attempt_no": attempt_no,
            "offset": offset,
            "max_bytes": max_bytes,
        },
    )


def statements() -> dict[str, Statement[Any]]:
    """Every statement of this module by function name (for the pg_proc check)."""
    found = {value.function: value for value in globals().values() if isinstance(value, Statement)}
    return dict(sorted(found.items()))
