"""Inbox journal (SPEC §6.4): real files, real fsync, fault injection at every step."""

from __future__ import annotations

import base64
import json
import os
import secrets
import stat
import uuid
from collections.abc import Callable

import pytest

from qinglong.worker import fsio
from qinglong.worker.fsio import FileSystem, Step
from qinglong.worker.journal import (
    ENTRY_LIMIT,
    FAILED_KEEP,
    HARD_CAPACITY,
    AcceptOutcome,
    EntryTooLarge,
    InboxEntry,
    Journal,
    JournalCorrupt,
    JournalFull,
    LeaseVersionRegression,
    OfferConflict,
    PendingClaim,
    UnsafePermissions,
)
from qinglong.worker.owner_lock import LockCompromised, LockHeld

WORKER = "11111111-1111-4111-8111-111111111111"
SESSION = "22222222-2222-4222-8222-222222222222"
DIGEST = "sha256:" + "ab" * 32


def new_id() -> str:
    return str(uuid.uuid4())


def new_token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def make_offer(offer_id: str, *, lease_version: int = 1, **over: object) -> dict:
    run, attempt, rev = over.get("run", "r" * 8), "a" * 8, over.get("rev", "v" * 8)
    lease = {
        "runId": run,
        "attemptId": attempt,
        "workerId": WORKER,
        "sessionId": over.get("session", SESSION),
        "sessionGeneration": over.get("generation", 1),
        "leaseGeneration": over.get("lease_generation", 1),
        "leaseVersion": lease_version,
        "offerId": offer_id,
        "claimedAtMs": 1000,
        "expiresAtMs": 61_000 + lease_version,
        "updatedAtMs": 1000 + lease_version,
    }
    return {
        "schema": "qinglong/remote-execution-offer@v1",
        "status": "offered",
        "offerId": offer_id,
        "target": {"workerId": WORKER, "sessionId": lease["sessionId"], "generation": 1},
        "candidate": {
            "runId": run,
            "attemptId": attempt,
            "projectId": "p",
            "taskId": "t",
            "executionRevisionId": rev,
            "priority": 0,
            "queuedAtMs": 5,
        },
        "executionRevision": {
            "id": rev,
            "taskId": "t",
            "revision": 1,
            "kind": "qinglong/command@v1",
            "executor": "remote_worker",
            "spec": over.get("spec", {"argv": ["true"]}),
            "contentDigest": over.get("digest", DIGEST),
            "createdAtMs": 1,
        },
        "contentDigest": over.get("digest", DIGEST),
        "placementScore": over.get("score", 0),
        "lease": lease,
    }


def make_entry(offer: dict, token: str, at: int = 7) -> InboxEntry:
    return InboxEntry(offer, dict(offer["lease"], leaseToken=token), accepted_at_ms=at)


def make_pending(offer_id: str | None = None, attempts: int = 0) -> PendingClaim:
    return PendingClaim(
        offer_id=offer_id or new_id(),
        lease_token=new_token(),
        worker_id=WORKER,
        session_id=SESSION,
        generation=1,
        capabilities_digest=DIGEST,
        attempts=attempts,
        next_attempt_at_ms=0,
        created_at_ms=1,
    )


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "journal")


@pytest.fixture
def journal(root):
    j = Journal.open(root, refresher=False)
    yield j
    j.close()


# -- layout and permissions -------------------------------------------------


def test_layout_and_modes(journal, root):
    offer_id = new_id()
    journal.accept(make_entry(make_offer(offer_id), new_token()))
    journal.save_pending(make_pending())
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(root, "inbox")).st_mode) == 0o700
    for path in (
        os.path.join(root, "inbox", f"{offer_id}.json"),
        os.path.join(root, "pending-claim.json"),
        os.path.join(root, "owner.lock"),
    ):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    raw = open(os.path.join(root, "inbox", f"{offer_id}.json"), "rb").read()
    assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777])
def test_unsafe_root_refused(root, mode):
    os.mkdir(root, 0o700)
    os.chmod(root, mode)
    with pytest.raises(UnsafePermissions):
        Journal.open(root, refresher=False)


def test_symlinked_root_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafePermissions):
        Journal.open(str(link), refresher=False)


