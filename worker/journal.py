"""The worker's inbox journal (SPEC §6.4, ADR-0110 §3).

Layout (root 0700, files 0600, all JSON with sorted keys)::

    ROOT/owner.lock              one owner per root (worker.owner_lock)
    ROOT/pending-claim.json      the stable claim intent (SPEC §6.1)
    ROOT/inbox/<offerId>.json    one accepted offer + rebuilt lease per file; with the
                                 executor (SPEC §7) also its execution state, updated
                                 by :meth:`Journal.advance` and removed once terminal
    ROOT/failed-claims/<offerId>.json   abandoned intents, for diagnostics (bounded)
    ROOT/aside/<offerId>.json    inbox entries whose lease can no longer be used
                                 (:meth:`Journal.move_aside`): kept for inspection,
                                 never counted against the capacity, never offered

The journal is a local *delivery* crash barrier, not execution authority: it
records that an offer was durably admitted before the pending claim is cleared.
Everything fails closed: no lock / a compromised lock, unsafe permissions, a
full inbox, an oversize entry, a conflicting replay of the same offer, a lease
version going backwards, or a corrupt file all raise instead of guessing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Any, TypeGuard

from qinglong.worker import fsio
from qinglong.worker.fsio import REAL_FS, FileSystem, UnsafePermissions
from qinglong.worker.owner_lock import STALE_DEFAULT_MS, Clock, OwnerLock, wall_clock_ms

DEFAULT_CAPACITY = 64
HARD_CAPACITY = 1024
ENTRY_LIMIT = 160 * 1024
PENDING_LIMIT = 8 * 1024
FAILED_KEEP = 32
ASIDE_KEEP = HARD_CAPACITY

PENDING_NAME = "pending-claim.json"
INBOX_DIR = "inbox"
FAILED_DIR = "failed-claims"
ASIDE_DIR = "aside"

PENDING_SCHEMA = "qinglong/pending-claim@v1"
MAX_BATCH = 16  # offers of one batched pull (SPEC §18.1)
ENTRY_SCHEMA = "qinglong/inbox-entry@v1"
FAILED_SCHEMA = "qinglong/failed-claim@v1"

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# 32 bytes as canonical unpadded base64url: the last char carries 2 zero bits.
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$")
_REASON = re.compile(r"^[a-z0-9_]{1,64}$")

__all__ = [
    "ASIDE_DIR",
    "DEFAULT_CAPACITY",
    "ENTRY_LIMIT",
    "HARD_CAPACITY",
    "AcceptOutcome",
    "EntryState",
    "EntryTooLarge",
    "InboxEntry",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalFull",
    "LeaseVersionRegression",
    "OfferConflict",
    "PendingClaim",
    "UnsafePermissions",
]


class JournalError(Exception):
    """Base class of journal refusals."""


class JournalFull(JournalError):
    """The inbox holds ``capacity`` entries; a new offer is refused."""


class EntryTooLarge(JournalError):
    """A serialized entry exceeds 160 KiB."""


class OfferConflict(JournalError):
    """Same offer id, different identity or payload; the stored entry is kept."""


class LeaseVersionRegression(JournalError):
    """A replay carries an older lease version than the stored one."""


class JournalCorrupt(JournalError):
    """A journal file does not parse or does not match its name."""


def is_offer_id(value: object) -> bool:
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def is_lease_token(value: object) -> bool:
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def dump_json(doc: Any) -> bytes:
    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("duplicate JSON object key")
        out[key] = value
    return out


def _bad_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def load_json(data: bytes) -> Any:
    """Strict parse: UTF-8, no duplicate keys, no NaN/Infinity."""
    return json.loads(data.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_bad_constant)


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise JournalCorrupt(what)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class PendingClaim:
    """The stable claim intent, persisted before the first byte of a pull."""

    offer_id: str
    lease_token: str
    worker_id: str
    session_id: str
    generation: int
    capabilities_digest: str
    attempts: int
    next_attempt_at_ms: int
    created_at_ms: int
    last_outcome: str | None = None
    # A batched pull's further (offer id, lease token) pairs (SPEC §18.2), after
    # the first one above; empty for a single pull (its file has no `batch` key).
    batch: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.pairs()
        if len(pairs) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} offers")
        if len({offer_id for offer_id, _ in pairs}) != len(pairs):
            raise ValueError("a batch's offer ids must be distinct")
        for offer_id, token in pairs:
            if not is_offer_id(offer_id):
                raise ValueError("offer_id must be a lowercase canonical UUID")
            if not is_lease_token(token):
                raise ValueError("lease_token must be 43 chars of canonical base64url")
        for name in ("generation", "attempts", "next_attempt_at_ms", "created_at_ms"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be a non-negative integer")

    def __repr__(self) -> str:
        # Never let the token reach a log line via repr().
        return (
            f"PendingClaim(offer_id={self.offer_id!r}, batch={len(self.pairs())},"
            f" attempts={self.attempts})"
        )

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every (offer id, lease token) of the intent, the first one first."""
        return ((self.offer_id, self.lease_token), *self.batch)

    def offer_ids(self) -> list[str]:
        return [offer_id for offer_id, _ in self.pairs()]

    def for_offer(self, offer_id: str) -> PendingClaim | None:
        """The single-offer intent of one of this batch's pairs (None: not ours)."""
        for pair_id, token in self.pairs():
            if pair_id == offer_id:
                return dataclasses.replace(self, offer_id=pair_id, lease_token=token, batch=())
        return None

    def to_doc(self) -> dict[str, Any]:
        doc = self._single_doc()
        if self.batch:
            doc["batch"] = [{"offerId": o, "leaseToken": t} for o, t in self.batch]
        return doc

    def _single_doc(self) -> dict[str, Any]:
        return {
            "schema": PENDING_SCHEMA,
            "offerId": self.offer_id,
            "leaseToken": self.lease_token,
            "workerId": self.worker_id,
            "sessionId": self.session_id,
            "generation": self.generation,
            "capabilitiesDigest": self.capabilities_digest,
            "attempts": self.attempts,
            "nextAttemptAtMs": self.next_attempt_at_ms,
            "createdAtMs": self.created_at_ms,
            "lastOutcome": self.last_outcome,
        }

    @classmethod
    def from_doc(cls, doc: Any) -> PendingClaim:
        keys = {
            "schema", "offerId", "leaseToken", "workerId", "sessionId", "generation",
            "capabilitiesDigest", "attempts", "nextAttemptAtMs", "createdAtMs", "lastOutcome",
        }  # fmt: skip
        _require(
            isinstance(doc, dict) and set(doc) - {"batch"} == keys, "pending claim: wrong fields"
        )
        _require(doc["schema"] == PENDING_SCHEMA, "pending claim: wrong schema")
        batch = doc.get("batch", [])
        _require(
            isinstance(batch, list) and ("batch" not in doc or len(batch) > 0),
            "pending claim: wrong batch",
        )
        _require(
            all(isinstance(p, dict) and set(p) == {"offerId", "leaseToken"} for p in batch),
            "pending claim: wrong batch",
        )
        try:
            return cls(
                offer_id=doc["offerId"],
                lease_token=doc["leaseToken"],
                worker_id=doc["workerId"],
                session_id=doc["sessionId"],
                generation=doc["generation"],
                capabilities_digest=doc["capabilitiesDigest"],
                attempts=doc["attempts"],
                next_attempt_at_ms=doc["nextAttemptAtMs"],
                created_at_ms=doc["createdAtMs"],
                last_outcome=doc["lastOutcome"],
                batch=tuple((p["offerId"], p["leaseToken"]) for p in batch),
            )
        except (ValueError, TypeError) as exc:
            raise JournalCorrupt(f"pending claim: {exc}") from None


