"""Deterministic crash-consistency simulator for the worker journal (SPEC §6.4, ADR-0110 §3).

Record → replay every crash prefix → reopen with the real ``Journal.open`` → check.

Recording
---------
A script of real journal calls (``Action``) runs against a real temp directory
through :class:`RecordingFS`, a :class:`worker.fsio.FileSystem` that performs each
mutating call for real and, once it succeeded, appends a :class:`Call` (kind,
path relative to the base directory, data, fd, mode) to the trace: ``mkdir``,
``create`` (``O_CREAT|O_EXCL|O_NOFOLLOW`` + pinned mode), ``write``, ``fsync``,
``close``, ``link`` (no replace), ``rename`` (replace), ``unlink``, ``fsync_dir``.
``OwnerLock`` does its own I/O (not routed through ``FileSystem``); its install
is recorded as one ``lock`` call, detected before the next call, and modelled as
what the lock code does: write + fsync a new inode, rename it over
``owner.lock``, fsync the root directory. The recorded process "dies" after its
last action: ``close()`` (which marks the record released) is not in the trace.

Disk model (:class:`DiskModel`)
------------------------------
Inodes plus directories. For each file inode: current bytes and the bytes at
its last ``fsync`` (``None`` = never fsynced). For each directory: current
entries, the entries at its last ``fsync_dir`` (``None`` = never; the base
directory is treated as durable and empty), and the list of entry changes
(add / delete / rename) issued since then.

Crash models, applied after call k for every k = 0..N
----------------------------------------------------
* ``process`` — the process dies, the kernel survives: every completed call's
  effect is visible (the current entries and bytes). Open fds and flocks vanish.
* ``power`` — only what was fsynced is guaranteed. Conservative, POSIX-level
  (no ext4 ordered-mode luck):

  - a directory's entries are its entries at its last ``fsync_dir`` with **any
    subset** of the later changes applied, in issue order (all subsets when at
    most ``subset_limit`` changes are pending, else every in-order prefix). The
    empty subset is "every un-fsynced create/link/rename/unlink is lost"; the full
    one is "all of them happened to reach the disk". A rename is atomic (the
    destination names the old or the new inode, never nothing);
  - a file's bytes are its last fsynced bytes (empty if never fsynced — the
    classic zero-length file), **or** all written bytes, **or** a torn write (the
    fsynced bytes plus half of the rest).

  Every combination (directory choice x file-data choice for reachable files) is
  a distinct power-loss state, so both extremes the brief names are included:
  "un-fsynced rename lost, un-fsynced data kept" and "un-fsynced rename kept,
  un-fsynced data lost". Each state is labelled ``names:<x>,data:<y>`` with x, y
  in durable (nothing was pending) / lost / kept / torn / mixed.
* ``restart+power`` and ``restart+process`` — two crashes: the process dies after
  call k; a new process reopens the journal (recorded, continuing the same disk
  model, so un-fsynced names it *inherited* stay un-fsynced) and re-runs the
  script from the first action that had not returned — what the claim
  coordinator does with a surviving intent; then power fails (or the process
  dies) after each of *its* calls. This catches a recovery that acts on state it
  never made durable (e.g. sees an inbox entry, returns ``UNCHANGED``, clears the
  intent, and loses both on the next power cut).

Checks, on every state (deduplicated by (disk image, actions returned))
----------------------------------------------------------------------
The state is materialized into a fresh directory and reopened with the real
``Journal.open`` as a new owner (the dead owner's lock record comes from the
simulated disk; the check clock is past the stale period — same pid, so the
dead-pid shortcut cannot apply). Then:

1. open and every read (``load_pending``, ``get`` of each inbox id, each
   failed-claims record) succeed: a partial or corrupt file under a final name,
   or ``JournalCorrupt``, is a violation (``corrupt``/``open_failed``);
2. no ``.tmp-*`` file remains after open (``temp_not_swept``);
3. a pending intent and an inbox entry for the same offer agree on token,
   worker, session and generation (``inbox_disagrees_with_pending``);
4. an offer whose intent save returned never vanishes: it is pending, in the
   inbox or aside in failed-claims, unless an action legitimately dropped it (an
   ``idle`` answer) (``offer_vanished``);
5. an accept that returned is never lost or rolled back (``accepted_offer_lost``);
6. the observed (pending, inbox, failed-claims) state is exactly the script's
   abstract state after the returned actions, or after also some prefix of the
   in-flight action's effects (``unexpected_state``) — so "nothing yet" is only
   accepted before the first intent save returned;
7. re-running the rest of the script on the recovered journal succeeds and ends
   in the script's final state (``recovery_failed``/``did_not_converge``).

Failed-claims records are compared without ``movedAtMs`` (it is the mover's clock).
Images are compared with ``owner.lock`` contents normalized (owner ids are random).
"""

from __future__ import annotations

import base64
import copy
import itertools
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from qinglong.worker import fsio
from qinglong.worker.fsio import FileSystem, StepHook
from qinglong.worker.journal import (
    ASIDE_DIR,
    FAILED_DIR,
    FAILED_SCHEMA,
    INBOX_DIR,
    InboxEntry,
    Journal,
    PendingClaim,
    dump_json,
    load_json,
)
from qinglong.worker.owner_lock import LOCK_NAME, STALE_DEFAULT_MS