def test_unsafe_entry_file_refused(root):
    offer_id = new_id()
    with Journal.open(root, refresher=False) as j:
        j.accept(make_entry(make_offer(offer_id), new_token()))
    os.chmod(os.path.join(root, "inbox", f"{offer_id}.json"), 0o644)
    with pytest.raises(UnsafePermissions):
        Journal.open(root, refresher=False)


def test_temp_files_swept_on_open(root):
    Journal.open(root, refresher=False).close()
    for d in (root, os.path.join(root, "inbox")):
        fd = os.open(os.path.join(d, ".tmp-leftover"), os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, b"{partial")
        os.close(fd)
    with Journal.open(root, refresher=False) as j:
        assert j.count() == 0
    for d in (root, os.path.join(root, "inbox")):
        assert not [n for n in os.listdir(d) if n.startswith(".tmp-")]


def test_capacity_bounds():
    with pytest.raises(ValueError):
        Journal.open("/nonexistent", capacity=HARD_CAPACITY + 1)
    with pytest.raises(ValueError):
        Journal.open("/nonexistent", capacity=0)


# -- accept semantics -------------------------------------------------------


def test_accept_replay_update_and_regression(journal):
    offer_id, token = new_id(), new_token()
    v1 = make_entry(make_offer(offer_id), token)
    assert journal.accept(v1) is AcceptOutcome.PUBLISHED
    assert journal.accept(make_entry(make_offer(offer_id), token, at=99)) is AcceptOutcome.UNCHANGED
    v3 = make_entry(make_offer(offer_id, lease_version=3), token, at=50)
    assert journal.accept(v3) is AcceptOutcome.UPDATED
    stored = journal.get(offer_id)
    assert stored.lease_version == 3 and stored.accepted_at_ms == 7  # first admission kept
    with pytest.raises(LeaseVersionRegression):
        journal.accept(make_entry(make_offer(offer_id, lease_version=2), token))
    assert journal.get(offer_id).lease_version == 3


@pytest.mark.parametrize(
    "change",
    [
        {"token": True},
        {"run": "other-run"},
        {"rev": "other-rev"},
        {"digest": "sha256:" + "cd" * 32},
        {"session": "33333333-3333-4333-8333-333333333333"},
        {"generation": 2},
        {"lease_generation": 2},
        {"spec": {"argv": ["rm", "-rf", "/"]}},
        {"score": 5},  # same lease version, different payload
    ],
)
def test_conflicting_replay_never_overwrites(journal, root, change):
    offer_id, token = new_id(), new_token()
    journal.accept(make_entry(make_offer(offer_id), token))
    path = os.path.join(root, "inbox", f"{offer_id}.json")
    before = open(path, "rb").read()
    over = {k: v for k, v in change.items() if k != "token"}
    other_token = new_token() if change.get("token") else token
    with pytest.raises(OfferConflict):
        journal.accept(make_entry(make_offer(offer_id, **over), other_token))
    # Identity drift is refused for a newer lease version too.
    if "score" not in change:
        with pytest.raises(OfferConflict):
            journal.accept(make_entry(make_offer(offer_id, lease_version=2, **over), other_token))
    assert open(path, "rb").read() == before


def test_journal_full_and_updates_still_allowed(root):
    with Journal.open(root, capacity=3, refresher=False) as j:
        tokens = {new_id(): new_token() for _ in range(3)}
        for oid, tok in tokens.items():
            j.accept(make_entry(make_offer(oid), tok))
        with pytest.raises(JournalFull):
            j.accept(make_entry(make_offer(new_id()), new_token()))
        oid, tok = next(iter(tokens.items()))
        assert j.accept(make_entry(make_offer(oid, lease_version=2), tok)) is AcceptOutcome.UPDATED
        assert j.count() == 3


def test_entry_too_large(journal, root):
    big = {"argv": ["x" * (ENTRY_LIMIT + 1)]}
    with pytest.raises(EntryTooLarge):
        journal.accept(make_entry(make_offer(new_id(), spec=big), new_token()))
    assert os.listdir(os.path.join(root, "inbox")) == []


def test_corrupt_entry_fails_closed(journal, root):
    offer_id = new_id()
    path = os.path.join(root, "inbox", f"{offer_id}.json")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b'{"a":1,"a":2}')
    os.close(fd)
    with pytest.raises(JournalCorrupt):
        journal.get(offer_id)
    with pytest.raises(JournalCorrupt):
        journal.accept(make_entry(make_offer(offer_id), new_token()))


