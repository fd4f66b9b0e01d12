"""The idle view's credential and session cache (service/idle_fact_cache.py),
without PostgreSQL: fills come only from database answers and are vetoed by a
notification about their credential or worker that arrived while the call ran;
notifications, the trust period and a lost listener only ever drop entries;
what the cache holds is bounded whatever arrives."""

from __future__ import annotations

import uuid

from qinglong.service.credentials import PresentedCredential
from qinglong.service.idle_fact_cache import (
    CHANGE_MARKS_PRUNE_AT,
    CONFIRM_BATCH,
    FILL_HORIZON_S,
    MAX_CACHED,
    MAX_CHANGE_MARKS,
    CacheToken,
    FactCache,
    Fill,
)

MAX_AGE_S = 5.0
MARGIN_MS = 5000
T0 = 1000.0
INC = 1  # the listener incarnation
WORKER = str(uuid.UUID(int=1))
OTHER_WORKER = str(uuid.UUID(int=2))
CRED = PresentedCredential("a" * 16, b"\x01" * 32)
CRED_2 = PresentedCredential("b" * 16, b"\x02" * 32)  # a second credential of WORKER
OTHER_CRED = PresentedCredential("c" * 16, b"\x03" * 32)  # OTHER_WORKER's


def _session(
    worker_id: str = WORKER,
    session_id: str = "s-1",
    generation: int = 1,
    expires_at_ms: int = 10_000_000,
) -> dict[str, object]:
    return {
        "workerId": worker_id,
        "sessionId": session_id,
        "generation": generation,
        "expiresAtMs": expires_at_ms,
    }


def _filled() -> FactCache:
    """WORKER with CRED, CRED_2 and a session; OTHER_WORKER with OTHER_CRED and one."""
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for credential, worker_id in ((CRED, WORKER), (CRED_2, WORKER), (OTHER_CRED, OTHER_WORKER)):
        assert (
            cache.remember_credential(token, credential, worker_id, incarnation=INC, now=T0)
            is Fill.KEPT
        )
    for worker_id in (WORKER, OTHER_WORKER):
        assert (
            cache.remember_session(token, _session(worker_id), incarnation=INC, now=T0) is Fill.KEPT
        )
    return cache


def _trusted(
    cache: FactCache,
    credential: PresentedCredential = CRED,
    worker_id: str = WORKER,
    now: float = T0 + 1,
    incarnation: int = INC,
) -> bool:
    return cache.credential_trusted(credential, worker_id, incarnation=incarnation, now=now)


# ------------------------------------------------------------ answers


def test_a_cached_credential_answers_only_for_its_worker_secret_and_incarnation():
    cache = _filled()
    assert _trusted(cache)
    assert not _trusted(cache, PresentedCredential(CRED.credential_id, b"\x09" * 32))
    assert not _trusted(cache, worker_id=OTHER_WORKER)
    assert not _trusted(cache, incarnation=INC + 1)
    assert not _trusted(cache, PresentedCredential("z" * 16, CRED.secret_digest))


def test_a_credential_is_trusted_for_less_than_its_period_then_dropped_for_good():
    cache = _filled()  # confirmed by a call sent at T0
    assert _trusted(cache, now=T0 + MAX_AGE_S - 0.001)
    assert not _trusted(cache, now=T0 + MAX_AGE_S)
    assert not _trusted(cache, now=T0 + 1)  # gone, not merely skipped
    assert CRED.credential_id not in cache.auth and _trusted(cache, CRED_2, now=T0 + 1)


def test_a_session_answers_for_its_fence_while_live_on_the_database_clock():
    cache = _filled()  # expires at 10,000,000 ms database time

    def ok(
        session_id: str = "s-1",
        generation: int = 1,
        db_now_ms: float | None = 1.0,
        incarnation: int = INC,
    ) -> bool:
        return cache.session_ok(
            WORKER, session_id, generation, incarnation=incarnation, db_now_ms=db_now_ms
        )

    assert ok()
    assert not ok(db_now_ms=None)  # no probe has read the database's clock yet
    assert not ok(session_id="s-2") and not ok(generation=2) and not ok(incarnation=INC + 1)
    assert ok(db_now_ms=10_000_000 - MARGIN_MS - 0.5)
    assert not ok(db_now_ms=10_000_000 - MARGIN_MS)


def test_a_malformed_session_projection_fills_nothing():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for bad in ({}, {**_session(), "generation": "x"}, {**_session(), "expiresAtMs": None}):
        assert cache.remember_session(token, bad, incarnation=INC, now=T0) is Fill.REFUSED
    assert cache.sessions == {}


# ------------------------------------------------------------ notifications drop


def test_a_credential_notification_drops_that_credential_only():
    cache = _filled()
    assert cache.credential_changed(CRED.credential_id, T0) is False
    assert not _trusted(cache)
    assert _trusted(cache, CRED_2) and _trusted(cache, OTHER_CRED, OTHER_WORKER)
    assert cache.worker_credentials[WORKER] == {CRED_2.credential_id}
    assert set(cache.sessions) == {WORKER, OTHER_WORKER}


