"""The QingLong SQLSTATE table (docs/DESIGN.md "SQLSTATEs"), in one place.

plpgsql functions raise these codes; the ingress and the control-plane commands
map them to a reason code and an HTTP status through this table only, so the
database and the wire never disagree about what an error means.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class SqlStateInfo:
    code: str
    reason: str
    http_status: int | None  # None: never surfaces as an HTTP answer (a bug if it does)
    meaning: str


class QlSqlState(Enum):
    INVALID_INPUT = SqlStateInfo(
        "QL001", "invalid_input", 400, "malformed argument / unknown field / bad type"
    )
    LIMIT_EXCEEDED = SqlStateInfo(
        "QL002", "limit_exceeded", 400, "a bound above its hard cap, oversize set"
    )
    INVALID_SEMVER = SqlStateInfo(
        "QL003", "invalid_semver", 400, "version/range not valid SemVer 2.0.0"
    )
    NOT_FOUND = SqlStateInfo(
        "QL004", "not_found", 404, "task / run / worker / credential unknown (control plane)"
    )
    OUT_OF_BOUNDS = SqlStateInfo(
        "QL006", "out_of_bounds", 400, "a setting or argument outside its documented bounds"
    )
    SESSION_NOT_FOUND = SqlStateInfo(
        "QL010", "session_not_found", 409, "no such session for this worker"
    )
    SESSION_REPLACED = SqlStateInfo(
        "QL011", "session_replaced", 409, "generation is not the session's current generation"
    )
    SESSION_EXPIRED = SqlStateInfo("QL012", "session_expired", 409, "session lease expired")
    SESSION_CLOSED = SqlStateInfo("QL013", "session_closed", 409, "session closed")
    CAPABILITIES_MISMATCH = SqlStateInfo(
        "QL014",
        "capabilities_mismatch",
        409,
        "stored canonical capabilities no longer hash to their digest",
    )
    SESSION_DRAINING = SqlStateInfo(
        "QL015",
        "session_draining",
        409,
        "session draining: no new offer; its started leases run on until they end",
    )
    LABEL_NOT_GRANTED = SqlStateInfo(
        "QL016",
        "label_not_granted",
        403,
        "a declared label is not granted to the worker (DETAIL: the key)",
    )
    TOKEN_INVALID = SqlStateInfo(
        "QL030",
        "token_invalid",
        401,
        "producer API: unknown, wrong, revoked or expired project token (one answer for all)",
    )
    SCOPE_MISSING = SqlStateInfo(
        "QL031", "scope_missing", 403, "producer API: the project token lacks the call's scope"
    )
    SECRET_CONFLICT = SqlStateInfo(
        "QL040",
        "secret_conflict",
        409,
        "secrets (SPEC §14.1): the secret or the data keys changed since they were read",
    )
    KEK_MISMATCH = SqlStateInfo(
        "QL041",
        "kek_mismatch",
        409,
        "secrets: the stored data keys are wrapped by another key-encryption key",
    )
    ILLEGAL_TRANSITION = SqlStateInfo(
        "QL020", "illegal_transition", 409, "lifecycle transition not allowed from this state"
    )
    IMMUTABLE_REVISION = SqlStateInfo(
        "QL021", "immutable_revision", None, "UPDATE/DELETE on execution_revisions"
    )
    TASK_DISABLED = SqlStateInfo(
        "QL022", "task_disabled", 409, "the task is disabled: it takes no new work (retry)"
    )

    @property
    def code(self) -> str:
        return self.value.code

    @property
    def reason(self) -> str:
        return self.value.reason

    @property
    def http_status(self) -> int | None:
        return self.value.http_status


BY_CODE: dict[str, QlSqlState] = {member.code: member for member in QlSqlState}


# PostgreSQL's own states that mean "this server can no longer take our writes"
# (SPEC §17.2): read_only_sql_transaction — a standby, a demoted old primary, or a
# server switched read-only. A connection that meets one is discarded, never reused
# (qinglong.db.errors.ReadOnlyServer).
READ_ONLY_SQL_TRANSACTION = "25006"


def lookup(sqlstate: str | None) -> QlSqlState | None:
    """The QingLong state for a SQLSTATE, or None for anything else (a 5xx)."""
    if sqlstate is None:
        return None
    return BY_CODE.get(sqlstate)