def test_entry_survives_reopen(root):
    offer_id, token = new_id(), new_token()
    entry = make_entry(make_offer(offer_id), token)
    with Journal.open(root, refresher=False) as j:
        j.accept(entry)
    with Journal.open(root, refresher=False) as j:
        assert j.get(offer_id) == entry
        assert j.offer_ids() == [offer_id]
        assert j.remove(offer_id) and j.get(offer_id) is None


# -- pending claim ----------------------------------------------------------


def test_pending_roundtrip_across_reopen(root):
    claim = make_pending(attempts=3)
    with Journal.open(root, refresher=False) as j:
        assert j.load_pending() is None
        j.save_pending(claim)
    with Journal.open(root, refresher=False) as j:
        assert j.load_pending() == claim
        assert j.clear_pending()
        assert j.load_pending() is None
        assert not j.clear_pending()


def test_pending_repr_hides_token():
    claim = make_pending()
    assert claim.lease_token not in repr(claim)


def test_move_pending_aside_is_bounded_and_drops_token(journal, root):
    first = make_pending()
    journal.save_pending(first)
    assert journal.move_pending_aside("attempts_exhausted") == first
    assert journal.load_pending() is None
    raw = open(os.path.join(root, "failed-claims", f"{first.offer_id}.json"), "rb").read()
    assert first.lease_token.encode() not in raw
    assert json.loads(raw)["reason"] == "attempts_exhausted"
    for _ in range(FAILED_KEEP + 5):
        journal.save_pending(make_pending())
        journal.move_pending_aside("conflict")
    assert len(journal.failed_claim_ids()) == FAILED_KEEP
    assert journal.move_pending_aside("conflict") is None
    with pytest.raises(ValueError):
        journal.move_pending_aside("Not A Category!")


def test_pending_invalid_values_refused():
    with pytest.raises(ValueError):
        make_pending(offer_id="NOT-A-UUID")
    with pytest.raises(ValueError):
        PendingClaim(new_id(), "short", WORKER, SESSION, 1, DIGEST, 0, 0, 0)


# -- owner lock integration -------------------------------------------------


def test_second_open_refused(journal, root):
    with pytest.raises(LockHeld):
        Journal.open(root, refresher=False)


def test_compromised_lock_fails_every_operation(journal, root):
    lock = os.path.join(root, "owner.lock")
    os.unlink(lock)
    fd = os.open(lock, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)
    with pytest.raises(LockCompromised):
        journal.accept(make_entry(make_offer(new_id()), new_token()))
    with pytest.raises(LockCompromised):
        journal.load_pending()
    assert os.listdir(os.path.join(root, "inbox")) == []


# -- fault injection --------------------------------------------------------


class Crash(BaseException):
    """The process 'dies' at this step: no cleanup code runs."""


class FaultHook:
    def __init__(self, fail_at: int | None = None, crash: bool = False) -> None:
        self.fail_at = fail_at
        self.crash = crash
        self.steps: list[Step] = []
        self.armed = False

    def __call__(self, step: Step, path: str) -> None:
        if not self.armed:
            return
        self.steps.append(step)
        if len(self.steps) - 1 == self.fail_at:
            self.armed = False  # fail once; cleanup calls run for real
            if self.crash:
                raise Crash(step)
            raise OSError(5, f"injected failure at {step}")


def run_with_fault(root: str, hook: FaultHook, action: Callable[[Journal], object]) -> None:
    j = Journal.open(root, fs=FileSystem(hook), refresher=False)
    hook.armed = True
    try:
        action(j)
    except (OSError, Crash):
        pass
    finally:
        j.close()


PUBLISH_STEPS = [
    Step.CREATE_TEMP, Step.WRITE_TEMP, Step.FSYNC_TEMP, Step.CLOSE_TEMP,
    Step.LINK_FINAL, Step.UNLINK_TEMP, Step.FSYNC_DIR,
]  # fmt: skip
UPDATE_STEPS = [
    Step.CREATE_TEMP, Step.WRITE_TEMP, Step.FSYNC_TEMP, Step.CLOSE_TEMP,
    Step.REPLACE_FINAL, Step.FSYNC_DIR,
]  # fmt: skip