def test_a_session_notification_drops_the_workers_session_and_every_credential_of_it():
    cache = _filled()
    assert cache.worker_changed(WORKER, T0) is False
    assert not _trusted(cache) and not _trusted(cache, CRED_2)
    assert WORKER not in cache.sessions and WORKER not in cache.worker_credentials
    assert _trusted(cache, OTHER_CRED, OTHER_WORKER) and OTHER_WORKER in cache.sessions


def test_clear_forgets_every_entry_and_mark_and_keeps_counting():
    cache = _filled()
    cache.worker_changed(OTHER_WORKER, T0)
    seq = cache.seq
    cache.clear()
    assert (cache.auth, cache.worker_credentials, cache.sessions) == ({}, {}, {})
    assert (cache.credential_marks, cache.worker_marks) == ({}, {})
    assert cache.seq == seq  # a token taken before still compares


# ------------------------------------------------------------ fills vetoed


def _fill_after(notify: list[tuple[str, str]]) -> tuple[Fill, Fill]:
    """A call's token, notifications while it runs, then its answer's fills."""
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for kind, ident in notify:
        (cache.credential_changed if kind == "c" else cache.worker_changed)(ident, T0 + 0.1)
    return (
        cache.remember_credential(token, CRED, WORKER, incarnation=INC, now=T0 + 0.2),
        cache.remember_session(token, _session(), incarnation=INC, now=T0 + 0.2),
    )


def test_a_notification_vetoes_only_the_fills_it_is_about():
    kept, refused = Fill.KEPT, Fill.REFUSED
    assert _fill_after([("s", OTHER_WORKER), ("c", OTHER_CRED.credential_id)]) == (kept, kept)
    assert _fill_after([("c", CRED.credential_id)]) == (refused, kept)
    assert _fill_after([("s", WORKER)]) == (refused, refused)
    assert _fill_after([]) == (kept, kept)


def test_a_call_that_started_after_the_notification_fills():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    cache.worker_changed(WORKER, T0)
    token = cache.token(INC, T0 + 0.1)
    assert (
        cache.remember_credential(token, CRED, WORKER, incarnation=INC, now=T0 + 0.2) is Fill.KEPT
    )


def test_a_fill_from_another_incarnation_or_past_the_horizon_is_refused():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    assert not cache.fill_allowed(token, INC + 1, T0, None, WORKER)
    assert cache.remember_session(token, _session(), incarnation=INC + 1, now=T0) is Fill.REFUSED
    assert cache.fill_allowed(token, INC, T0 + FILL_HORIZON_S - 0.001, None, WORKER)
    assert (
        cache.remember_credential(token, CRED, WORKER, incarnation=INC, now=T0 + FILL_HORIZON_S)
        is Fill.REFUSED
    )
    assert cache.auth == {} and cache.sessions == {}


def test_a_credential_entry_starts_its_period_when_the_call_was_sent():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    cache.remember_credential(token, CRED, WORKER, incarnation=INC, now=T0 + 2)
    assert cache.auth[CRED.credential_id].confirmed_at == T0
    assert not _trusted(cache, now=T0 + MAX_AGE_S)


def test_a_new_answer_for_a_credential_replaces_its_entry_and_worker():
    cache = _filled()
    token = cache.token(INC, T0 + 1)
    cache.remember_credential(token, CRED, OTHER_WORKER, incarnation=INC, now=T0 + 1)
    assert _trusted(cache, worker_id=OTHER_WORKER) and not _trusted(cache)
    assert cache.worker_credentials[WORKER] == {CRED_2.credential_id}
    assert cache.worker_credentials[OTHER_WORKER] == {CRED.credential_id, OTHER_CRED.credential_id}


# ------------------------------------------------------------ bounds


def test_old_marks_are_pruned_while_a_recent_one_still_vetoes():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    workers = [str(uuid.UUID(int=n + 10)) for n in range(CHANGE_MARKS_PRUNE_AT)]
    old_token = cache.token(INC, T0)
    for worker_id in workers:
        cache.worker_changed(worker_id, T0)
    recent = str(uuid.uuid4())
    cache.worker_changed(recent, T0 + FILL_HORIZON_S)  # prunes the marks past the horizon
    assert set(cache.worker_marks) == {recent}
    now = T0 + FILL_HORIZON_S
    assert not cache.fill_allowed(old_token, INC, now, None, workers[0])  # refused by age
    fresh = CacheToken(INC, cache.seq - 1, now)  # taken just before `recent`'s mark
    assert not cache.fill_allowed(fresh, INC, now, None, recent)
    assert cache.fill_allowed(fresh, INC, now, None, workers[0])


