"""The header of `db/functions/<name>.sql` is the one source of its function's comment.

`migrate` sets `COMMENT ON FUNCTION` from each function file's leading `--` block
(`SqlFile.header`); no file writes it by hand. Against the catalog of a freshly
migrated database: every function of a project schema has its file (or is one of
the trigger functions that live in their landed migration), its comment is exactly
that file's header, and every function file creates exactly one function, named as
the file, under a non-empty header. A header edited without re-migrating, or a
function without a file, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db.migrator import MigrationError, SqlFile, load_functions, migrate

ROOT = Path(__file__).resolve().parents[2]

# Trigger functions created (and commented) by landed migrations, which are
# immutable; they have no function file. Nothing may join this set: a new
# function gets its own file.
MIGRATION_ONLY = frozenset(
    {
        "ql_private.refuse_revision_change",
        "ql_private.project_default_pool",
        "ql_private.task_default_pool",
        "ql_private.run_default_pool",
    }
)


def catalog_comments(dsn: str) -> dict[str, tuple[str, str | None]]:
    """{schema.name: (return type, comment)} of every function outside the system
    schemas that no extension owns."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT n.nspname || '.' || p.proname, format_type(p.prorettype, NULL),"
            "       obj_description(p.oid, 'pg_proc')"
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'"
            "   AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass"
            "                   AND d.objid = p.oid AND d.deptype = 'e')"
        ).fetchall()
    names = [row[0] for row in rows]
    assert len(names) == len(set(names)), f"overloaded functions: {sorted(names)}"
    return {name: (rettype, comment) for name, rettype, comment in rows}


def mismatches(catalog: dict[str, tuple[str, str | None]], files: list[SqlFile]) -> list[str]:
    by_function = {".".join(f.defined_function()): f for f in files}
    problems = [
        f"{name}: defined by {by_function[name].name} but not in the catalog"
        for name in sorted(set(by_function) - set(catalog))
    ]
    for name, (rettype, comment) in sorted(catalog.items()):
        sql_file = by_function.get(name)
        if sql_file is None:
            if name not in MIGRATION_ONLY or rettype != "trigger":
                problems.append(f"{name}: no file db/functions/{name.split('.')[1]}.sql")
        elif comment != sql_file.header:
            problems.append(
                f"{name}: catalog comment is not the header of {sql_file.name}"
                " (edited without re-migrating, or a hand-written COMMENT ON)"
            )
    return problems


@pytest.fixture(scope="module")
def catalog(pg_cluster: Any, migrated_template: str) -> dict[str, tuple[str, str | None]]:
    return catalog_comments(pg_cluster.dsn(migrated_template))


def test_every_function_file_creates_one_function_under_a_header() -> None:
    files = load_functions()
    assert len(files) == len(list((ROOT / "db" / "functions").glob("*.sql")))
    for sql_file in files:
        _schema, name = sql_file.defined_function()  # raises when not exactly one, or no header
        assert sql_file.name == f"{name}.sql"
        assert sql_file.header.strip(), sql_file.name
        assert "COMMENT ON FUNCTION" not in sql_file.text.upper(), (
            f"{sql_file.name}: the comment comes from the header; no COMMENT ON in the file"
        )


def test_catalog_comment_is_the_file_header(catalog: dict[str, tuple[str, str | None]]) -> None:
    assert {name.split(".")[0] for name in catalog} == {"ql", "ql_private"}
    assert mismatches(catalog, load_functions()) == []


def test_migration_only_functions_are_triggers_of_landed_migrations(
    catalog: dict[str, tuple[str, str | None]],
) -> None:
    migrations = "\n".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "db" / "migrations").glob("*.sql"))
    )
    for name in MIGRATION_ONLY:
        assert catalog[name][0] == "trigger", name
        assert re.search(rf"^CREATE FUNCTION {re.escape(name)}\(\)", migrations, re.MULTILINE)


def test_the_check_catches_an_edited_header_and_a_function_without_file(
    catalog: dict[str, tuple[str, str | None]],
) -> None:
    files = load_functions()
    edited = [
        SqlFile(f.name, f.text.replace("-- ", "-- Edited. ", 1))
        if f.name == "parse_uuid.sql"
        else f
        for f in files
    ]
    assert mismatches(catalog, edited) == [
        "ql_private.parse_uuid: catalog comment is not the header of parse_uuid.sql"
        " (edited without re-migrating, or a hand-written COMMENT ON)"
    ]
    without = [f for f in files if f.name != "ack_lease.sql"]
    assert mismatches(catalog, without) == ["ql.ack_lease: no file db/functions/ack_lease.sql"]


def test_header_is_the_leading_comment_lines() -> None:
    text = (
        "-- ql.f() -> int\n--\n-- Purpose: it's 'quoted';\n--   indented.  \n"
        "--No space.\nCREATE OR REPLACE FUNCTION ql.f()\n-- not header\n"
    )
    sql_file = SqlFile("f.sql", text)
    assert sql_file.header == "ql.f() -> int\n\nPurpose: it's 'quoted';\n  indented.\nNo space."
    assert sql_file.defined_function() == ("ql", "f")


@pytest.mark.parametrize(
    ("name", "text", "detail"),
    [
        ("f.sql", "-- h\nSELECT 1;\n", "creates 0: none"),
        (
            "f.sql",
            "-- h\nCREATE FUNCTION ql.f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
            "create or replace function ql_private.g() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
            "creates 2: ql.f, ql_private.g",
        ),
        (
            "g.sql",
            "-- h\nCREATE FUNCTION ql.f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
            "creates ql.f; a function file is named after its function",
        ),
        (
            "f.sql",
            "\n-- h\nCREATE FUNCTION ql.f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
            "no header comment",
        ),
    ],
)
def test_function_file_shape_is_refused_clearly(name: str, text: str, detail: str) -> None:
    with pytest.raises(MigrationError, match=re.escape(detail)):
        SqlFile(name, text).defined_function()


def test_migrate_refuses_an_overloaded_function(db_dsn: str) -> None:
    """The signature comes from the catalog: two functions of the file's name are
    refused (nothing applied), never one of them commented at random."""
    with psycopg.connect(db_dsn) as conn:
        conn.execute("SET ROLE ql_owner")
        conn.execute(
            "CREATE FUNCTION ql_private.parse_uuid(p_value integer) RETURNS uuid"
            " LANGUAGE sql AS 'SELECT NULL::uuid'"
        )
        conn.execute("COMMENT ON FUNCTION ql_private.parse_uuid(text, text) IS 'before'")
        conn.commit()
    with pytest.raises(
        MigrationError,
        match=re.escape("parse_uuid.sql: 2 functions named ql_private.parse_uuid in the catalog"),
    ):
        migrate(db_dsn)
    with psycopg.connect(db_dsn) as conn:
        row = conn.execute(
            "SELECT obj_description('ql_private.parse_uuid(text, text)'::regprocedure, 'pg_proc')"
        ).fetchone()
    assert row == ("before",)