def no_temp_files(root: str) -> bool:
    return not any(
        n.startswith(fsio.TEMP_PREFIX)
        for d in (root, os.path.join(root, "inbox"), os.path.join(root, "failed-claims"))
        for n in os.listdir(d)
    )


def test_step_sequences(root):
    hook = FaultHook()
    offer_id, token = new_id(), new_token()
    run_with_fault(root, hook, lambda j: j.accept(make_entry(make_offer(offer_id), token)))
    assert hook.steps == PUBLISH_STEPS
    hook = FaultHook()
    entry = make_entry(make_offer(offer_id, lease_version=2), token)
    run_with_fault(root, hook, lambda j: j.accept(entry))
    assert hook.steps == UPDATE_STEPS
    hook = FaultHook()
    run_with_fault(root, hook, lambda j: j.save_pending(make_pending()))
    assert hook.steps == UPDATE_STEPS


@pytest.mark.parametrize("crash", [False, True], ids=["error", "crash"])
@pytest.mark.parametrize("fail_at", range(len(PUBLISH_STEPS)))
def test_publish_fault_at_every_step(tmp_path, fail_at, crash):
    root = str(tmp_path / "j")
    offer_id, token = new_id(), new_token()
    entry = make_entry(make_offer(offer_id), token)
    hook = FaultHook(fail_at, crash)
    run_with_fault(root, hook, lambda j: j.accept(entry))
    assert hook.steps[-1] == PUBLISH_STEPS[fail_at]
    with Journal.open(root, refresher=False) as j:
        assert no_temp_files(root)
        stored = j.get(offer_id)
        # The hook fires before the syscall: until the link has run, nothing is visible.
        assert stored == (entry if fail_at > PUBLISH_STEPS.index(Step.LINK_FINAL) else None)
        # A retry of the same delivery converges; a conflicting one never lands.
        expected = AcceptOutcome.PUBLISHED if stored is None else AcceptOutcome.UNCHANGED
        assert j.accept(entry) is expected
        with pytest.raises(OfferConflict):
            j.accept(make_entry(make_offer(offer_id), new_token()))
        assert j.get(offer_id) == entry


@pytest.mark.parametrize("crash", [False, True], ids=["error", "crash"])
@pytest.mark.parametrize("fail_at", range(len(UPDATE_STEPS)))
def test_update_fault_at_every_step(tmp_path, fail_at, crash):
    root = str(tmp_path / "j")
    offer_id, token = new_id(), new_token()
    v1 = make_entry(make_offer(offer_id), token)
    v2 = make_entry(make_offer(offer_id, lease_version=2), token)
    with Journal.open(root, refresher=False) as j:
        j.accept(v1)
    hook = FaultHook(fail_at, crash)
    run_with_fault(root, hook, lambda j: j.accept(v2))
    with Journal.open(root, refresher=False) as j:
        assert no_temp_files(root)
        stored = j.get(offer_id)
        replaced = fail_at > UPDATE_STEPS.index(Step.REPLACE_FINAL)
        assert stored == (v2 if replaced else v1)  # old or new, never partial or lost
        assert j.accept(v2) in (AcceptOutcome.UPDATED, AcceptOutcome.UNCHANGED)
        assert j.get(offer_id) == v2


@pytest.mark.parametrize("crash", [False, True], ids=["error", "crash"])
@pytest.mark.parametrize("fail_at", range(len(UPDATE_STEPS)))
def test_pending_save_fault_at_every_step(tmp_path, fail_at, crash):
    root = str(tmp_path / "j")
    old, new = make_pending(), make_pending(attempts=1)
    with Journal.open(root, refresher=False) as j:
        j.save_pending(old)
    run_with_fault(root, FaultHook(fail_at, crash), lambda j: j.save_pending(new))
    with Journal.open(root, refresher=False) as j:
        assert no_temp_files(root)
        replaced = fail_at > UPDATE_STEPS.index(Step.REPLACE_FINAL)
        assert j.load_pending() == (new if replaced else old)


# -- entries moved aside (SPEC §6.4) -------------------------------------------

ASIDE_STEPS = [Step.LINK_FINAL, Step.FSYNC_DIR, Step.UNLINK_FINAL, Step.FSYNC_DIR]


