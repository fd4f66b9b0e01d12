"""`qinglong.db.api` is the whole Python -> SQL boundary and matches `pg_proc` exactly.

Adding, renaming or reordering a `ql.` function or one of its parameters without
the API module following fails here: every `ql.` function has exactly one
statement and one typed Python function of the same name, whose SQL names every
parameter in order with its declared type, and whose keyword-only arguments are
those parameters without `p_`, in the same order, optional exactly where the SQL
has a default. A scan of the sources proves no other Python code calls a `ql.`
function with hand-built SQL.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"^SELECT ql\.(?P<function>[a-z_]+)\((?P<args>.*)\)$")
ARG = re.compile(r"^p_(?P<name>[a-z_]+) => %\((?P<key>[a-z_]+)\)s::(?P<type>[a-z ]+(?:\[\])?)$")


@dataclass(frozen=True)
class SqlSignature:
    names: tuple[str, ...]
    types: tuple[str, ...]
    defaults: int


def _catalog(dsn: str) -> dict[str, SqlSignature]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.proname, coalesce(p.proargnames, '{}'::text[]),"
            "       array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) t),"
            "       p.pronargdefaults, coalesce(p.proargmodes, '{}'::\"char\"[])::text[]"
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'ql' ORDER BY 1").fetchall()
    names = [row[0] for row in rows]
    assert len(names) == len(set(names)), f"overloaded ql. functions: {names}"
    for name, _, _, _, modes in rows:
        assert set(modes) <= {"i"}, f"ql.{name} has OUT/INOUT/VARIADIC parameters: {modes}"
    return {name: SqlSignature(tuple(argnames), tuple(types), defaults)
            for name, argnames, types, defaults, _ in rows}


def _parsed(statement: api.Statement[Any]) -> tuple[str, list[re.Match[str]]]:
    match = CALL.match(statement.sql)
    assert match is not None, statement.sql
    args = match["args"]
    parsed = [ARG.match(part) for part in args.split(", ")] if args else []
    assert all(parsed), f"{statement.function}: every argument is p_x => %(x)s::type"
    return match["function"], parsed  # type: ignore[return-value]


@pytest.fixture(scope="module")
def catalog(pg_cluster: Any, migrated_template: str) -> dict[str, SqlSignature]:
    return _catalog(pg_cluster.dsn(migrated_template))


def test_every_ql_function_has_exactly_one_statement(catalog: dict[str, SqlSignature]) -> None:
    statements = api.statements()
    assert sorted(statements) == sorted(catalog), (
        f"only in SQL: {sorted(set(catalog) - set(statements))}; "
        f"only in the API module: {sorted(set(statements) - set(catalog))}")


def test_statements_name_every_parameter_in_order_with_its_type(
        catalog: dict[str, SqlSignature]) -> None:
    for name, statement in api.statements().items():
        function, args = _parsed(statement)
        assert function == name
        sql = catalog[name]
        assert tuple(f"p_{a['name']}" for a in args) == sql.names, name
        assert tuple(a["type"] for a in args) == sql.types, name
        assert all(a["key"] == a["name"] for a in args), name


def test_python_functions_take_the_parameters_keyword_only(
        catalog: dict[str, SqlSignature]) -> None:
    for name, statement in api.statements().items():
        function = getattr(api, name)
        params = list(inspect.signature(function).parameters.values())
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), name
        sql = catalog[name]
        assert tuple(f"p_{p.name}" for p in params) == sql.names, name
        optional = [p.name for p in params if p.default is not inspect.Parameter.empty]
        assert optional == [p.name for p in params[len(params) - sql.defaults:]], name
        # Built with placeholder values, the call binds exactly the statement's keys.
        call = function(**{p.name: _sample(t) for p, t in zip(params, sql.types, strict=True)})
        assert call.statement is statement
        assert list(call.params) == [a["key"] for a in _parsed(statement)[1]], name


def _sample(sql_type: str) -> Any:
    return {"text": "x", "bytea": b"x", "bigint": 1, "integer": 1, "jsonb": {}, "uuid": "x",
            "boolean": True, "text[]": ["x"], "bytea[]": [b"x"]}[sql_type]


def test_the_check_catches_a_renamed_parameter(catalog: dict[str, SqlSignature]) -> None:
    """The comparison is not vacuous: a catalog where one parameter moved fails it."""
    sql = catalog["pull_offer"]
    swapped = (sql.names[1], sql.names[0], *sql.names[2:])
    broken = {**catalog, "pull_offer": SqlSignature(swapped, sql.types, sql.defaults)}
    with pytest.raises(AssertionError):
        test_statements_name_every_parameter_in_order_with_its_type(broken)
    with pytest.raises(AssertionError):
        test_every_ql_function_has_exactly_one_statement({**catalog, "new_fn": sql})


# A `ql.` function call written as SQL text anywhere else in Python.
HAND_BUILT = re.compile(r"\bSELECT\b[^;]*?\bql\.[a-z_]+\(", re.IGNORECASE | re.DOTALL)


def _python_sources() -> list[Path]:
    folders = ("db", "service", "worker", "schemas", "qinglong", "tools", "tests")
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def test_no_python_outside_the_api_module_calls_ql_functions_in_sql() -> None:
    offenders = []
    for path in _python_sources():
        if path == ROOT / "db" / "api.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
                                    | ast.ClassDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings and HAND_BUILT.search(node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "use qinglong.db.api: " + ", ".join(offenders)


def test_a_call_never_shows_its_parameters() -> None:
    """Calls carry secret and token digests: their repr (logs, tracebacks) must not."""
    secret, token = bytes(range(32)), bytes(range(32, 64))
    call = api.pull_offer(credential_id="c" * 16, secret_digest=secret, worker_id="w",
                          session_id="s", generation=1, offer_id="o", token_digest=token)
    shown = repr(call) + str(call)
    assert call.params["secret_digest"] == secret
    for value in (secret, token):
        assert repr(value) not in shown and value.hex() not in shown
