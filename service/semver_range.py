"""SemVer ranges: publish-time normalization into plain comparators, and the
Python oracle of satisfaction that the SQL evaluator is property-tested against.

Accepted syntax is the node-semver subset of SPEC 4.5: a space-separated AND set
of comparators (`>=1.2.0 <2.0.0`), caret (`^1.2`), tilde (`~1.2.3`), X-ranges
(`1`, `1.2`, `1.x`, `*`) and exact versions. `||` alternatives and hyphen ranges
are refused. Desugaring follows node-semver 7 (`ranges.js`, includePrerelease
off): upper bounds get `-0` so that `<2.0.0-0` excludes every 2.0.0 prerelease.

Satisfaction (node-semver semantics, DESIGN "Normalized placement"): every
comparator holds by SemVer 2.0.0 precedence, and a prerelease version only
satisfies the set if some comparator names the same `major.minor.patch` with a
prerelease. An empty set means "any release version".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import semver

__all__ = [
    "MAX_COMPONENT",
    "Comparator",
    "InvalidRange",
    "Op",
    "normalize_range",
    "parse_comparator",
    "parse_version",
    "satisfies",
]

# node-semver refuses components above Number.MAX_SAFE_INTEGER; so do we, which also
# keeps every component inside a PostgreSQL bigint.
MAX_COMPONENT = 2**53 - 1
MAX_RANGE_LENGTH = 256
MAX_VERSION_LENGTH = 128
MAX_TERMS = 16

_NUM = r"0|[1-9][0-9]*"
_WILD = r"[xX*]"
_PART = rf"(?:{_NUM}|{_WILD})"
# A partial version: only X-ranges; prerelease/build need all three numeric parts and
# go through the `semver` package instead.
_PARTIAL = re.compile(rf"({_PART})(?:\.({_PART})(?:\.({_PART}))?)?\Z")
_FULL_CORE = re.compile(rf"(?:{_NUM})\.(?:{_NUM})\.(?:{_NUM})(?:[-+]|\Z)")
_OP_SPACE = re.compile(r"(\^|~|>=|<=|>|<|=) +(?=[0-9xX*])")
_TOKEN = re.compile(r"(\^|~|>=|<=|>|<|=)?(.*)\Z", re.DOTALL)
_COMPARATOR = re.compile(r"(>=|<=|>|<|=)(.*)\Z", re.DOTALL)


class InvalidRange(ValueError):
    """A version or range is not valid; the message says which part and why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Op(StrEnum):
    GE = ">="
    GT = ">"
    LE = "<="
    LT = "<"
    EQ = "="


_HOLDS: dict[Op, Callable[[int], bool]] = {
    Op.GE: lambda c: c >= 0,
    Op.GT: lambda c: c > 0,
    Op.LE: lambda c: c <= 0,
    Op.LT: lambda c: c < 0,
    Op.EQ: lambda c: c == 0,
}


@dataclass(frozen=True)
class Comparator:
    op: Op
    version: semver.Version

    def __str__(self) -> str:
        return f"{self.op.value}{_core_text(self.version)}"

    def holds(self, version: semver.Version) -> bool:
        return _HOLDS[self.op](version.compare(self.version))


@dataclass(frozen=True)
class _Partial:
    """A possibly partial version; None marks a wildcard or missing component."""

    major: int | None
    minor: int | None
    patch: int | None
    prerelease: str | None = None


def _show(text: str) -> str:
    # Range text is authored task content (not secret); keep messages short anyway.
    return repr(text if len(text) <= 64 else text[:61] + "...")


def _core_text(version: semver.Version) -> str:
    text = f"{version.major}.{version.minor}.{version.patch}"
    return f"{text}-{version.prerelease}" if version.prerelease else text


def parse_version(text: str) -> semver.Version:
    """Strict SemVer 2.0.0 (no `v` prefix, no partials), components <= 2**53-1."""
    if not isinstance(text, str) or not text.isascii() or len(text) > MAX_VERSION_LENGTH:
        raise InvalidRange(f"{_show(str(text))} is not a valid SemVer 2.0.0 version")
    try:
        version = semver.Version.parse(text)
    except ValueError:
        raise InvalidRange(f"{_show(text)} is not a valid SemVer 2.0.0 version") from None
    if max(version.major, version.minor, version.patch) > MAX_COMPONENT:
        raise InvalidRange(f"{_show(text)} has a component above {MAX_COMPONENT}")
    return version


def parse_comparator(text: str) -> Comparator:
    """Parse a normalized comparator (`OP` + full version without build metadata)."""
    match = _COMPARATOR.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidRange(f"{_show(str(text))} is not a normalized comparator")
    op, version_text = match.groups()
    version = parse_version(version_text)
    if version.build is not None:
        raise InvalidRange(f"{_show(text)}: normalized comparators carry no build metadata")
    return Comparator(Op(op), version)


def _number(text: str, token: str) -> int | None:
    if text in ("x", "X", "*"):
        return None
    value = int(text)
    if value > MAX_COMPONENT:
        raise InvalidRange(f"{_show(token)} has a component above {MAX_COMPONENT}")
    return value