def test_move_aside_frees_capacity_and_keeps_the_entry_private(root):
    with Journal.open(root, capacity=2, refresher=False) as j:
        entries = [make_entry(make_offer(new_id()), new_token()) for _ in range(3)]
        j.accept(entries[0])
        j.accept(entries[1])
        with pytest.raises(JournalFull):
            j.accept(entries[2])
        assert j.move_aside(entries[0].offer_id) is True
        assert j.accept(entries[2]) is AcceptOutcome.PUBLISHED  # aside/ is not counted
        assert j.count() == 2 and j.get(entries[0].offer_id) is None
        assert j.offer_ids() == sorted(e.offer_id for e in entries[1:])
        assert j.aside_ids() == [entries[0].offer_id]
        assert j.move_aside(entries[0].offer_id) is False  # no longer in the inbox
        assert j.move_aside(new_id()) is False
        with pytest.raises(ValueError):
            j.move_aside("../inbox/x")
    aside_dir = os.path.join(root, "aside")
    assert stat.S_IMODE(os.stat(aside_dir).st_mode) == 0o700
    moved = os.path.join(aside_dir, f"{entries[0].offer_id}.json")
    assert stat.S_IMODE(os.stat(moved).st_mode) == 0o600
    with open(moved, "rb") as handle:  # the bytes as admitted
        assert InboxEntry.from_doc(json.loads(handle.read())) == entries[0]
    with Journal.open(root, capacity=2, refresher=False) as j:  # reopens as it was
        assert j.count() == 2 and j.aside_ids() == [entries[0].offer_id]


def test_unsafe_aside_entry_refused(root):
    with Journal.open(root, refresher=False) as j:
        offer_id = new_id()
        j.accept(make_entry(make_offer(offer_id), new_token()))
        j.move_aside(offer_id)
    os.chmod(os.path.join(root, "aside", f"{offer_id}.json"), 0o644)
    with pytest.raises(UnsafePermissions):
        Journal.open(root, refresher=False)


def test_open_finishes_a_half_done_move(root):
    offer_id = new_id()
    entry = make_entry(make_offer(offer_id), new_token())
    with Journal.open(root, refresher=False) as j:
        j.accept(entry)
    name = f"{offer_id}.json"
    os.link(os.path.join(root, "inbox", name), os.path.join(root, "aside", name))
    with Journal.open(root, refresher=False) as j:
        assert j.offer_ids() == [] and j.count() == 0 and j.aside_ids() == [offer_id]
    # Different bytes under both names is not a half-done move: fail closed.
    other = new_id()
    with Journal.open(root, refresher=False) as j:
        j.accept(make_entry(make_offer(other), new_token()))
    with open(os.path.join(root, "aside", f"{other}.json"), "wb") as handle:
        handle.write(b"{}")
    os.chmod(os.path.join(root, "aside", f"{other}.json"), 0o600)
    with pytest.raises(JournalCorrupt):
        Journal.open(root, refresher=False)


def test_move_aside_step_sequence(root):
    offer_id = new_id()
    with Journal.open(root, refresher=False) as j:
        j.accept(make_entry(make_offer(offer_id), new_token()))
    hook = FaultHook()
    run_with_fault(root, hook, lambda j: j.move_aside(offer_id))
    assert hook.steps == ASIDE_STEPS


@pytest.mark.parametrize("crash", [False, True], ids=["error", "crash"])
@pytest.mark.parametrize("fail_at", range(len(ASIDE_STEPS)))
def test_move_aside_fault_at_every_step(tmp_path, fail_at, crash):
    """A failure or a crash at any step: after reopening, the entry is in exactly
    one place (inbox or aside), intact, and counted once at most; a retry converges."""
    root = str(tmp_path / "j")
    entry = make_entry(make_offer(new_id()), new_token())
    with Journal.open(root, refresher=False) as j:
        j.accept(entry)
    run_with_fault(root, FaultHook(fail_at, crash), lambda j: j.move_aside(entry.offer_id))
    with Journal.open(root, refresher=False) as j:
        inbox, aside = j.offer_ids(), j.aside_ids()
        linked = fail_at > ASIDE_STEPS.index(Step.LINK_FINAL)
        assert (inbox, aside) == (([], [entry.offer_id]) if linked else ([entry.offer_id], []))
        assert j.count() == len(inbox)
        if inbox:
            assert j.get(entry.offer_id) == entry
            assert j.move_aside(entry.offer_id) is True
        assert (j.offer_ids(), j.aside_ids()) == ([], [entry.offer_id])
