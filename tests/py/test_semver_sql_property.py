"""Property tests: the SQL SemVer evaluator agrees with the `semver` package (SPEC §3.2).

`ql_private.semver_compare` must equal `semver.Version.compare` on every pair, and
`ql_private.semver_satisfies` must equal the Python oracle
(`service.semver_range.satisfies`).

Each hypothesis example checks one structured case (drawn and shrunk by
hypothesis) plus a batch of BATCH more cases built from the same grammar with the
example's drawn seed (so a failure replays exactly), all in
one round trip (unnest). Drawing every batch member through hypothesis costs
~10 ms per example; this way 2,000 examples check ~50,000 cases in seconds. The
tests count the distinct cases they saw and require >= 2,000.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import psycopg
import pytest
import semver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from qinglong.service.semver_range import satisfies as oracle_satisfies

MIN_DISTINCT_PAIRS = 2000
BATCH = 24
SETTINGS = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# A drawn seed (not st.randoms(): every call on that Random is a hypothesis draw,
# which made batches slower than drawing them directly).
seeds = st.integers(0, 2**64 - 1).map(random.Random)

# Small alphabets on purpose: they make equal identifiers, shared prefixes and
# numeric/alphanumeric clashes (`0a`, `-x`, `alpha` vs `alpha-1`) frequent.
_ID_ALPHABET = "0123456789abAZ-"


def _prerelease_id(raw: str) -> str:
    # All-digit identifiers must not have leading zeros (SemVer §9); keep them numeric.
    return str(int(raw)) if raw.isdigit() else raw


numbers = st.one_of(
    st.integers(0, 3),
    st.integers(0, 10**6),
    st.integers(0, 10**30),  # beyond any integer type the database has
)
prerelease_ids = st.one_of(
    st.sampled_from(["alpha", "beta", "rc", "0", "1", "2", "11", "0a", "-x", "-", "a-1", "A", "Z"]),
    st.text(_ID_ALPHABET, min_size=1, max_size=5).map(_prerelease_id),
)
build_ids = st.text(_ID_ALPHABET, min_size=1, max_size=4)  # leading zeros are fine here
prereleases = st.lists(prerelease_ids, min_size=0, max_size=4)
builds = st.lists(build_ids, min_size=0, max_size=2)


@st.composite
def versions(draw: st.DrawFn, core: tuple[int, int, int] | None = None) -> str:
    if core is None:
        core = (draw(numbers), draw(numbers), draw(numbers))
    major, minor, patch = core
    text = f"{major}.{minor}.{patch}"
    pre = draw(prereleases)
    if pre:
        text += "-" + ".".join(pre)
    build = draw(builds)
    if build:
        text += "+" + ".".join(build)
    return text


@st.composite
def version_pairs(draw: st.DrawFn) -> tuple[str, str]:
    # Half the pairs share MAJOR.MINOR.PATCH so prerelease precedence is exercised,
    # not just the numeric core.
    if draw(st.booleans()):
        core = (draw(numbers), draw(numbers), draw(numbers))
        return draw(versions(core)), draw(versions(core))
    return draw(versions()), draw(versions())


_ID_POOL = ["alpha", "beta", "rc", "0", "1", "2", "11", "0a", "-x", "-", "a-1", "A", "Z"]


def _rand_number(rng: random.Random) -> int:
    return rng.choice((rng.randint(0, 3), rng.randint(0, 10**6), rng.randint(0, 10**30)))


def _rand_id(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(_ID_POOL)
    raw = "".join(rng.choice(_ID_ALPHABET) for _ in range(rng.randint(1, 5)))
    return _prerelease_id(raw)


def _rand_version(rng: random.Random, core: tuple[int, int, int] | None = None) -> str:
    if core is None:
        core = (_rand_number(rng), _rand_number(rng), _rand_number(rng))
    text = "{}.{}.{}".format(*core)
    pre = [_rand_id(rng) for _ in range(rng.randint(0, 4))]
    if pre:
        text += "-" + ".".join(pre)
    build = [
        "".join(rng.choice(_ID_ALPHABET) for _ in range(rng.randint(1, 4)))
        for _ in range(rng.choice((0, 0, 1, 2)))
    ]
    if build:
        text += "+" + ".".join(build)
    return text


def _rand_pair(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        core = (_rand_number(rng), _rand_number(rng), _rand_number(rng))
        return _rand_version(rng, core), _rand_version(rng, core)
    return _rand_version(rng), _rand_version(rng)


def _batch(first: object, rng: random.Random, make: Callable[[random.Random], object]) -> list:
    return [first, *(make(rng) for _ in range(BATCH))]


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


def test_semver_compare_matches_semver_package(conn: psycopg.Connection) -> None:
    seen: set[tuple[str, str]] = set()

    @SETTINGS
    @given(version_pairs(), seeds)
    def check(pair: tuple[str, str], rng: random.Random) -> None:
        pairs = _batch(pair, rng, _rand_pair)
        left = [a for a, _ in pairs]
        right = [b for _, b in pairs]
        rows = conn.execute(
            "SELECT ql_private.semver_compare(a, b) FROM unnest(%s::text[], %s::text[])"
            " WITH ORDINALITY AS t(a, b, n) ORDER BY n",
            (left, right),
        ).fetchall()
        for (a, b), (got,) in zip(pairs, rows, strict=True):
            assert got == semver.Version.parse(a).compare(b), (a, b)
        seen.update(pairs)

    check()
    assert len(seen) >= MIN_DISTINCT_PAIRS


# Arbitrary short strings over the SemVer alphabet plus troublemakers: whether the
# `semver` package accepts a string must be exactly whether SQL does.
maybe_versions = st.one_of(
    versions(),
    st.text("0123456789.-+aZ_ \n", min_size=0, max_size=14),
    st.builds(
        lambda v, junk: v + junk,
        versions(),
        st.sampled_from(["\n", " ", ".", "-", "+", "..", ".0"]),
    ),
)

_SQLSTATE_OF = """
CREATE FUNCTION pg_temp.semver_sqlstate(v text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ql_private.semver_parse(v, 'v');
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$
"""


def _rand_maybe_version(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return _rand_version(rng)
    if roll < 0.7:
        return _rand_version(rng) + rng.choice(["\n", " ", ".", "-", "+", "..", ".0", "_"])
    return "".join(rng.choice("0123456789.-+aZ_ \n") for _ in range(rng.randint(0, 14)))


def _python_accepts(text: str) -> bool:
    try:
        semver.Version.parse(text)
    except ValueError:
        return False
    return True


def test_semver_validity_matches_semver_package(conn: psycopg.Connection) -> None:
    conn.execute(_SQLSTATE_OF)
    seen: set[str] = set()

    @SETTINGS
    @given(maybe_versions, seeds)
    def check(text: str, rng: random.Random) -> None:
        texts = _batch(text, rng, _rand_maybe_version)
        rows = conn.execute(
            "SELECT pg_temp.semver_sqlstate(v) FROM unnest(%s::text[])"
            " WITH ORDINALITY AS t(v, n) ORDER BY n",
            (texts,),
        ).fetchall()
        for text, (state,) in zip(texts, rows, strict=True):
            assert state in (None, "QL003"), (text, state)  # never a bare 22xxx
            assert (state is None) == _python_accepts(text), (text, state)
        seen.update(texts)

    check()
    assert len(seen) >= MIN_DISTINCT_PAIRS


# Satisfaction: small cores so comparators often land on the version's own triple
# (where node-semver's prerelease rule decides) and on its neighbours.
small = st.integers(0, 3)
ops = st.sampled_from([">=", ">", "<=", "<", "="])


@st.composite
def comparator(draw: st.DrawFn, core: tuple[int, int, int]) -> str:
    if draw(st.booleans()):
        core = (draw(small), draw(small), draw(small))
    text = f"{core[0]}.{core[1]}.{core[2]}"
    pre = draw(st.lists(st.sampled_from(["0", "1", "2", "alpha", "beta", "rc"]), max_size=2))
    if pre:
        text += "-" + ".".join(pre)
    return draw(ops) + text


@st.composite
def satisfaction_cases(draw: st.DrawFn) -> tuple[str, list[str]]:
    core = (draw(small), draw(small), draw(small))
    version = f"{core[0]}.{core[1]}.{core[2]}"
    pre = draw(st.lists(st.sampled_from(["0", "1", "2", "alpha", "beta", "rc"]), max_size=2))
    if pre:
        version += "-" + ".".join(pre)
    if draw(st.booleans()):
        version += "+" + draw(build_ids)
    return version, draw(st.lists(comparator(core), max_size=3))


_PRE_POOL = ["0", "1", "2", "alpha", "beta", "rc"]


def _rand_small_version(rng: random.Random, core: tuple[int, int, int]) -> str:
    text = "{}.{}.{}".format(*core)
    pre = [rng.choice(_PRE_POOL) for _ in range(rng.randint(0, 2))]
    return text + "-" + ".".join(pre) if pre else text


def _rand_satisfaction_case(rng: random.Random) -> tuple[str, list[str]]:
    core = (rng.randint(0, 3), rng.randint(0, 3), rng.randint(0, 3))
    version = _rand_small_version(rng, core)
    if rng.random() < 0.3:
        version += "+b" + str(rng.randint(0, 9))
    comparators = []
    for _ in range(rng.randint(0, 3)):
        c_core = (
            core
            if rng.random() < 0.5
            else (rng.randint(0, 3), rng.randint(0, 3), rng.randint(0, 3))
        )
        op = rng.choice([">=", ">", "<=", "<", "="])
        comparators.append(op + _rand_small_version(rng, c_core))
    return version, comparators


def test_semver_satisfies_matches_oracle(conn: psycopg.Connection) -> None:
    seen: set[tuple[str, tuple[str, ...]]] = set()

    @SETTINGS
    @given(satisfaction_cases(), seeds)
    def check(case: tuple[str, list[str]], rng: random.Random) -> None:
        cases = _batch(case, rng, _rand_satisfaction_case)
        rows = conn.execute(
            "SELECT ql_private.semver_satisfies(v, c) FROM unnest(%s::text[], %s::jsonb[])"
            " WITH ORDINALITY AS t(v, c, n) ORDER BY n",
            ([v for v, _ in cases], [Jsonb(c) for _, c in cases]),
        ).fetchall()
        for (version, comparators), (got,) in zip(cases, rows, strict=True):
            assert got == oracle_satisfies(version, comparators), (version, comparators)
        seen.update((v, tuple(c)) for v, c in cases)

    check()
    assert len(seen) >= MIN_DISTINCT_PAIRS
