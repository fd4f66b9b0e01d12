"""Range normalization (node-semver desugaring) and the satisfaction oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qinglong.service.semver_range import (
    MAX_COMPONENT,
    InvalidRange,
    normalize_range,
    parse_comparator,
    parse_version,
    satisfies,
)

# Expected outputs are node-semver 7's `new Range(r).range` with `-0` upper bounds
# (includePrerelease off), `''` operators written as `=`.
DESUGAR = [
    # caret
    ("^1.2.3", [">=1.2.3", "<2.0.0-0"]),
    ("^0.2.3", [">=0.2.3", "<0.3.0-0"]),
    ("^0.0.3", [">=0.0.3", "<0.0.4-0"]),
    ("^1.2.3-beta.2", [">=1.2.3-beta.2", "<2.0.0-0"]),
    ("^0.0.3-beta", [">=0.0.3-beta", "<0.0.4-0"]),
    ("^0.2.3-beta", [">=0.2.3-beta", "<0.3.0-0"]),
    ("^1.2", [">=1.2.0", "<2.0.0-0"]),
    ("^1.2.x", [">=1.2.0", "<2.0.0-0"]),
    ("^0.2", [">=0.2.0", "<0.3.0-0"]),
    ("^0.0", [">=0.0.0", "<0.1.0-0"]),
    ("^0.0.x", [">=0.0.0", "<0.1.0-0"]),
    ("^1", [">=1.0.0", "<2.0.0-0"]),
    ("^1.x", [">=1.0.0", "<2.0.0-0"]),
    ("^0", [">=0.0.0", "<1.0.0-0"]),
    ("^0.x", [">=0.0.0", "<1.0.0-0"]),
    ("^*", []),
    # tilde
    ("~1.2.3", [">=1.2.3", "<1.3.0-0"]),
    ("~1.2", [">=1.2.0", "<1.3.0-0"]),
    ("~1.2.x", [">=1.2.0", "<1.3.0-0"]),
    ("~1", [">=1.0.0", "<2.0.0-0"]),
    ("~1.x", [">=1.0.0", "<2.0.0-0"]),
    ("~0.2.3", [">=0.2.3", "<0.3.0-0"]),
    ("~0", [">=0.0.0", "<1.0.0-0"]),
    ("~1.2.3-beta.2", [">=1.2.3-beta.2", "<1.3.0-0"]),
    ("~*", []),
    # X-ranges and partials
    ("*", []),
    ("x", []),
    ("X", []),
    ("1", [">=1.0.0", "<2.0.0-0"]),
    ("1.x", [">=1.0.0", "<2.0.0-0"]),
    ("1.X.x", [">=1.0.0", "<2.0.0-0"]),
    ("1.2", [">=1.2.0", "<1.3.0-0"]),
    ("1.2.*", [">=1.2.0", "<1.3.0-0"]),
    ("=1.2", [">=1.2.0", "<1.3.0-0"]),
    (">=1.2", [">=1.2.0"]),
    (">=1", [">=1.0.0"]),
    (">1.2", [">=1.3.0"]),
    (">1", [">=2.0.0"]),
    (">1.x", [">=2.0.0"]),
    ("<1.2", ["<1.2.0-0"]),
    ("<1", ["<1.0.0-0"]),
    ("<=1.2", ["<1.3.0-0"]),
    ("<=1", ["<2.0.0-0"]),
    (">=*", []),
    ("<=*", []),
    ("=*", []),
    (">*", ["<0.0.0-0"]),
    ("<*", ["<0.0.0-0"]),
    # plain comparators and exact versions
    ("1.2.3", ["=1.2.3"]),
    ("=1.2.3", ["=1.2.3"]),
    ("1.2.3+build.5", ["=1.2.3"]),
    (">=1.2.3-rc.1+b", [">=1.2.3-rc.1"]),
    (">1.2.3", [">1.2.3"]),
    ("<=1.2.3", ["<=1.2.3"]),
    ("<2.0.0", ["<2.0.0"]),
    (">=1.2.0 <2.0.0", [">=1.2.0", "<2.0.0"]),
    (">= 1.2.0  < 2.0.0", [">=1.2.0", "<2.0.0"]),
    ("  ^1.2.3  ", [">=1.2.3", "<2.0.0-0"]),
    ("^1.2 <1.5", [">=1.2.0", "<2.0.0-0", "<1.5.0-0"]),
    ("* >=1.2.3", [">=1.2.3"]),
]


@pytest.mark.parametrize(("text", "expected"), DESUGAR)
def test_desugar(text: str, expected: list[str]) -> None:
    assert normalize_range(text) == expected


def test_equivalent_spellings_normalize_identically() -> None:
    assert normalize_range("^1.2") == normalize_range(">=1.2.0 <2.0.0-0")
    assert normalize_range("~1.2") == normalize_range("1.2.x") == normalize_range("1.2")


REFUSED = [
    ("1.2.3 || 2.0.0", "'||'"),
    ("1.2.3||2.0.0", "'||'"),
    ("1.2.3 - 2.0.0", "hyphen"),
    ("", "empty"),
    ("   ", "empty"),
    ("^", "no version"),
    (">=", "no version"),
    ("> = 1.2.3", "no version"),
    ("v1.2.3", "not a valid version"),
    ("=v1.2.3", "not a valid version"),
    ("01.2.3", "not a valid"),
    ("1.02", "not a valid"),
    ("1.2.3-01", "not a valid"),
    ("1.2.3-", "not a valid"),
    ("1.2.3+", "not a valid"),
    ("1.2.3.4", "not a valid"),
    ("1.x.3", "cannot follow a wildcard"),
    ("x.1", "cannot follow a wildcard"),
    ("1.2.x-beta", "not a valid"),
    ("1.2-beta", "not a valid"),
    ("~>1.2.3", "not a valid"),
    ("=>1.2.3", "not a valid"),
    ("^~1.2.3", "not a valid"),
    ("1.2.3\t<2", "not a valid"),
    ("1.2.3\n", "not a valid"),
    ("\u0661.2.3", "not a valid"),
    ("1.2.\u0663", "not a valid"),
    (f"{MAX_COMPONENT + 1}.0.0", "component above"),
    (f"^{MAX_COMPONENT + 1}", "component above"),
    (" ".join(["1.2.3"] * 17), "more than 16"),
    ("1" * 257, "longer than 256"),
    ("latest", "not a valid"),
]


@pytest.mark.parametrize(("text", "fragment"), REFUSED)
def test_refused(text: str, fragment: str) -> None:
    with pytest.raises(InvalidRange) as info:
        normalize_range(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_component_at_limit_accepted() -> None:
    assert normalize_range(f"{MAX_COMPONENT}.0.0") == [f"={MAX_COMPONENT}.0.0"]


def test_non_string_refused() -> None:
    with pytest.raises(InvalidRange):
        normalize_range(123)  # type: ignore[arg-type]


# ---------------------------------------------------------------- satisfaction

SATISFIES = [
    # release versions against desugared ranges
    ("1.2.3", "^1.2.3", True),
    ("1.9.9", "^1.2.3", True),
    ("2.0.0", "^1.2.3", False),
    ("1.2.2", "^1.2.3", False),
    ("0.2.9", "^0.2.3", True),
    ("0.3.0", "^0.2.3", False),
    ("0.0.3", "^0.0.3", True),
    ("0.0.4", "^0.0.3", False),
    ("1.2.9", "~1.2.3", True),
    ("1.3.0", "~1.2.3", False),
    ("1.5.0", "1.x", True),
    ("3.0.0", ">1.2", True),
    ("1.2.9", ">1.2", False),
    ("1.2.9", "<=1.2", True),
    ("1.3.0", "<=1.2", False),
    ("0.0.0", "*", True),
    ("0.0.0", ">*", False),
    ("1.2.3", "=1.2.3", True),
    ("1.2.4", "=1.2.3", False),
    ("1.2.3+build.9", "1.2.3", True),  # build metadata never affects precedence
    ("1.2.3+a", "=1.2.3+b", True),
    # prerelease rule: only ranges naming the same major.minor.patch with a prerelease
    ("1.2.3-beta.2", "^1.2.3-beta.1", True),
    ("1.2.3-beta.1", "^1.2.3-beta.2", False),
    ("1.2.4-beta.1", "^1.2.3-beta.1", False),
    ("1.3.0-0", "^1.2.3", False),
    ("2.0.0-0", "^1.2.3", False),
    ("1.0.0-rc.1", "*", False),
    ("1.0.0-rc.1", "<1.0.0", False),
    ("1.0.0-rc.1", ">=1.0.0-rc.0 <1.0.0", True),
    ("1.0.0-rc.1", ">=0.9.0 <=1.0.0-rc.5", True),
    ("1.0.0-rc.1", ">=0.9.0 <=1.0.1-rc.5", False),
    ("1.2.3-alpha", "^1.2.3-beta", False),
    ("1.2.3-1", ">=1.2.3-0", True),
    ("1.2.3-a", ">1.2.3-1", True),  # alphanumeric identifiers outrank numeric ones
    ("1.2.3-10", ">1.2.3-9", True),  # numeric identifiers compare numerically
    ("1.2.3-beta.11", ">1.2.3-beta.2", True),
    ("1.2.3-beta", "<1.2.3-beta.0", True),  # a shorter identifier list ranks lower
    ("1.2.3-B", "<1.2.3-a", True),  # ASCII order: uppercase first
    ("1.2.3-rc.1", "=1.2.3-rc.1", True),
    ("1.2.3-rc.1", "~1.2.3-rc.0", True),
    ("0.0.0-0", ">*", False),
]


@pytest.mark.parametrize(("version", "text", "expected"), SATISFIES)
def test_satisfies_table(version: str, text: str, expected: bool) -> None:
    assert satisfies(version, normalize_range(text)) is expected


def test_empty_set_means_any_release() -> None:
    assert satisfies("123.4.5", [])
    assert not satisfies("123.4.5-rc", [])


@pytest.mark.parametrize(
    "bad", ["1.2", "v1.2.3", "1.2.3-01", "", "1.2.3 ", f"{MAX_COMPONENT + 1}.0.0"]
)
def test_satisfies_refuses_invalid_versions(bad: str) -> None:
    with pytest.raises(InvalidRange):
        satisfies(bad, [])


@pytest.mark.parametrize("bad", ["^1.2.3", ">=1.2", "1.2.3", "=1.2.3+b", "=>1.2.3", ">= 1.2.3"])
def test_satisfies_refuses_unnormalized_comparators(bad: str) -> None:
    with pytest.raises(InvalidRange):
        satisfies("1.2.3", [bad])
    with pytest.raises(InvalidRange):
        parse_comparator(bad)


def test_parse_version_keeps_build_but_comparator_text_drops_it() -> None:
    assert parse_version("1.2.3-rc.1+b.7").build == "b.7"
    assert str(parse_comparator(">=1.2.3-rc.1")) == ">=1.2.3-rc.1"


# ---------------------------------------------------------------- property tests

# A brute-force reading of SemVer 2.0.0 precedence, independent of the `semver` package.


def _split(version: str) -> tuple[tuple[int, int, int], list[str]]:
    core, _, _build = version.partition("+")
    core, _, pre = core.partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    return (major, minor, patch), pre.split(".") if pre else []


def _key(version: str) -> tuple[object, ...]:
    core, pre = _split(version)
    if not pre:
        return (*core, 1)
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre)
    return (*core, 0, ids)


def _oracle(version: str, comparators: list[str]) -> bool:
    ops = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
        "=": lambda a, b: a == b,
    }
    for comp in comparators:
        op = next(o for o in (">=", "<=", ">", "<", "=") if comp.startswith(o))
        if not ops[op](_key(version), _key(comp[len(op) :])):
            return False
    core, pre = _split(version)
    if not pre:
        return True
    return any(
        _split(c.lstrip("<>="))[0] == core and _split(c.lstrip("<>="))[1] for c in comparators
    )


_ident = st.one_of(
    st.sampled_from(["0", "1", "2", "10", "alpha", "beta", "rc", "a1", "1a", "A", "-", "x-y"]),
    st.integers(0, 30).map(str),
)
_pre = st.lists(_ident, min_size=1, max_size=3).map(".".join)
_core = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)).map(
    lambda t: ".".join(map(str, t))
)
_version = st.tuples(_core, st.none() | _pre).map(lambda t: t[0] + (f"-{t[1]}" if t[1] else ""))
_comparator = st.tuples(st.sampled_from([">=", "<=", ">", "<", "="]), _version).map("".join)


@settings(max_examples=600)
@given(
    _version,
    st.none() | st.sampled_from(["b", "build.1", "0a"]),
    st.lists(_comparator, max_size=4),
)
def test_satisfies_agrees_with_brute_force(
    version: str, build: str | None, comps: list[str]
) -> None:
    full = version + (f"+{build}" if build else "")
    assert satisfies(full, comps) is _oracle(version, comps)


_release = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4))


@settings(max_examples=400)
@given(_release, _release)
def test_caret_means_left_most_non_zero_fixed(
    base: tuple[int, int, int], v: tuple[int, int, int]
) -> None:
    # node-semver docs: ^ allows changes that do not modify the left-most non-zero element.
    text = ".".join(map(str, v))
    pos = next((i for i, x in enumerate(base) if x != 0), 2)
    expected = v >= base and v[: pos + 1] == base[: pos + 1]
    assert satisfies(text, normalize_range("^" + ".".join(map(str, base)))) is expected


@settings(max_examples=400)
@given(_release, _release)
def test_tilde_allows_patch_changes(base: tuple[int, int, int], v: tuple[int, int, int]) -> None:
    text = ".".join(map(str, v))
    expected = v >= base and v[:2] == base[:2]
    assert satisfies(text, normalize_range("~" + ".".join(map(str, base)))) is expected


@settings(max_examples=400)
@given(st.integers(0, 4), st.none() | st.integers(0, 4), _release)
def test_x_range_means_prefix_match(major: int, minor: int | None, v: tuple[int, int, int]) -> None:
    text = f"{major}" if minor is None else f"{major}.{minor}"
    prefix = (major,) if minor is None else (major, minor)
    assert satisfies(".".join(map(str, v)), normalize_range(text)) is (v[: len(prefix)] == prefix)