ROOT_NAME = "journal"
T0_MS = 1_700_000_000_000
# Same pid for every simulated process: takeovers need the previous record stale.
RESTART_CLOCK_MS = T0_MS + 5 * STALE_DEFAULT_MS
CHECK_CLOCK_MS = T0_MS + 10 * STALE_DEFAULT_MS
SUBSET_LIMIT = 4
MAX_VIEWS_PER_PREFIX = 4096  # a guard against an accidental combinatorial blow-up

# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


class Kind(StrEnum):
    MKDIR = "mkdir"
    CREATE = "create"
    WRITE = "write"
    FSYNC = "fsync"
    CLOSE = "close"
    LINK = "link"
    RENAME = "rename"
    UNLINK = "unlink"
    FSYNC_DIR = "fsync_dir"
    LOCK = "lock"  # owner.lock installed by OwnerLock: durable file + rename + root fsync


@dataclass(frozen=True)
class Call:
    kind: Kind
    path: str  # relative to the recording base ("." is the base itself)
    dst: str = ""
    data: bytes = b""
    fd: int = -1
    mode: int = 0

    def __str__(self) -> str:
        extra = f" -> {self.dst}" if self.dst else ""
        size = f" ({len(self.data)} B)" if self.kind in (Kind.WRITE, Kind.LOCK) else ""
        return f"{self.kind.value} {self.path}{extra}{size}"


class RecordingFS(FileSystem):
    """Performs each call for real, then logs it (a failed call changed nothing)."""

    def __init__(self, base: str, hook: StepHook | None = None) -> None:
        super().__init__(hook)
        self.base = os.path.abspath(base)
        self.calls: list[Call] = []
        self._lock_path = os.path.join(self.base, ROOT_NAME, LOCK_NAME)
        self._lock_seen = self._lock_state()

    def _rel(self, path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), self.base)
        if rel.startswith(".."):
            raise AssertionError(f"journal touched a path outside the base: {path}")
        return rel

    def _lock_state(self) -> tuple[int, bytes] | None:
        try:
            with open(self._lock_path, "rb") as f:
                return os.fstat(f.fileno()).st_ino, f.read()
        except FileNotFoundError:
            return None

    def sync_lock(self) -> None:
        """Log an owner.lock install that happened since the last call."""
        state = self._lock_state()
        if state is not None and state != self._lock_seen:
            self.calls.append(Call(Kind.LOCK, self._rel(self._lock_path), data=state[1]))
        self._lock_seen = state

    def _log(self, call: Call) -> None:
        self.calls.append(call)

    def create_exclusive(self, path: str, mode: int = fsio.FILE_MODE) -> int:
        self.sync_lock()
        fd = super().create_exclusive(path, mode)
        self._log(Call(Kind.CREATE, self._rel(path), fd=fd, mode=mode))
        return fd

    def write_all(self, fd: int, data: bytes, path: str) -> None:
        self.sync_lock()
        super().write_all(fd, data, path)
        self._log(Call(Kind.WRITE, self._rel(path), data=bytes(data), fd=fd))

    def fsync(self, fd: int, path: str) -> None:
        self.sync_lock()
        super().fsync(fd, path)
        self._log(Call(Kind.FSYNC, self._rel(path), fd=fd))

    def close(self, fd: int, path: str) -> None:
        self.sync_lock()
        super().close(fd, path)
        self._log(Call(Kind.CLOSE, self._rel(path), fd=fd))

    def link(self, src: str, dst: str) -> None:
        self.sync_lock()
        super().link(src, dst)
        self._log(Call(Kind.LINK, self._rel(src), dst=self._rel(dst)))

    def replace(self, src: str, dst: str) -> None:
        self.sync_lock()
        super().replace(src, dst)
        self._log(Call(Kind.RENAME, self._rel(src), dst=self._rel(dst)))

    def unlink_temp(self, path: str) -> None:
        self.sync_lock()
        super().unlink_temp(path)
        self._log(Call(Kind.UNLINK, self._rel(path)))

    def unlink_final(self, path: str) -> None:
        self.sync_lock()
        super().unlink_final(path)
        self._log(Call(Kind.UNLINK, self._rel(path)))

    def mkdir(self, path: str, mode: int = fsio.DIR_MODE) -> None:
        self.sync_lock()
        super().mkdir(path, mode)
        self._log(Call(Kind.MKDIR, self._rel(path), mode=mode))

    def fsync_dir(self, path: str) -> None:
        self.sync_lock()
        super().fsync_dir(path)
        self._log(Call(Kind.FSYNC_DIR, self._rel(path)))


FsFactory = Callable[[str], RecordingFS]

# ---------------------------------------------------------------------------
# Disk model
# ---------------------------------------------------------------------------


@dataclass
class FileNode:
    data: bytes
    synced: bytes | None  # bytes at the last fsync; None: never fsynced
    mode: int


@dataclass(frozen=True)
class DirOp:
    op: str  # "add" | "del" | "mv"
    name: str
    ino: int = -1
    dst: str = ""


@dataclass
class DirNode:
    entries: dict[str, int]
    synced: dict[str, int] | None  # entries at the last fsync_dir; None: never
    pending: list[DirOp]  # entry changes since then, in issue order
    mode: int


def _apply_dirop(entries: dict[str, int], op: DirOp) -> None:
    if op.op == "add":
        entries[op.name] = op.ino
    elif op.op == "del":
        entries.pop(op.name, None)
    else:  # rename: atomic for the destination
        entries.pop(op.name, None)
        entries[op.dst] = op.ino