def test_a_flood_of_recent_marks_is_capped_and_refuses_every_fill_in_flight():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    in_flight = cache.token(INC, T0)
    cache.worker_changed(WORKER, T0)  # a real change while the call runs
    overflows, now = 0, T0
    for n in range(3 * MAX_CHANGE_MARKS):
        overflows += cache.worker_changed(str(uuid.UUID(int=n + 10)), now)
        overflows += cache.credential_changed(f"{n:016x}", now)
        now += 0.0001  # all within the horizon
    assert len(cache.worker_marks) <= MAX_CHANGE_MARKS
    assert len(cache.credential_marks) <= MAX_CHANGE_MARKS
    assert overflows >= 4 and WORKER not in cache.worker_marks
    assert not cache.fill_allowed(in_flight, INC, now, None, WORKER)  # its veto stands
    after = cache.token(INC, now)
    assert cache.fill_allowed(after, INC, now, None, WORKER)


def test_the_credential_cache_is_capped():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for n in range(MAX_CACHED):
        cache.remember_credential(
            token, PresentedCredential(f"{n:016x}", b"x"), WORKER, incarnation=INC, now=T0
        )
    assert cache.remember_credential(token, CRED, WORKER, incarnation=INC, now=T0) is Fill.OVERFLOW
    assert CRED.credential_id not in cache.auth and len(cache.auth) == MAX_CACHED
    # A credential already cached is still refreshed.
    again = PresentedCredential(f"{0:016x}", b"x")
    assert cache.remember_credential(token, again, WORKER, incarnation=INC, now=T0) is Fill.KEPT


def test_the_session_cache_is_capped():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for n in range(MAX_CACHED):
        cache.remember_session(token, _session(str(uuid.UUID(int=n + 10))), incarnation=INC, now=T0)
    assert cache.remember_session(token, _session(), incarnation=INC, now=T0) is Fill.OVERFLOW
    assert WORKER not in cache.sessions and len(cache.sessions) == MAX_CACHED
    known = str(uuid.UUID(int=10))
    assert (
        cache.remember_session(token, _session(known, "s-2"), incarnation=INC, now=T0) is Fill.KEPT
    )
    assert cache.sessions[known].session_id == "s-2"


# ------------------------------------------------------------ re-confirmation


def test_only_entries_past_half_their_period_age():
    cache = _filled()  # confirmed at T0
    half = MAX_AGE_S / 2
    assert not cache.has_aging(T0 + half - 0.001) and cache.aging(T0 + half - 0.001) == []
    assert cache.has_aging(T0 + half)
    assert {cid for cid, _ in cache.aging(T0 + half)} == set(cache.auth)


def test_a_reconfirmation_restarts_allowed_entries_and_drops_the_others():
    cache = _filled()
    sent = T0 + 3
    aging, seq = cache.aging(sent), cache.seq
    cache.confirmed(aging, {CRED.credential_id, OTHER_CRED.credential_id}, seq, sent)
    assert _trusted(cache, now=sent + MAX_AGE_S - 0.001)  # its period restarted at `sent`
    assert CRED_2.credential_id not in cache.auth  # no longer allowed
    assert cache.worker_credentials[WORKER] == {CRED.credential_id}


def test_a_reconfirmation_leaves_entries_notified_or_replaced_meanwhile_alone():
    cache = _filled()
    sent = T0 + 3
    aging, seq = cache.aging(sent), cache.seq
    cache.credential_changed(CRED_2.credential_id, sent)  # dropped while the query ran
    cache.remember_credential(
        cache.token(INC, sent), CRED_2, WORKER, incarnation=INC, now=sent
    )  # and answered again
    cache.worker_changed(OTHER_WORKER, sent)  # dropped, not re-added
    token = cache.token(INC, sent)
    cache.remember_credential(token, OTHER_CRED, OTHER_WORKER, incarnation=INC, now=sent)
    cache.confirmed(aging, set(), seq, sent + 0.1)  # "none allowed": a stale answer
    # CRED was not notified: dropped. The others are the newer answers, untouched.
    assert CRED.credential_id not in cache.auth
    assert cache.auth[CRED_2.credential_id].confirmed_at == sent
    assert cache.auth[OTHER_CRED.credential_id].confirmed_at == sent


def test_a_reconfirmation_after_a_mark_overflow_changes_nothing():
    """A flood emptied the mark tables while the query ran: any entry may have
    been notified, so the answer is applied to none of them."""
    cache = _filled()
    sent = T0 + 3
    aging, seq = cache.aging(sent), cache.seq
    overflowed = False
    for n in range(MAX_CHANGE_MARKS + 1):  # the last one finds the table full
        overflowed |= cache.credential_changed(f"z{n:015x}", sent)  # about others
    assert overflowed
    cache.confirmed(aging, set(), seq, sent)
    assert set(cache.auth) == {CRED.credential_id, CRED_2.credential_id, OTHER_CRED.credential_id}
    assert all(entry.confirmed_at == T0 for entry in cache.auth.values())


def test_a_reconfirmation_asks_for_at_most_one_batch():
    cache = FactCache(MAX_AGE_S, MARGIN_MS)
    token = cache.token(INC, T0)
    for n in range(CONFIRM_BATCH + 5):
        cache.remember_credential(
            token, PresentedCredential(f"{n:016x}", b"x"), WORKER, incarnation=INC, now=T0
        )
    assert len(cache.aging(T0 + MAX_AGE_S)) == CONFIRM_BATCH