def _parse_partial(text: str, token: str) -> _Partial:
    if _FULL_CORE.match(text):
        full = parse_version(text)  # prerelease/build grammar checked by `semver`
        return _Partial(full.major, full.minor, full.patch, full.prerelease)
    match = _PARTIAL.match(text)
    if match is None or not text.isascii():
        raise InvalidRange(f"{_show(token)} is not a valid version or X-range")
    major, minor, patch = (_number(g, token) if g is not None else None for g in match.groups())
    wild = [g is None or g in "xX*" for g in match.groups()]
    # `1.x.3` is legal in node-semver but says two different things; refuse it.
    if any(wild[i] and not wild[i + 1] and match.group(i + 2) is not None for i in range(2)):
        raise InvalidRange(f"{_show(token)}: a number cannot follow a wildcard")
    return _Partial(major, minor, patch)


def _v(major: int, minor: int, patch: int, pre: str | None = None) -> str:
    return f"{major}.{minor}.{patch}" + (f"-{pre}" if pre else "")


def _caret(p: _Partial) -> list[str]:
    if p.major is None:
        return []
    if p.minor is None:
        return [f">={_v(p.major, 0, 0)}", f"<{_v(p.major + 1, 0, 0, '0')}"]
    if p.patch is None:
        upper = _v(p.major, p.minor + 1, 0, "0") if p.major == 0 else _v(p.major + 1, 0, 0, "0")
        return [f">={_v(p.major, p.minor, 0)}", f"<{upper}"]
    lower = f">={_v(p.major, p.minor, p.patch, p.prerelease)}"
    if p.major != 0:
        return [lower, f"<{_v(p.major + 1, 0, 0, '0')}"]
    if p.minor != 0:
        return [lower, f"<{_v(0, p.minor + 1, 0, '0')}"]
    return [lower, f"<{_v(0, 0, p.patch + 1, '0')}"]


def _tilde(p: _Partial) -> list[str]:
    if p.major is None:
        return []
    if p.minor is None:
        return [f">={_v(p.major, 0, 0)}", f"<{_v(p.major + 1, 0, 0, '0')}"]
    lower = _v(p.major, p.minor, p.patch if p.patch is not None else 0, p.prerelease)
    return [f">={lower}", f"<{_v(p.major, p.minor + 1, 0, '0')}"]


def _xrange(op: str, p: _Partial) -> list[str]:
    """Plain comparator or X-range (node-semver `replaceXRange`)."""
    if p.major is None:
        # `>*` / `<*` can match nothing; every other operator on `*` matches anything.
        return [f"<{_v(0, 0, 0, '0')}"] if op in (">", "<") else []
    if p.minor is not None and p.patch is not None:
        return [f"{op or '='}{_v(p.major, p.minor, p.patch, p.prerelease)}"]
    major, minor = p.major, p.minor if p.minor is not None else 0
    if op in ("", "="):
        if p.minor is None:
            return [f">={_v(major, 0, 0)}", f"<{_v(major + 1, 0, 0, '0')}"]
        return [f">={_v(major, minor, 0)}", f"<{_v(major, minor + 1, 0, '0')}"]
    if op in (">", "<="):
        # `>1.2` is `>=1.3.0`; `<=1.2` is `<1.3.0-0`: the whole named line is included/excluded.
        bumped = _v(major + 1, 0, 0) if p.minor is None else _v(major, minor + 1, 0)
        return [f">={bumped}"] if op == ">" else [f"<{bumped}-0"]
    if op == "<":
        return [f"<{_v(major, minor, 0, '0')}"]
    return [f">={_v(major, minor, 0)}"]  # ">="


def _desugar(token: str) -> list[str]:
    if token == "-":
        raise InvalidRange("hyphen ranges are not supported; write '>=A <=B'")
    match = _TOKEN.match(token)
    assert match is not None  # `(.*)\Z` with DOTALL matches every string
    op, rest = match.group(1) or "", match.group(2)
    if not rest:
        raise InvalidRange(f"operator {_show(op)} has no version")
    partial = _parse_partial(rest, token)
    if op == "^":
        return _caret(partial)
    if op == "~":
        return _tilde(partial)
    return _xrange(op, partial)


def normalize_range(text: str) -> list[str]:
    """Desugar a range into plain comparators (`>=1.2.0`, `<2.0.0-0`, `=1.2.3`).

    `[]` means any release version. Build metadata is dropped. Raises `InvalidRange`.
    """
    if not isinstance(text, str):
        raise InvalidRange("a range must be a string")
    if len(text) > MAX_RANGE_LENGTH:
        raise InvalidRange(f"range longer than {MAX_RANGE_LENGTH} characters")
    if "||" in text:
        raise InvalidRange("'||' alternatives are not supported; use one AND set of comparators")
    tokens = [t for t in _OP_SPACE.sub(r"\1", text.strip(" ")).split(" ") if t]
    if not tokens:
        raise InvalidRange("empty range; use '*' for any version")
    if len(tokens) > MAX_TERMS:
        raise InvalidRange(f"more than {MAX_TERMS} terms in one range")
    comparators: list[str] = []
    for token in tokens:
        comparators.extend(_desugar(token))
    return comparators


def satisfies(version: str, comparators: Sequence[str]) -> bool:
    """Whether `version` satisfies every comparator (node-semver prerelease rule)."""
    parsed = parse_version(version)
    terms = [parse_comparator(c) for c in comparators]
    if not all(term.holds(parsed) for term in terms):
        return False
    if not parsed.prerelease:
        return True
    # A prerelease only matches a set that opts in on the same major.minor.patch.
    core = (parsed.major, parsed.minor, parsed.patch)
    return any(
        t.version.prerelease and (t.version.major, t.version.minor, t.version.patch) == core
        for t in terms
    )