@dataclass(frozen=True)
class View:
    """One on-disk state: directory entries and file bytes, by inode (0 = base)."""

    dirs: dict[int, dict[str, int]]
    files: dict[int, bytes]
    modes: dict[int, int]

    def walk(self) -> Iterator[tuple[str, int]]:
        stack: list[tuple[str, int]] = [("", 0)]
        while stack:
            prefix, ino = stack.pop()
            for name in sorted(self.dirs[ino]):
                child = self.dirs[ino][name]
                path = f"{prefix}{name}"
                yield path, child
                if child in self.dirs:
                    stack.append((path + "/", child))

    def key(self) -> tuple[tuple[str, bytes | None], ...]:
        out: list[tuple[str, bytes | None]] = []
        for path, ino in self.walk():
            if ino in self.dirs:
                out.append((path, None))
            elif path.endswith("/" + LOCK_NAME):
                out.append((path, b"<owner-lock>"))  # owner ids are random per run
            else:
                out.append((path, self.files[ino]))
        return tuple(sorted(out, key=lambda item: item[0]))

    def materialize(self, dest: str) -> None:
        first_name: dict[int, str] = {}
        for rel, ino in self.walk():
            path = os.path.join(dest, rel)
            if ino in self.dirs:
                os.mkdir(path, self.modes[ino])
                os.chmod(path, self.modes[ino])
            elif ino in first_name:
                os.link(first_name[ino], path)
            else:
                first_name[ino] = path
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, self.modes[ino])
                try:
                    os.fchmod(fd, self.modes[ino])
                    os.write(fd, self.files[ino])
                finally:
                    os.close(fd)


def _combine(tags: Sequence[str]) -> str:
    live = {t for t in tags if t != "durable"}
    if not live:
        return "durable"
    return live.pop() if len(live) == 1 else "mixed"


