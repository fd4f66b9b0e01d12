"""Every function file's `Caller:` clause names exactly who calls the function.

The clause starts a header line, `Caller: ` then comma-separated items up to the
first `.` outside parentheses that ends a sentence (it may wrap onto indented
lines). Each item may carry one note in parentheses, which is prose and not
checked. An item is one of:

  ql.<name> / ql_private.<name>   a function whose body calls this one
  ql_<role>                       a role granted EXECUTE on it
  trigger on <schema>.<table>     a trigger on that table executes it
  any function                    (alone) a shared helper called by at least
                                  ANY_FUNCTION_MIN functions, not listed one by one
  none                            (alone) nothing in the database calls it

Checked against the catalog of a freshly migrated database: every SQL item's
body (pg_proc.prosrc, comments removed) calls the function, and every function
whose body calls it is listed (unless `any function`); the roles listed are
exactly the roles granted EXECUTE (ql_owner, the owner, aside); the tables
listed are exactly those whose triggers execute it. Python never appears as a
caller: `qinglong.db.api` is the one Python caller of every `ql.` function
(tests/py/test_db_api.py) and runs as the roles listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from qinglong.db.migrator import SqlFile, load_functions

ANY_FUNCTION_MIN = 15
FUNCTION = re.compile(r"^ql(?:_private)?\.[a-z0-9_]+$")
ROLE = re.compile(r"^ql_[a-z0-9_]+$")
TRIGGER = re.compile(r"^trigger on (?P<table>[a-z_]+\.[a-z0-9_]+)$")


@dataclass(frozen=True)
class Reality:
    """Who calls one function, as the catalog says."""

    functions: frozenset[str]
    roles: frozenset[str]
    trigger_tables: frozenset[str]


@dataclass
class Claim:
    functions: set[str] = field(default_factory=set)
    roles: set[str] = field(default_factory=set)
    trigger_tables: set[str] = field(default_factory=set)
    any_function: bool = False
    none: bool = False


def caller_clause(header: str) -> str:
    """The text of the one `Caller:` clause, notes included, whitespace joined."""
    starts = [m.end() for m in re.finditer(r"^Caller: ", header, re.MULTILINE)]
    assert len(starts) == 1, f"{len(starts)} lines start with 'Caller: ', one expected"
    text = header[starts[0] :]
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth == 0 and (index + 1 == len(text) or text[index + 1].isspace()):
            return " ".join(text[:index].split())
    raise AssertionError("the Caller: clause does not end with a '.'")


def parse_claim(clause: str) -> Claim:
    plain, depth = "", 0
    for char in clause:  # drop the notes in parentheses
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char != ")":
            plain += char
    assert depth == 0, f"unbalanced parentheses in {clause!r}"
    items = [item.strip() for item in plain.split(",")]
    claim = Claim()
    if items in (["none"], ["any function"]):
        claim.none, claim.any_function = items == ["none"], items == ["any function"]
        return claim
    for item in items:
        trigger = TRIGGER.match(item)
        if FUNCTION.match(item):
            claim.functions.add(item)
        elif ROLE.match(item):
            claim.roles.add(item)
        elif trigger:
            claim.trigger_tables.add(trigger["table"])
        else:
            raise AssertionError(f"unrecognised Caller: item {item!r} in {clause!r}")
    return claim


def problems(name: str, claim: Claim, reality: Reality, roles: set[str]) -> list[str]:
    found: list[str] = []
    if claim.none and (reality.functions or reality.roles or reality.trigger_tables):
        found.append(
            f"{name}: 'none', but called by {sorted(reality.functions)}, "
            f"roles {sorted(reality.roles)}, triggers on {sorted(reality.trigger_tables)}"
        )
    if claim.any_function and len(reality.functions) < ANY_FUNCTION_MIN:
        found.append(
            f"{name}: 'any function', but only {len(reality.functions)} callers "
            f"(< {ANY_FUNCTION_MIN}): list them: {sorted(reality.functions)}"
        )
    for caller in sorted(claim.functions - reality.functions):
        found.append(f"{name}: {caller} is listed but does not call it")
    if not claim.any_function:
        for caller in sorted(reality.functions - claim.functions):
            found.append(f"{name}: called by {caller}, which is not listed")
    for role in sorted(claim.roles - roles):
        found.append(f"{name}: {role} is not a role")
    if claim.roles != reality.roles and not claim.none:
        found.append(
            f"{name}: roles listed {sorted(claim.roles)}, granted EXECUTE {sorted(reality.roles)}"
        )
    if claim.trigger_tables != reality.trigger_tables and not claim.none:
        found.append(
            f"{name}: trigger tables listed {sorted(claim.trigger_tables)}, "
            f"triggers executing it on {sorted(reality.trigger_tables)}"
        )
    return found


def _without_comments(source: str) -> str:
    return re.sub(r"--[^\n]*", "", re.sub(r"/\*.*?\*/", "", source, flags=re.DOTALL))


def catalog_callers(dsn: str) -> tuple[dict[str, Reality], set[str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT n.nspname || '.' || p.proname, p.prosrc,"
            "       array(SELECT DISTINCT a.grantee::regrole::text"
            "               FROM aclexplode(p.proacl) a"
            "              WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0"
            "                AND a.grantee <> p.proowner),"
            "       array(SELECT DISTINCT t.tgrelid::regclass::text FROM pg_trigger t"
            "              WHERE t.tgfoid = p.oid)"
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname IN ('ql', 'ql_private')"
        ).fetchall()
        roles = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles")}
    bodies = {name: _without_comments(source) for name, source, _, _ in rows}
    reality = {}
    for name, _, granted, tables in rows:
        call = re.compile(rf"\b{re.escape(name)}\s*\(")
        callers = frozenset(
            other for other, body in bodies.items() if other != name and call.search(body)
        )
        reality[name] = Reality(callers, frozenset(granted), frozenset(tables))
    return reality, roles


@pytest.fixture(scope="module")
def callers(pg_cluster: Any, migrated_template: str) -> tuple[dict[str, Reality], set[str]]:
    return catalog_callers(pg_cluster.dsn(migrated_template))


def _check(files: list[SqlFile], reality: dict[str, Reality], roles: set[str]) -> list[str]:
    found: list[str] = []
    for sql_file in files:
        name = ".".join(sql_file.defined_function())
        try:
            claim = parse_claim(caller_clause(sql_file.header))
        except AssertionError as exc:
            found.append(f"{sql_file.name}: {exc}")
            continue
        found += problems(name, claim, reality[name], roles)
    return found


def test_caller_clauses_name_exactly_the_callers(
    callers: tuple[dict[str, Reality], set[str]],
) -> None:
    reality, roles = callers
    assert _check(load_functions(), reality, roles) == []


def test_the_check_catches_a_missing_a_false_and_an_unknown_caller(
    callers: tuple[dict[str, Reality], set[str]],
) -> None:
    reality, roles = callers
    files = {f.name: f for f in load_functions()}

    def edited(name: str, old: str, new: str) -> list[str]:
        text = files[name].text
        assert old in text, (name, old)
        return _check([SqlFile(name, text.replace(old, new, 1))], reality, roles)

    assert edited("apply_retry.sql", "ql.complete_lease", "ql.show_run") == [
        "ql_private.apply_retry: ql.show_run is listed but does not call it",
        "ql_private.apply_retry: called by ql.complete_lease, which is not listed",
    ]
    assert edited("ack_lease.sql", "Caller: ql_worker_ingress", "Caller: ql_runtime") == [
        "ql.ack_lease: roles listed ['ql_runtime'], granted EXECUTE ['ql_worker_ingress']"
    ]
    assert edited("ack_lease.sql", "Caller: ql_worker_ingress", "Caller: the ingress") == [
        "ack_lease.sql: unrecognised Caller: item 'the ingress' in 'the ingress'"
    ]
    assert edited("apply_retry.sql", "Caller: ", "Caller: none (") == [
        "apply_retry.sql: the Caller: clause does not end with a '.'"
    ]