def _identity(offer: dict[str, Any], lease: dict[str, Any]) -> tuple[Any, ...]:
    """What must be identical for two deliveries of one offer (SPEC §6.4)."""
    return (
        offer.get("candidate"),
        offer.get("executionRevision"),
        offer.get("contentDigest"),
        offer.get("target"),
        {k: v for k, v in lease.items() if k not in _MUTABLE_LEASE_FIELDS},
    )


# Fields a newer lease version may legitimately change.
_MUTABLE_LEASE_FIELDS = frozenset({"leaseVersion", "expiresAtMs", "updatedAtMs", "state",
                                   "startedAtMs"})  # fmt: skip


@dataclass(frozen=True)
class InboxEntry:
    """An accepted offer plus the lease rebuilt with the worker's own token."""

    offer: dict[str, Any] = field(hash=False)
    lease: dict[str, Any] = field(hash=False)  # includes "leaseToken"
    accepted_at_ms: int
    state: str = "accepted"
    # Executor bookkeeping (pid + start ticks of the command, the decided
    # completion); absent until the executor touches the entry.
    execution: dict[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not is_offer_id(self.offer.get("offerId")):
            raise ValueError("offer.offerId must be a lowercase canonical UUID")
        if self.lease.get("offerId") != self.offer_id:
            raise ValueError("lease.offerId must equal offer.offerId")
        if not is_lease_token(self.lease.get("leaseToken")):
            raise ValueError("lease.leaseToken missing or malformed")
        version = self.lease.get("leaseVersion")
        if not _is_int(version) or version < 1:
            raise ValueError("lease.leaseVersion must be an integer >= 1")

    def __repr__(self) -> str:
        return f"InboxEntry(offer_id={self.offer_id!r}, lease_version={self.lease_version})"

    @property
    def offer_id(self) -> str:
        return str(self.offer["offerId"])

    @property
    def lease_version(self) -> int:
        return int(self.lease["leaseVersion"])

    def same_identity(self, other: InboxEntry) -> bool:
        return _identity(self.offer, self.lease) == _identity(other.offer, other.lease)

    def same_payload(self, other: InboxEntry) -> bool:
        return (self.offer, self.lease, self.state, self.execution) == (
            other.offer, other.lease, other.state, other.execution,
        )  # fmt: skip

    def to_doc(self) -> dict[str, Any]:
        doc = {
            "schema": ENTRY_SCHEMA,
            "offerId": self.offer_id,
            "state": self.state,
            "acceptedAtMs": self.accepted_at_ms,
            "offer": self.offer,
            "lease": self.lease,
        }
        if self.execution is not None:  # absent: the pre-executor layout, unchanged
            doc["execution"] = self.execution
        return doc

    @classmethod
    def from_doc(cls, doc: Any) -> InboxEntry:
        keys = {"schema", "offerId", "state", "acceptedAtMs", "offer", "lease"}
        _require(isinstance(doc, dict) and set(doc) - {"execution"} == keys,
                 "inbox entry: wrong fields")  # fmt: skip
        execution = doc.get("execution")
        _require(execution is None or isinstance(execution, dict), "inbox entry: execution")
        _require(doc["schema"] == ENTRY_SCHEMA, "inbox entry: wrong schema")
        _require(isinstance(doc["offer"], dict) and isinstance(doc["lease"], dict),
                 "inbox entry: offer/lease must be objects")  # fmt: skip
        _require(_is_int(doc["acceptedAtMs"]), "inbox entry: acceptedAtMs")
        _require(isinstance(doc["state"], str), "inbox entry: state")
        try:
            entry = cls(doc["offer"], doc["lease"], doc["acceptedAtMs"], doc["state"], execution)
        except ValueError as exc:
            raise JournalCorrupt(f"inbox entry: {exc}") from None
        _require(entry.offer_id == doc["offerId"], "inbox entry: offerId mismatch")
        return entry


class EntryState(StrEnum):
    """Where an inbox entry stands; the order is the only way an entry may move.

    ``accepted`` is what the coordinator admits. The executor records
    ``starting`` (the starting ACK was acknowledged, before spawning),
    ``running`` (the running ACK was acknowledged) and ``exited`` (the process
    ended and its completion is decided, before it is sent). A terminal entry
    is removed, not marked (worker.lifecycle)."""

    ACCEPTED = "accepted"
    STARTING = "starting"
    RUNNING = "running"
    EXITED = "exited"

    @property
    def rank(self) -> int:
        return list(EntryState).index(self)


def _rank(state: str) -> int:
    try:
        return EntryState(state).rank
    except ValueError:
        raise JournalCorrupt(f"inbox entry: unknown state {state[:32]!r}") from None


class AcceptOutcome(StrEnum):
    PUBLISHED = "published"  # first delivery, new file
    UNCHANGED = "unchanged"  # exact replay of the stored entry
    UPDATED = "updated"  # same offer, higher lease version


class Journal:
    """An opened journal root, owned by this process until :meth:`close`."""

    def __init__(
        self, root: str, lock: OwnerLock, capacity: int, fs: FileSystem, clock: Clock
    ) -> None:
        self.root = root
        self.inbox_dir = os.path.join(root, INBOX_DIR)
        self.failed_dir = os.path.join(root, FAILED_DIR)
        self.aside_dir = os.path.join(root, ASIDE_DIR)
        self.capacity = capacity
        self.lock = lock
        self._fs = fs
        self._clock = clock

    @classmethod
    def open(
        cls,
        root: str,
        *,
        capacity: int = DEFAULT_CAPACITY,
        stale_ms: int = STALE_DEFAULT_MS,
        fs: FileSystem = REAL_FS,
        clock: Clock = wall_clock_ms,
        refresher: bool = True,
    ) -> Journal:
        if not 1 <= capacity <= HARD_CAPACITY:
            raise ValueError(f"capacity must be 1..{HARD_CAPACITY}")
        root = os.path.abspath(root)
        fsio.ensure_private_dir(fs, root)
        lock = OwnerLock.acquire(root, stale_ms=stale_ms, clock=clock)
        try:
            journal = cls(root, lock, capacity, fs, clock)
            journal._prepare()
        except BaseException:
            lock.release()
            raise
        if refresher:
            lock.start_refresher()
        return journal

    def _prepare(self) -> None:
        dirs = (self.inbox_dir, self.failed_dir, self.aside_dir)
        for directory in dirs:
            fsio.ensure_private_dir(self._fs, directory)
        for directory in (self.root, *dirs):
            fsio.sweep_temp_files(self._fs, directory)
            self._check_files(directory)
        # Adopt what a dead predecessor left. It may have died between a mkdir /
        # link / rename / unlink and the directory fsync, so names we can see need
        # not be durable yet; we act on them (an exact replay returns UNCHANGED and
        # the caller clears the intent), so make them durable first.
        for directory in (os.path.dirname(self.root), self.root, *dirs):
            self._fs.fsync_dir(directory)
        self._finish_moves()

    def _check_files(self, directory: str) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name in (INBOX_DIR, FAILED_DIR, ASIDE_DIR) and directory == self.root:
                    continue
                fsio.check_private(entry.path, entry.stat(follow_symlinks=False), want_dir=False)

    def close(self) -> None:
        self.lock.release()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reading -----------------------------------------------------------

    def _read_doc(self, path: str, limit: int) -> Any | None:
        try:
            read = fsio.read_file_capped(path, limit)
        except FileNotFoundError:
            return None
        except fsio.FileTooLarge as exc:
            raise JournalCorrupt(str(exc)) from None
        if read.uid != os.geteuid() or read.mode & 0o077:
            raise UnsafePermissions(f"journal file is not private: {os.path.basename(path)}")
        try:
            return load_json(read.data)
        except ValueError:
            raise JournalCorrupt(f"unparseable journal file: {os.path.basename(path)}") from None

    # -- pending claim -----------------------------------------------------

    def load_pending(self) -> PendingClaim | None:
        self.lock.check()
        doc = self._read_doc(os.path.join(self.root, PENDING_NAME), PENDING_LIMIT)
        return None if doc is None else PendingClaim.from_doc(doc)

    def save_pending(self, claim: PendingClaim) -> None:
        """Persist the intent: temp + fsync + atomic rename + directory fsync."""
        self.lock.check()
        data = dump_json(claim.to_doc())
        if len(data) > PENDING_LIMIT:
            raise EntryTooLarge("pending claim exceeds its size limit")
        fsio.update_file(self._fs, self.root, PENDING_NAME, data)

    def clear_pending(self) -> bool:
        self.lock.check()
        return fsio.remove_file(self._fs, self.root, PENDING_NAME)

    def move_pending_aside(self, reason: str) -> PendingClaim | None:
        """Keep an abandoned intent under failed-claims/ (bounded), then clear it."""
        if _REASON.fullmatch(reason) is None:
            raise ValueError("reason must be a short lowercase category")
        claim = self.load_pending()
        if claim is None:
            return None
        doc = claim.to_doc()
        # Diagnostics only: the token is useless once abandoned, but never keep it.
        del doc["leaseToken"]
        if "batch" in doc:
            doc["batch"] = [{"offerId": o} for o, _ in claim.batch]
        aside = {"schema": FAILED_SCHEMA, "claim": doc, "reason": reason,
                 "movedAtMs": self._clock()}  # fmt: skip
        self.lock.check()
        fsio.update_file(self._fs, self.failed_dir, f"{claim.offer_id}.json", dump_json(aside))
        self.clear_pending()
        self._prune_failed()
        return claim

    def failed_claim_ids(self) -> list[str]:
        self.lock.check()
        return sorted(n[:-5] for n in self._json_names(self.failed_dir))

    def _prune_failed(self) -> None:
        names = list(self._json_names(self.failed_dir))
        if len(names) <= FAILED_KEEP:
            return
        by_age = sorted(names, key=lambda n: os.stat(os.path.join(self.failed_dir, n)).st_mtime_ns)
        for name in by_age[: len(names) - FAILED_KEEP]:
            self.lock.check()
            fsio.remove_file(self._fs, self.failed_dir, name)

    # -- inbox -------------------------------------------------------------

    @staticmethod
    def _json_names(directory: str) -> list[str]:
        with os.scandir(directory) as entries:
            return [
                e.name
                for e in entries
                if e.name.endswith(".json") and not e.name.startswith(fsio.TEMP_PREFIX)
            ]

    def offer_ids(self) -> list[str]:
        self.lock.check()
        return sorted(n[:-5] for n in self._json_names(self.inbox_dir))

    def count(self) -> int:
        self.lock.check()
        return len(self._json_names(self.inbox_dir))

    def get(self, offer_id: str) -> InboxEntry | None:
        self.lock.check()
        if not is_offer_id(offer_id):
            raise ValueError("offer id must be a lowercase canonical UUID")
        doc = self._read_doc(os.path.join(self.inbox_dir, f"{offer_id}.json"), ENTRY_LIMIT)
        if doc is None:
            return None
        entry = InboxEntry.from_doc(doc)
        _require(entry.offer_id == offer_id, "inbox entry: file name does not match offerId")
        return entry

    def accept_batch(self, entries: list[InboxEntry]) -> list[AcceptOutcome]:
        """Admit a batched pull's offers (SPEC §18.2): each published like
        :meth:`accept` (temp, fsync, hard link), the inbox directory fsynced
        once for all of them before this returns. Stops at the first refusal
        (raised); what was linked before it is synced first."""
        outcomes: list[AcceptOutcome] = []
        try:
            for entry in entries:
                outcomes.append(self.accept(entry, sync_dir=False))
        finally:
            if outcomes:
                self.lock.check()
                self._fs.fsync_dir(self.inbox_dir)
        return outcomes

    def accept(self, entry: InboxEntry, *, sync_dir: bool = True) -> AcceptOutcome:
        """Durably admit an offer; idempotent for exact replays, refuses conflicts.
        ``sync_dir=False``: the caller fsyncs the inbox directory (accept_batch)."""
        self.lock.check()
        data = dump_json(entry.to_doc())
        if len(data) > ENTRY_LIMIT:
            raise EntryTooLarge(f"inbox entry is {len(data)} bytes (limit {ENTRY_LIMIT})")
        existing = self.get(entry.offer_id)
        if existing is None:
            if self.count() >= self.capacity:
                raise JournalFull(f"inbox holds {self.capacity} entries")
            try:
                self.lock.check()
                publish = fsio.publish_new if sync_dir else fsio.link_new
                publish(self._fs, self.inbox_dir, f"{entry.offer_id}.json", data)
                return AcceptOutcome.PUBLISHED
            except FileExistsError:
                existing = self.get(entry.offer_id)
                if existing is None:
                    raise
        return self._merge(existing, entry)

    def _merge(self, existing: InboxEntry, entry: InboxEntry) -> AcceptOutcome:
        if not existing.same_identity(entry):
            raise OfferConflict("offer replay differs in candidate/revision/session/lease/token")
        if entry.lease_version < existing.lease_version:
            raise LeaseVersionRegression(
                f"lease version {entry.lease_version} < stored {existing.lease_version}"
            )
        if entry.lease_version == existing.lease_version:
            if existing.same_payload(entry):
                return AcceptOutcome.UNCHANGED
            raise OfferConflict("same lease version with a different payload")
        if _rank(entry.state) < _rank(existing.state):
            # A delivery replay must never rewind what the executor recorded.
            raise OfferConflict(f"replay state {entry.state} is behind stored {existing.state}")
        # Keep the first admission time: it dates the durable acceptance.
        updated = InboxEntry(entry.offer, entry.lease, existing.accepted_at_ms, entry.state,
                             existing.execution)  # fmt: skip
        self.lock.check()
        fsio.update_file(
            self._fs, self.inbox_dir, f"{entry.offer_id}.json", dump_json(updated.to_doc())
        )
        return AcceptOutcome.UPDATED

    def advance(self, entry: InboxEntry) -> AcceptOutcome:
        """Record the executor's progress on a stored entry (update via rename).

        Monotonic: same offer identity, the lease version never decreases and
        the state never moves back (:class:`EntryState` order). A lease release
        does not bump the version, so an equal version with a later state or new
        execution data is an update; anything older is refused, never written.
        """
        self.lock.check()
        existing = self.get(entry.offer_id)
        if existing is None:
            raise JournalCorrupt(f"inbox entry {entry.offer_id} vanished")
        if not existing.same_identity(entry):
            raise OfferConflict("advance differs in candidate/revision/session/lease/token")
        if entry.lease_version < existing.lease_version:
            raise LeaseVersionRegression(
                f"lease version {entry.lease_version} < stored {existing.lease_version}"
            )
        if _rank(entry.state) < _rank(existing.state):
            raise OfferConflict(f"state {entry.state} is behind stored {existing.state}")
        if existing.same_payload(entry):
            return AcceptOutcome.UNCHANGED
        data = dump_json(entry.to_doc())
        if len(data) > ENTRY_LIMIT:
            raise EntryTooLarge(f"inbox entry is {len(data)} bytes (limit {ENTRY_LIMIT})")
        self.lock.check()
        fsio.update_file(self._fs, self.inbox_dir, f"{entry.offer_id}.json", data)
        return AcceptOutcome.UPDATED

    def remove(self, offer_id: str) -> bool:
        self.lock.check()
        if not is_offer_id(offer_id):
            raise ValueError("offer id must be a lowercase canonical UUID")
        return fsio.remove_file(self._fs, self.inbox_dir, f"{offer_id}.json")

    # -- aside -------------------------------------------------------------

    def move_aside(self, offer_id: str) -> bool:
        """Move an entry whose lease can no longer be used out of ``inbox/``.

        Durable and crash-safe without a cross-directory rename: hard-link the
        file into ``aside/`` (never replaces), fsync ``aside/``, unlink it from
        ``inbox/``, fsync ``inbox/``. A crash in between leaves the same file
        under both names, which the next open finishes moving
        (:meth:`_finish_moves`) before anything counts or reads the inbox; so an
        entry is never lost and never counted twice. False if it was not in the
        inbox."""
        self.lock.check()
        if not is_offer_id(offer_id):
            raise ValueError("offer id must be a lowercase canonical UUID")
        name = f"{offer_id}.json"
        source = os.path.join(self.inbox_dir, name)
        target = os.path.join(self.aside_dir, name)
        try:
            self._fs.link(source, target)
        except FileNotFoundError:
            return False
        except FileExistsError:
            if not _same_file(source, target):
                raise OfferConflict(f"aside/{name} holds another entry") from None
        self._fs.fsync_dir(self.aside_dir)
        self.lock.check()
        fsio.remove_file(self._fs, self.inbox_dir, name)
        self._prune_aside()
        return True

    def aside_ids(self) -> list[str]:
        self.lock.check()
        return sorted(n[:-5] for n in self._json_names(self.aside_dir))

    def _finish_moves(self) -> None:
        """Complete a move aside a dead predecessor left half done (both names)."""
        aside = set(self._json_names(self.aside_dir))
        for name in self._json_names(self.inbox_dir):
            if name not in aside:
                continue
            if not _same_file(os.path.join(self.inbox_dir, name),
                              os.path.join(self.aside_dir, name)):  # fmt: skip
                raise JournalCorrupt(f"inbox and aside hold different entries: {name}")
            fsio.remove_file(self._fs, self.inbox_dir, name)

    def _prune_aside(self) -> None:
        names = self._json_names(self.aside_dir)
        if len(names) <= ASIDE_KEEP:
            return
        # The link into aside/ set each file's ctime: the oldest moves go first.
        by_age = sorted(names, key=lambda n: os.stat(os.path.join(self.aside_dir, n)).st_ctime_ns)
        for name in by_age[: len(names) - ASIDE_KEEP]:
            self.lock.check()
            fsio.remove_file(self._fs, self.aside_dir, name)


def _same_file(first: str, second: str) -> bool:
    """One inode under two names, or (a copy restored from a backup) equal bytes."""
    a, b = os.stat(first, follow_symlinks=False), os.stat(second, follow_symlinks=False)
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    return (a.st_size == b.st_size
            and fsio.read_file_capped(first, ENTRY_LIMIT).data
            == fsio.read_file_capped(second, ENTRY_LIMIT).data)  # fmt: skip