class DiskModel:
    def __init__(self) -> None:
        self.nodes: dict[int, FileNode | DirNode] = {0: DirNode({}, {}, [], 0o700)}
        self.fds: dict[int, int] = {}
        self._next = 1

    def copy(self) -> DiskModel:
        return copy.deepcopy(self)

    def crash_process(self) -> None:
        self.fds.clear()  # open files die with the process; data/names are unaffected

    def _dir(self, ino: int) -> DirNode:
        node = self.nodes[ino]
        assert isinstance(node, DirNode)
        return node

    def _lookup(self, rel: str) -> int:
        ino = 0
        if rel == ".":
            return ino
        for part in rel.split(os.sep):
            ino = self._dir(ino).entries[part]
        return ino

    def _parent(self, rel: str) -> tuple[DirNode, int, str]:
        head, name = os.path.split(rel)
        ino = self._lookup(head or ".")
        return self._dir(ino), ino, name

    def _new(self, node: FileNode | DirNode) -> int:
        ino, self._next = self._next, self._next + 1
        self.nodes[ino] = node
        return ino

    def _add(self, rel: str, ino: int) -> None:
        parent, _, name = self._parent(rel)
        assert name not in parent.entries, f"model: {rel} exists"
        parent.entries[name] = ino
        parent.pending.append(DirOp("add", name, ino))

    def _fsync_dir(self, directory: DirNode) -> None:
        directory.synced = dict(directory.entries)
        directory.pending = []

    def apply(self, call: Call) -> None:
        kind = call.kind
        if kind is Kind.MKDIR:
            self._add(call.path, self._new(DirNode({}, None, [], call.mode)))
        elif kind is Kind.CREATE:
            ino = self._new(FileNode(b"", None, call.mode))
            self._add(call.path, ino)
            self.fds[call.fd] = ino
        elif kind is Kind.WRITE:
            node = self.nodes[self.fds[call.fd]]
            assert isinstance(node, FileNode)
            node.data += call.data
        elif kind is Kind.FSYNC:
            node = self.nodes[self.fds[call.fd]]
            assert isinstance(node, FileNode)
            node.synced = node.data
        elif kind is Kind.CLOSE:
            del self.fds[call.fd]
        elif kind is Kind.LINK:
            self._add(call.dst, self._lookup(call.path))
        elif kind is Kind.RENAME:
            parent, pino, src = self._parent(call.path)
            _, dino, dst = self._parent(call.dst)
            assert pino == dino, "the journal only renames within one directory"
            ino = parent.entries.pop(src)
            parent.entries[dst] = ino
            parent.pending.append(DirOp("mv", src, ino, dst))
        elif kind is Kind.UNLINK:
            parent, _, name = self._parent(call.path)
            del parent.entries[name]
            parent.pending.append(DirOp("del", name))
        elif kind is Kind.FSYNC_DIR:
            self._fsync_dir(self._dir(self._lookup(call.path)))
        elif kind is Kind.LOCK:
            parent, _, name = self._parent(call.path)
            ino = self._new(FileNode(call.data, call.data, fsio.FILE_MODE))
            parent.entries[name] = ino
            self._fsync_dir(parent)  # OwnerLock._install fsyncs the root directory
        else:  # pragma: no cover
            raise AssertionError(kind)

    def _modes(self) -> dict[int, int]:
        return {ino: node.mode for ino, node in self.nodes.items()}

    def volatile_view(self) -> View:
        dirs = {i: dict(n.entries) for i, n in self.nodes.items() if isinstance(n, DirNode)}
        files = {i: n.data for i, n in self.nodes.items() if isinstance(n, FileNode)}
        return View(dirs, files, self._modes())

    def _dir_options(self, node: DirNode, subset_limit: int) -> list[tuple[dict[str, int], str]]:
        base = dict(node.synced or {})
        if not node.pending:
            return [(base, "durable")]
        n = len(node.pending)
        if n <= subset_limit:
            masks = [tuple(bit == "1" for bit in f"{m:0{n}b}") for m in range(2**n)]
            # Extremes first, so a duplicate state keeps the extreme's label.
            masks.sort(key=lambda mask: (any(mask) and not all(mask), sum(mask)))
        else:  # ordered prefixes only (still includes both extremes)
            masks = [tuple(i < p for i in range(n)) for p in range(n + 1)]
        options: list[tuple[dict[str, int], str]] = []
        seen: set[frozenset[tuple[str, int]]] = set()
        for mask in masks:
            entries = dict(base)
            for op, keep in zip(node.pending, mask, strict=True):
                if keep:
                    _apply_dirop(entries, op)
            frozen = frozenset(entries.items())
            if frozen in seen:
                continue
            seen.add(frozen)
            tag = "lost" if not any(mask) else "kept" if all(mask) else "mixed"
            options.append((entries, tag))
        return options

    @staticmethod
    def _data_options(node: FileNode) -> list[tuple[bytes, str]]:
        if node.synced == node.data:
            return [(node.data, "durable")]
        synced = node.synced or b""
        options = [(synced, "lost"), (node.data, "kept")]
        if node.data.startswith(synced) and len(node.data) - len(synced) > 1:
            options.append((node.data[: len(synced) + (len(node.data) - len(synced)) // 2], "torn"))
        return options

    def power_views(self, subset_limit: int = SUBSET_LIMIT) -> Iterator[tuple[View, str]]:
        dir_inos = [i for i, n in self.nodes.items() if isinstance(n, DirNode)]
        per_dir = [self._dir_options(self._dir(i), subset_limit) for i in dir_inos]
        modes = self._modes()
        produced = 0
        for combo in itertools.product(*per_dir):
            dirs = {ino: entries for ino, (entries, _) in zip(dir_inos, combo, strict=True)}
            names = _combine([tag for _, tag in combo])
            skeleton = View(dirs, {}, modes)
            reachable = sorted({ino for _, ino in skeleton.walk() if ino not in dirs})
            per_file = []
            for ino in reachable:
                node = self.nodes[ino]
                assert isinstance(node, FileNode)
                per_file.append(self._data_options(node))
            for fcombo in itertools.product(*per_file):
                files = {ino: data for ino, (data, _) in zip(reachable, fcombo, strict=True)}
                data = _combine([tag for _, tag in fcombo])
                produced += 1
                if produced > MAX_VIEWS_PER_PREFIX:
                    raise AssertionError("power-loss state space exploded; lower subset_limit")
                yield View(dirs, files, modes), f"names:{names},data:{data}"


# ---------------------------------------------------------------------------
# Scripts and the abstract journal state
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalState:
    """What a reopened journal shows, as canonical JSON bytes."""

    pending: bytes | None = None
    inbox: frozenset[tuple[str, bytes]] = frozenset()
    failed: frozenset[tuple[str, bytes]] = frozenset()
    aside: frozenset[tuple[str, bytes]] = frozenset()  # inbox entries moved aside

    def inbox_docs(self) -> dict[str, Any]:
        return {oid: load_json(doc) for oid, doc in self.inbox}

    def pending_doc(self) -> dict[str, Any] | None:
        return None if self.pending is None else load_json(self.pending)

    def describe(self) -> str:
        pending = self.pending_doc()
        p = "none" if pending is None else f"{pending['offerId'][:8]}#a{pending['attempts']}"
        inbox = ",".join(
            f"{oid[:8]}@v{doc['lease']['leaseVersion']}"
            for oid, doc in sorted(self.inbox_docs().items())
        )
        failed = ",".join(sorted(oid[:8] for oid, _ in self.failed))
        aside = ",".join(sorted(oid[:8] for oid, _ in self.aside))
        return f"pending={p} inbox={{{inbox}}} failed={{{failed}}} aside={{{aside}}}"


Effect = Callable[[JournalState], JournalState]


@dataclass(frozen=True)
class Action:
    label: str
    run: Callable[[Journal], object]
    effects: tuple[Effect, ...]  # abstract sub-steps, in order (a crash may stop between)
    intent: str | None = None  # offer id whose intent is durable once this returns
    accepts: tuple[str, int] | None = None  # (offer id, lease version) admitted on return
    drops: str | None = None  # offer id legitimately forgotten (idle answer)
    # More offers admitted on return (a batched pull's accept_batch, SPEC §18.2).
    accepts_more: tuple[tuple[str, int], ...] = ()
    # The effects may land in any subset while in flight, not only in order: a
    # batch's links share one directory fsync, so power loss keeps any of them.
    unordered: bool = False


@dataclass(frozen=True)
class Script:
    name: str
    actions: tuple[Action, ...]

    def states_after(self, done: int) -> frozenset[JournalState]:
        state = JournalState()
        for action in self.actions[:done]:
            for effect in action.effects:
                state = effect(state)
        allowed = {state}
        if done < len(self.actions):
            flight = self.actions[done]
            if flight.unordered:
                for n in range(1, len(flight.effects) + 1):
                    for subset in itertools.combinations(flight.effects, n):
                        landed = state
                        for effect in subset:
                            landed = effect(landed)
                        allowed.add(landed)
                return frozenset(allowed)
            for effect in flight.effects:
                state = effect(state)
                allowed.add(state)
        return frozenset(allowed)

    def final(self) -> JournalState:
        (state,) = self.states_after(len(self.actions))
        return state

    def judge(self, state: JournalState, done: int) -> tuple[str, str] | None:
        """The first violated invariant for ``state`` after ``done`` returned actions."""
        pending = state.pending_doc()
        inbox = state.inbox_docs()
        failed = {oid for oid, _ in state.failed}
        aside = {oid for oid, _ in state.aside}
        if aside & set(inbox):
            twice = ",".join(sorted(o[:8] for o in aside & set(inbox)))
            return "counted_twice", f"{twice} in inbox and aside: {state.describe()}"
        if pending is not None and pending["offerId"] in inbox:
            lease = inbox[pending["offerId"]]["lease"]
            ours = (
                pending["leaseToken"],
                pending["workerId"],
                pending["sessionId"],
                pending["generation"],
            )
            theirs = (
                lease.get("leaseToken"),
                lease.get("workerId"),
                lease.get("sessionId"),
                lease.get("sessionGeneration"),
            )
            if ours != theirs:
                return "inbox_disagrees_with_pending", state.describe()
        durable: set[str] = set()
        for action in self.actions[:done]:
            if action.intent:
                durable.add(action.intent)
            if action.drops:
                durable.discard(action.drops)
        if done < len(self.actions) and self.actions[done].drops:
            durable.discard(self.actions[done].drops)  # an in-flight idle clear may land
        present = failed | aside | set(inbox) | ({pending["offerId"]} if pending else set())
        if durable - present:
            lost = ",".join(sorted(o[:8] for o in durable - present))
            return "offer_vanished", f"{lost} not pending/inbox/failed: {state.describe()}"
        for action in self.actions[:done]:
            for oid, version in (
                *((action.accepts,) if action.accepts else ()),
                *action.accepts_more,
            ):
                if oid in aside:
                    continue  # moved aside whole (the unexpected_state check judges when)
                if oid not in inbox or inbox[oid]["lease"]["leaseVersion"] < version:
                    return "accepted_offer_lost", f"{oid[:8]}@v{version}: {state.describe()}"
        if state not in self.states_after(done):
            want = " | ".join(sorted(s.describe() for s in self.states_after(done)))
            return "unexpected_state", f"{state.describe()} not in [{want}]"
        return None


def set_pending(claim: PendingClaim | None) -> Effect:
    data = None if claim is None else dump_json(claim.to_doc())
    return lambda s: replace(s, pending=data)


def put_inbox(entry: InboxEntry) -> Effect:
    item = (entry.offer_id, dump_json(entry.to_doc()))
    return lambda s: replace(s, inbox=frozenset({i for i in s.inbox if i[0] != item[0]} | {item}))


def put_aside(offer_id: str) -> Effect:
    """The inbox entry moves, bytes unchanged, to aside/ (one abstract step)."""

    def move(s: JournalState) -> JournalState:
        item = next(i for i in s.inbox if i[0] == offer_id)
        return replace(s, inbox=s.inbox - {item}, aside=s.aside | {item})

    return move


def failed_record(claim: PendingClaim, reason: str) -> bytes:
    doc = claim.to_doc()
    del doc["leaseToken"]
    return dump_json({"schema": FAILED_SCHEMA, "claim": doc, "reason": reason})


def put_failed(claim: PendingClaim, reason: str) -> Effect:
    item = (claim.offer_id, failed_record(claim, reason))
    return lambda s: replace(s, failed=s.failed | {item})


def read_state(journal: Journal) -> JournalState:
    """Read everything through the journal; raises on anything unreadable."""
    pending = journal.load_pending()
    inbox = set()
    for oid in journal.offer_ids():
        entry = journal.get(oid)
        assert entry is not None, f"listed entry vanished: {oid}"
        inbox.add((oid, dump_json(entry.to_doc())))
    failed = set()
    for oid in journal.failed_claim_ids():
        raw = fsio.read_file_capped(os.path.join(journal.failed_dir, f"{oid}.json"), 8192)
        doc = load_json(raw.data)  # ValueError on a torn record
        if not isinstance(doc, dict) or doc.get("schema") != FAILED_SCHEMA:
            raise ValueError(f"failed-claim record {oid[:8]} malformed")
        if "leaseToken" in doc.get("claim", {}):
            raise ValueError(f"failed-claim record {oid[:8]} keeps the lease token")
        doc.pop("movedAtMs", None)
        failed.add((oid, dump_json(doc)))
    aside = set()
    for oid in journal.aside_ids():
        raw = fsio.read_file_capped(os.path.join(journal.aside_dir, f"{oid}.json"), 1 << 20)
        aside.add((oid, dump_json(InboxEntry.from_doc(load_json(raw.data)).to_doc())))
    return JournalState(
        None if pending is None else dump_json(pending.to_doc()),
        frozenset(inbox),
        frozenset(failed),
        frozenset(aside),
    )


# -- the claim lifecycle (SPEC §6.1-6.4) ------------------------------------

WORKER = "11111111-1111-4111-8111-111111111111"
SESSION = "22222222-2222-4222-8222-222222222222"
DIGEST = "sha256:" + "ab" * 32
OFFER_A = "aaaaaaaa-0000-4000-8000-000000000001"
OFFER_B = "bbbbbbbb-0000-4000-8000-000000000002"
OFFER_C = "cccccccc-0000-4000-8000-000000000003"
OFFER_D = "dddddddd-0000-4000-8000-000000000004"
OFFER_E = "eeeeeeee-0000-4000-8000-000000000005"


def fixed_token(seed: int) -> str:
    # Deterministic but canonical 32-byte base64url (the journal validates the shape).
    return (
        base64.urlsafe_b64encode(bytes((seed + i) % 256 for i in range(32))).rstrip(b"=").decode()
    )


def make_claim(offer_id: str, token: str, attempts: int) -> PendingClaim:
    return PendingClaim(
        offer_id=offer_id,
        lease_token=token,
        worker_id=WORKER,
        session_id=SESSION,
        generation=1,
        capabilities_digest=DIGEST,
        attempts=attempts,
        next_attempt_at_ms=T0_MS + 1000 * attempts,
        created_at_ms=T0_MS,
        last_outcome="sent",
    )


def make_entry(claim: PendingClaim, lease_version: int, accepted_at_ms: int = T0_MS) -> InboxEntry:
    """An offer for ``claim`` with the lease rebuilt from the claim's own token."""
    lease = {
        "runId": "run-0001",
        "attemptId": "attempt-0001",
        "workerId": claim.worker_id,
        "sessionId": claim.session_id,
        "sessionGeneration": claim.generation,
        "leaseGeneration": 1,
        "leaseVersion": lease_version,
        "offerId": claim.offer_id,
        "claimedAtMs": T0_MS,
        "expiresAtMs": T0_MS + 60_000 + lease_version,
        "updatedAtMs": T0_MS + lease_version,
    }
    offer = {
        "schema": "qinglong/remote-execution-offer@v1",
        "status": "offered",
        "offerId": claim.offer_id,
        "target": {"workerId": WORKER, "sessionId": SESSION, "generation": 1},
        "candidate": {
            "runId": "run-0001",
            "attemptId": "attempt-0001",
            "projectId": "p",
            "taskId": "t",
            "executionRevisionId": "rev-0001",
            "priority": 0,
            "queuedAtMs": 5,
        },
        "executionRevision": {
            "id": "rev-0001",
            "taskId": "t",
            "revision": 1,
            "kind": "qinglong/command@v1",
            "executor": "remote_worker",
            "spec": {"argv": ["true"]},
            "contentDigest": DIGEST,
            "createdAtMs": 1,
        },
        "contentDigest": DIGEST,
        "placementScore": 0,
        "lease": lease,
    }
    return InboxEntry(offer, dict(lease, leaseToken=claim.lease_token), accepted_at_ms)


def claim_lifecycle() -> Script:
    """save intent → bump attempts → accept → clear; lease update; idle; move aside."""
    p1 = make_claim(OFFER_A, fixed_token(1), attempts=1)
    p2 = replace(p1, attempts=2, next_attempt_at_ms=p1.next_attempt_at_ms + 1000)
    e1 = make_entry(p2, lease_version=1)
    e2 = make_entry(p2, lease_version=2, accepted_at_ms=T0_MS + 50)
    e2_stored = InboxEntry(e2.offer, e2.lease, e1.accepted_at_ms)  # first admission kept
    pc = make_claim(OFFER_C, fixed_token(3), attempts=1)
    pb = make_claim(OFFER_B, fixed_token(2), attempts=1)
    return Script(
        "claim_lifecycle",
        (
            Action(
                "save_pending(A, new intent)",
                lambda j: j.save_pending(p1),
                (set_pending(p1),),
                intent=OFFER_A,
            ),
            Action(
                "save_pending(A, attempts=2)",
                lambda j: j.save_pending(p2),
                (set_pending(p2),),
                intent=OFFER_A,
            ),
            Action("accept(A v1)", lambda j: j.accept(e1), (put_inbox(e1),), accepts=(OFFER_A, 1)),
            Action("clear_pending(A)", lambda j: j.clear_pending(), (set_pending(None),)),
            Action(
                "accept(A v2)",
                lambda j: j.accept(e2),
                (put_inbox(e2_stored),),
                accepts=(OFFER_A, 2),
            ),
            Action(
                "save_pending(C)", lambda j: j.save_pending(pc), (set_pending(pc),), intent=OFFER_C
            ),
            Action(
                "clear_pending(C, idle)",
                lambda j: j.clear_pending(),
                (set_pending(None),),
                drops=OFFER_C,
            ),
            Action(
                "save_pending(B)", lambda j: j.save_pending(pb), (set_pending(pb),), intent=OFFER_B
            ),
            Action(
                "move_pending_aside(B, conflict)",
                lambda j: j.move_pending_aside("conflict"),
                (put_failed(pb, "conflict"), set_pending(None)),
            ),
        ),
    )


def batch_lifecycle() -> Script:
    """A batched pull (SPEC §18.2): one intent for three offers → accept_batch
    (three links, one inbox fsync) → clear; then a batch answered idle."""
    pa, pb, pc = (make_claim(o, fixed_token(n), attempts=1)
                  for n, o in ((1, OFFER_A), (2, OFFER_B), (3, OFFER_C)))  # fmt: skip
    batch = replace(pa, batch=((OFFER_B, pb.lease_token), (OFFER_C, pc.lease_token)))
    entries = [make_entry(p, lease_version=1) for p in (pa, pb, pc)]
    entries[1:] = [_other_run(e, n) for n, e in ((2, entries[1]), (3, entries[2]))]
    idle = make_claim(OFFER_D, fixed_token(4), attempts=1)
    idle = replace(idle, batch=((OFFER_E, fixed_token(5)),))
    return Script(
        "batch_lifecycle",
        (
            Action(
                "save_pending(A+B+C)",
                lambda j: j.save_pending(batch),
                (set_pending(batch),),
                intent=OFFER_A,
            ),
            Action(
                "accept_batch(A, B, C)",
                lambda j: j.accept_batch(entries),
                tuple(put_inbox(e) for e in entries),
                accepts=(OFFER_A, 1),
                accepts_more=((OFFER_B, 1), (OFFER_C, 1)),
                unordered=True,
            ),
            Action("clear_pending(A+B+C)", lambda j: j.clear_pending(), (set_pending(None),)),
            Action(
                "save_pending(D+E)",
                lambda j: j.save_pending(idle),
                (set_pending(idle),),
                intent=OFFER_D,
            ),
            Action(
                "clear_pending(D+E, idle)",
                lambda j: j.clear_pending(),
                (set_pending(None),),
                drops=OFFER_D,
            ),
        ),
    )


def _other_run(entry: InboxEntry, n: int) -> InboxEntry:
    """The same offer for its own run and attempt (one run per inbox entry)."""
    ids = {"runId": f"run-000{n}", "attemptId": f"attempt-000{n}"}
    offer = copy.deepcopy(entry.offer)
    offer["candidate"].update(ids)
    offer["lease"].update(ids)
    return InboxEntry(offer, dict(entry.lease, **ids), entry.accepted_at_ms)


def inbox_move_aside() -> Script:
    """Two offers admitted; both entries' leases die: each moves to aside/."""
    pa = make_claim(OFFER_A, fixed_token(1), attempts=1)
    pb = make_claim(OFFER_B, fixed_token(2), attempts=1)
    ea, eb = make_entry(pa, lease_version=1), make_entry(pb, lease_version=1)
    return Script(
        "inbox_move_aside",
        (
            Action("accept(A)", lambda j: j.accept(ea), (put_inbox(ea),), accepts=(OFFER_A, 1)),
            Action("accept(B)", lambda j: j.accept(eb), (put_inbox(eb),), accepts=(OFFER_B, 1)),
            Action("move_aside(A)", lambda j: j.move_aside(OFFER_A), (put_aside(OFFER_A),)),
            Action("move_aside(B)", lambda j: j.move_aside(OFFER_B), (put_aside(OFFER_B),)),
        ),
    )


# ---------------------------------------------------------------------------
# Recording a run, replaying its crashes, checking
# ---------------------------------------------------------------------------


@dataclass
class Recording:
    calls: list[Call]
    start: int  # index of the first script action this run executed
    action_done: list[int]  # len(calls) when each executed action returned

    def done_at(self, k: int) -> int:
        """Script actions returned once the first ``k`` calls completed."""
        return self.start + sum(1 for n in self.action_done if n <= k)


@dataclass(frozen=True)
class Violation:
    model: str
    where: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.model}] {self.where}: {self.kind}: {self.detail}"


@dataclass
class Report:
    calls_recorded: int = 0
    recovery_runs: int = 0
    recovery_calls: int = 0
    prefixes: Counter[str] = field(default_factory=Counter)
    views: Counter[str] = field(default_factory=Counter)  # states enumerated per model
    flavors: Counter[str] = field(default_factory=Counter)  # power states per label
    checked: Counter[str] = field(default_factory=Counter)  # distinct states reopened
    violations: list[Violation] = field(default_factory=list)

    def kinds(self, model_prefix: str = "") -> set[str]:
        return {v.kind for v in self.violations if v.model.startswith(model_prefix)}

    def summary(self) -> str:
        lines = [
            f"calls recorded: {self.calls_recorded} (+{self.recovery_calls} in "
            f"{self.recovery_runs} recovery runs)",
        ]
        for model in sorted(self.prefixes):
            lines.append(
                f"  {model:16} prefixes={self.prefixes[model]:5} states={self.views[model]:6} "
                f"distinct-checked={self.checked[model]:5}"
            )
        lines.append(
            "  power labels: " + ", ".join(f"{k}={v}" for k, v in sorted(self.flavors.items()))
        )
        lines.append(f"violations: {len(self.violations)}")
        lines.extend(f"  {v}" for v in self.violations[:10])
        return "\n".join(lines)


class CrashSim:
    def __init__(
        self,
        script: Script,
        scratch: str,
        *,
        fs_factory: FsFactory = RecordingFS,
        journal_cls: type[Journal] = Journal,
        restarts: bool = True,
        converge: bool = True,
        subset_limit: int = SUBSET_LIMIT,
    ) -> None:
        self.script = script
        self.scratch = scratch
        self.fs_factory = fs_factory
        self.journal_cls = journal_cls
        self.restarts = restarts
        self.converge = converge
        self.subset_limit = subset_limit
        self.report = Report()
        self._verdicts: dict[tuple[object, int], tuple[str, str] | None] = {}

    # -- recording ----------------------------------------------------------

    def _fresh_base(self) -> str:
        return tempfile.mkdtemp(prefix="crashsim-", dir=self.scratch)

    def record(self, base: str, start: int, clock_ms: int) -> Recording:
        fs = self.fs_factory(base)
        journal = self.journal_cls.open(
            os.path.join(base, ROOT_NAME), fs=fs, clock=lambda: clock_ms, refresher=False
        )
        try:
            fs.sync_lock()
            done: list[int] = []
            for action in self.script.actions[start:]:
                action.run(journal)
                fs.sync_lock()
                done.append(len(fs.calls))
        finally:
            journal.close()  # after the trace: the recorded process "dies" unreleased
        return Recording(fs.calls, start, done)

    # -- checking -----------------------------------------------------------

    def check(self, view: View, done: int, model: str, where: str) -> None:
        self.report.views[model] += 1
        key = (view.key(), done)
        if key not in self._verdicts:
            self.report.checked[model] += 1
            self._verdicts[key] = self._evaluate(view, done)
        verdict = self._verdicts[key]
        if verdict is not None:
            self.report.violations.append(Violation(model, where, *verdict))

    def _evaluate(self, view: View, done: int) -> tuple[str, str] | None:
        base = self._fresh_base()
        try:
            view.materialize(base)
            return self._reopen_and_judge(os.path.join(base, ROOT_NAME), done)
        finally:
            shutil.rmtree(base)

    def _reopen_and_judge(self, root: str, done: int) -> tuple[str, str] | None:
        try:
            journal = self.journal_cls.open(root, clock=lambda: CHECK_CLOCK_MS, refresher=False)
        except Exception as exc:
            return "open_failed", f"{type(exc).__name__}: {exc}"
        try:
            left = [
                f"{d}/{n}"
                for d in (".", INBOX_DIR, FAILED_DIR, ASIDE_DIR)
                for n in os.listdir(os.path.join(root, d))
                if n.startswith(fsio.TEMP_PREFIX)
            ]
            if left:
                return "temp_not_swept", ",".join(left)
            try:
                state = read_state(journal)
            except Exception as exc:
                return "corrupt", f"{type(exc).__name__}: {exc}"
            verdict = self.script.judge(state, done)
            if verdict is not None or not self.converge:
                return verdict
            try:
                for action in self.script.actions[done:]:
                    action.run(journal)
                final = read_state(journal)
            except Exception as exc:
                return "recovery_failed", f"{type(exc).__name__}: {exc} from {state.describe()}"
            if final != self.script.final():
                return "did_not_converge", f"{final.describe()} from {state.describe()}"
            return None
        finally:
            journal.close()

    def _check_prefix(self, model: DiskModel, done: int, prefix: str, where: str) -> None:
        self.report.prefixes[f"{prefix}process"] += 1
        self.check(model.volatile_view(), done, f"{prefix}process", where)
        self.report.prefixes[f"{prefix}power"] += 1
        for view, flavor in model.power_views(self.subset_limit):
            self.report.flavors[flavor] += 1
            self.check(view, done, f"{prefix}power", f"{where} [{flavor}]")

    # -- driver -------------------------------------------------------------

    def run(self) -> Report:
        first = self.record(self._fresh_base(), 0, T0_MS)
        self.report.calls_recorded = len(first.calls)
        model = DiskModel()
        for k in range(len(first.calls) + 1):
            if k:
                model.apply(first.calls[k - 1])
            done = first.done_at(k)
            where = self._where(first, k, done)
            self._check_prefix(model, done, "", where)
            if self.restarts:
                self._restart_after(model, done, where)
        return self.report

    def _restart_after(self, model: DiskModel, done: int, where: str) -> None:
        after = model.copy()
        after.crash_process()
        base = self._fresh_base()
        try:
            after.volatile_view().materialize(base)
            try:
                rec = self.record(base, done, RESTART_CLOCK_MS)
            except Exception as exc:
                self.report.violations.append(
                    Violation("restart", where, "recovery_failed", f"{type(exc).__name__}: {exc}")
                )
                return
        finally:
            shutil.rmtree(base)
        self.report.recovery_runs += 1
        self.report.recovery_calls += len(rec.calls)
        for m in range(len(rec.calls) + 1):
            if m:
                after.apply(rec.calls[m - 1])
            sub = f"{where}; restart {self._where(rec, m, rec.done_at(m))}"
            self._check_prefix(after, rec.done_at(m), "restart+", sub)

    def _where(self, rec: Recording, k: int, done: int) -> str:
        last = str(rec.calls[k - 1]) if k else "(nothing)"
        if done < len(self.script.actions):
            return f"after call {k} '{last}' during {self.script.actions[done].label}"
        return f"after call {k} '{last}' (script complete)"


def scratch_dir(fallback: str) -> str:
    """Prefer tmpfs: durability is simulated, a real fsync would only cost time."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return tempfile.mkdtemp(prefix="ql-crashsim-", dir=shm)
    return tempfile.mkdtemp(prefix="ql-crashsim-", dir=fallback)


def dump_trace(calls: Sequence[Call]) -> str:
    return "\n".join(f"{i + 1:3} {c}" for i, c in enumerate(calls))


__all__ = [
    "Action",
    "Call",
    "CrashSim",
    "DiskModel",
    "JournalState",
    "Kind",
    "RecordingFS",
    "Report",
    "Script",
    "View",
    "Violation",
    "claim_lifecycle",
    "dump_trace",
    "inbox_move_aside",
    "scratch_dir",
]
