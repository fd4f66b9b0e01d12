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
function's single value. Constant SQL text is also what lets the ingress reuse
its server-side prepared statements. Errors are not translated here: callers map
them through `qinglong.service.sqlstates` (gateway, control plane).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from psycopg.types.json import Jsonb

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Statement(Generic[T]):
    """A `ql.` function as Python sees it: its name and the one SQL text that calls it."""

    function: str
    sql: str


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One bound call of a `ql.` function: one round trip, one value back."""

    statement: Statement[T]
    params: Mapping[str, Any]

    @property
    def function(self) -> str:
        return self.statement.function

    def run(self, conn: psycopg.Connection[Any], *, prepare: bool | None = None) -> T:
        """On `conn` as it is (autocommit or inside the caller's transaction);
        `prepare` as psycopg's (None: after the connection's prepare_threshold)."""
        row = conn.execute(self.statement.sql, self.params,  # type: ignore[arg-type]
                           prepare=prepare).fetchone()
        return None if row is None else row[0]  # type: ignore[return-value]

    async def run_async(self, conn: psycopg.AsyncConnection[Any]) -> T:
        cursor = await conn.execute(self.statement.sql, self.params)  # type: ignore[arg-type]
        row = await cursor.fetchone()
        return None if row is None else row[0]  # type: ignore[return-value]


# ------------------------------------------------------------ worker-facing (ql_worker_ingress)

AUTHENTICATE_WORKER: Statement[JsonObject] = Statement("authenticate_worker", (
    "SELECT ql.authenticate_worker(p_credential_id => %(credential_id)s::text,"
    " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
    " p_action => %(action)s::text)"))


def authenticate_worker(*, credential_id: str, secret_digest: bytes, worker_id: str,
                        action: str) -> Call[JsonObject]:
    return Call(AUTHENTICATE_WORKER, {"credential_id": credential_id,
                                      "secret_digest": secret_digest,
                                      "worker_id": worker_id, "action": action})


RECORD_AUTH_DENIAL: Statement[None] = Statement("record_auth_denial", (
    "SELECT ql.record_auth_denial(p_credential_id => %(credential_id)s::text,"
    " p_worker_id => %(worker_id)s::text, p_action => %(action)s::text,"
    " p_reason => %(reason)s::text)"))


def record_auth_denial(*, credential_id: str | None, worker_id: str | None, action: str,
                       reason: str) -> Call[None]:
    return Call(RECORD_AUTH_DENIAL, {"credential_id": credential_id, "worker_id": worker_id,
                                     "action": action, "reason": reason})


OPEN_SESSION: Statement[JsonObject] = Statement("open_session", (
    "SELECT ql.open_session(p_credential_id => %(credential_id)s::text,"
    " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
    " p_capabilities_canonical => %(capabilities_canonical)s::bytea)"))


def open_session(*, credential_id: str, secret_digest: bytes, worker_id: str,
                 capabilities_canonical: bytes) -> Call[JsonObject]:
    return Call(OPEN_SESSION, {"credential_id": credential_id, "secret_digest": secret_digest,
                               "worker_id": worker_id,
                               "capabilities_canonical": capabilities_canonical})


_SESSION_ARGS = ("p_credential_id => %(credential_id)s::text,"
                 " p_secret_digest => %(secret_digest)s::bytea,"
                 " p_worker_id => %(worker_id)s::text, p_session_id => %(session_id)s::text,"
                 " p_generation => %(generation)s::bigint")

HEARTBEAT_SESSION: Statement[JsonObject] = Statement(
    "heartbeat_session", f"SELECT ql.heartbeat_session({_SESSION_ARGS})")
CLOSE_SESSION: Statement[JsonObject] = Statement(
    "close_session", f"SELECT ql.close_session({_SESSION_ARGS})")


def _session_params(credential_id: str, secret_digest: bytes, worker_id: str, session_id: str,
                    generation: int) -> dict[str, Any]:
    return {"credential_id": credential_id, "secret_digest": secret_digest,
            "worker_id": worker_id, "session_id": session_id, "generation": generation}


def heartbeat_session(*, credential_id: str, secret_digest: bytes, worker_id: str,
                      session_id: str, generation: int) -> Call[JsonObject]:
    return Call(HEARTBEAT_SESSION, _session_params(credential_id, secret_digest, worker_id,
                                                   session_id, generation))


def close_session(*, credential_id: str, secret_digest: bytes, worker_id: str,
                  session_id: str, generation: int) -> Call[JsonObject]:
    return Call(CLOSE_SESSION, _session_params(credential_id, secret_digest, worker_id,
                                               session_id, generation))


HEARTBEAT_SESSIONS: Statement[list[JsonObject]] = Statement(
    "heartbeat_sessions", "SELECT ql.heartbeat_sessions(p_items => %(items)s::jsonb)")


def heartbeat_sessions(*, items: Sequence[Mapping[str, Any]]) -> Call[list[JsonObject]]:
    """`items`: `{credentialId, secretDigest (hex), workerId, sessionId, generation}` each."""
    return Call(HEARTBEAT_SESSIONS, {"items": Jsonb(list(items))})


PULL_OFFER: Statement[JsonObject] = Statement("pull_offer", (
    "SELECT ql.pull_offer(p_credential_id => %(credential_id)s::text,"
    " p_secret_digest => %(secret_digest)s::bytea, p_worker_id => %(worker_id)s::text,"
    " p_session_id => %(session_id)s::text, p_generation => %(generation)s::bigint,"
    " p_offer_id => %(offer_id)s::text, p_token_digest => %(token_digest)s::bytea,"
    " p_bounds => %(bounds)s::jsonb)"))


def pull_offer(*, credential_id: str, secret_digest: bytes, worker_id: str, session_id: str,
               generation: int, offer_id: str, token_digest: bytes,
               bounds: Mapping[str, int] | None = None) -> Call[JsonObject]:
    """`bounds`: `{pages, candidates, claimAttempts}` within the caps; None = defaults."""
    return Call(PULL_OFFER, {**_session_params(credential_id, secret_digest, worker_id,
                                               session_id, generation),
                             "offer_id": offer_id, "token_digest": token_digest,
                             "bounds": None if bounds is None else Jsonb(dict(bounds))})


_LEASE_ARGS = (f"{_SESSION_ARGS}, p_offer_id => %(offer_id)s::text,"
               " p_token_digest => %(token_digest)s::bytea")

ACK_LEASE: Statement[JsonObject] = Statement("ack_lease", (
    f"SELECT ql.ack_lease({_LEASE_ARGS}, p_phase => %(phase)s::text,"
    " p_reason => %(reason)s::text)"))


def _lease_params(credential_id: str, secret_digest: bytes, worker_id: str, session_id: str,
                  generation: int, offer_id: str, token_digest: bytes) -> dict[str, Any]:
    return {**_session_params(credential_id, secret_digest, worker_id, session_id, generation),
            "offer_id": offer_id, "token_digest": token_digest}


def ack_lease(*, credential_id: str, secret_digest: bytes, worker_id: str, session_id: str,
              generation: int, offer_id: str, token_digest: bytes, phase: str,
              reason: str | None = None) -> Call[JsonObject]:
    """`phase`: starting | running | start_failed (with a `reason`)."""
    return Call(ACK_LEASE, {**_lease_params(credential_id, secret_digest, worker_id, session_id,
                                            generation, offer_id, token_digest),
                            "phase": phase, "reason": reason})


HEARTBEAT_LEASE: Statement[JsonObject] = Statement("heartbeat_lease", (
    f"SELECT ql.heartbeat_lease({_LEASE_ARGS},"
    " p_lease_version => %(lease_version)s::bigint)"))


def heartbeat_lease(*, credential_id: str, secret_digest: bytes, worker_id: str,
                    session_id: str, generation: int, offer_id: str, token_digest: bytes,
                    lease_version: int | None = None) -> Call[JsonObject]:
    return Call(HEARTBEAT_LEASE, {**_lease_params(credential_id, secret_digest, worker_id,
                                                  session_id, generation, offer_id,
                                                  token_digest),
                                  "lease_version": lease_version})


COMPLETE_LEASE: Statement[JsonObject] = Statement("complete_lease", (
    f"SELECT ql.complete_lease({_LEASE_ARGS}, p_outcome => %(outcome)s::text,"
    " p_exit_code => %(exit_code)s::integer, p_reason => %(reason)s::text)"))


def complete_lease(*, credential_id: str, secret_digest: bytes, worker_id: str,
                   session_id: str, generation: int, offer_id: str, token_digest: bytes,
                   outcome: str, exit_code: int | None = None,
                   reason: str | None = None) -> Call[JsonObject]:
    """`outcome`: succeeded | failed | cancelled."""
    return Call(COMPLETE_LEASE, {**_lease_params(credential_id, secret_digest, worker_id,
                                                 session_id, generation, offer_id,
                                                 token_digest),
                                 "outcome": outcome, "exit_code": exit_code, "reason": reason})


IDLE_PROBE: Statement[JsonObject] = Statement("idle_probe", "SELECT ql.idle_probe()")


def idle_probe() -> Call[JsonObject]:
    return Call(IDLE_PROBE, {})


IDLE_PING: Statement[bool] = Statement(
    "idle_ping", "SELECT ql.idle_ping(p_token => %(token)s::text)")


def idle_ping(*, token: str) -> Call[bool]:
    return Call(IDLE_PING, {"token": token})


# ------------------------------------------------------------ control plane (ql_runtime)

REGISTER_WORKER: Statement[JsonObject] = Statement(
    "register_worker", "SELECT ql.register_worker(p_name => %(name)s::text)")


def register_worker(*, name: str) -> Call[JsonObject]:
    return Call(REGISTER_WORKER, {"name": name})


ISSUE_CREDENTIAL: Statement[JsonObject] = Statement("issue_credential", (
    "SELECT ql.issue_credential(p_worker_id => %(worker_id)s::text,"
    " p_credential_id => %(credential_id)s::text,"
    " p_secret_digest => %(secret_digest)s::bytea)"))


def issue_credential(*, worker_id: str, credential_id: str,
                     secret_digest: bytes) -> Call[JsonObject]:
    return Call(ISSUE_CREDENTIAL, {"worker_id": worker_id, "credential_id": credential_id,
                                   "secret_digest": secret_digest})


REVOKE_CREDENTIAL: Statement[JsonObject] = Statement(
    "revoke_credential",
    "SELECT ql.revoke_credential(p_credential_id => %(credential_id)s::text)")


def revoke_credential(*, credential_id: str) -> Call[JsonObject]:
    return Call(REVOKE_CREDENTIAL, {"credential_id": credential_id})


PUBLISH_REVISION: Statement[JsonObject] = Statement("publish_revision", (
    "SELECT ql.publish_revision(p_project => %(project)s::text, p_task => %(task)s::text,"
    " p_canonical => %(canonical)s::bytea)"))


def publish_revision(*, project: str, task: str, canonical: bytes) -> Call[JsonObject]:
    """`canonical`: the RFC 8785 bytes of a compiled `qinglong/command@v1`."""
    return Call(PUBLISH_REVISION, {"project": project, "task": task, "canonical": canonical})


ENQUEUE_RUNS: Statement[JsonObject] = Statement("enqueue_runs", (
    "SELECT ql.enqueue_runs(p_task_id => %(task_id)s::text,"
    " p_priority => %(priority)s::integer, p_count => %(count)s::integer)"))


def enqueue_runs(*, task_id: str, priority: int, count: int) -> Call[JsonObject]:
    return Call(ENQUEUE_RUNS, {"task_id": task_id, "priority": priority, "count": count})


CANCEL_RUN: Statement[JsonObject] = Statement(
    "cancel_run", "SELECT ql.cancel_run(p_run_id => %(run_id)s::text)")


def cancel_run(*, run_id: str) -> Call[JsonObject]:
    return Call(CANCEL_RUN, {"run_id": run_id})


SWEEP_LEASES: Statement[JsonObject] = Statement(
    "sweep_leases", "SELECT ql.sweep_leases(p_batch => %(batch)s::integer)")


def sweep_leases(*, batch: int = 500) -> Call[JsonObject]:
    return Call(SWEEP_LEASES, {"batch": batch})


# ------------------------------------------------------------ reads (ql_readonly)

STATUS_SNAPSHOT: Statement[JsonObject] = Statement(
    "status_snapshot", "SELECT ql.status_snapshot()")


def status_snapshot() -> Call[JsonObject]:
    return Call(STATUS_SNAPSHOT, {})


def statements() -> dict[str, Statement[Any]]:
    """Every statement of this module by function name (for the pg_proc check)."""
    found = {value.function: value for value in globals().values()
             if isinstance(value, Statement)}
    return dict(sorted(found.items()))
