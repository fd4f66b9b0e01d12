"""`qinglong db migrate`: ordered, checksummed, single-transaction migrations (R-MIG).

One transaction under a transaction-scoped advisory lock:
  1. `bootstrap.sql` as the session user (roles, database grants; idempotent),
  2. `SET LOCAL ROLE ql_owner` so every object is owned by ql_owner,
  3. pending `migrations/NNNN_name.sql` in order, each recorded with its SHA-256
     in `ql_private.schema_migrations`; an applied file whose checksum changed
     refuses the whole run before anything is applied,
  4. every `functions/*.sql` re-applied (CREATE OR REPLACE), then its function's
     catalog comment set from the file's header (`SqlFile.header`): the header is
     the one source, no file writes `COMMENT ON FUNCTION` itself.
A second concurrent migrate waits on the lock, then finds nothing pending.
Re-running is a no-op: nothing new is recorded and the functions are identical.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

# Any fixed 64-bit key; the same on every replica so concurrent migrates serialize.
MIGRATE_LOCK_KEY = 0x514C_4D49_4752_4154  # "QLMIGRAT"
MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# The function a file in functions/ defines: `CREATE [OR REPLACE] FUNCTION schema.name(`
# at the start of a line (a header line starts with `--`, so it never matches).
FUNCTION_CREATE = re.compile(
    r"^CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)\s*\(",
    re.IGNORECASE | re.MULTILINE,
)

SCHEMA_MIGRATIONS_DDL = """
CREATE SCHEMA IF NOT EXISTS ql_private AUTHORIZATION ql_owner;
CREATE TABLE IF NOT EXISTS ql_private.schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    checksum    text NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
    applied_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


# Landed migrations whose leading comment block was later reworded, with the
# checksum databases recorded when they applied the original. Nothing after that
# block changed: `SqlFile.body_checksum` of the current text equals the landed
# one (tests/py/test_migrate.py pins it), so such a database is up to date and
# `migrate` only re-records the checksum. Any other checksum change is refused.
REWORDED_HEADERS: dict[str, str] = {
    # The header named a tracker item instead of the target it stated.
    "0005_idle_view.sql": "37f8e63cb09f707790f24121c30c5227da21f7846fab19843973fcab31560569",
}


class MigrationError(RuntimeError):
    """Migrations cannot be applied as they are; nothing was changed."""


@dataclass(frozen=True)
class SqlFile:
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def body_checksum(self) -> str:
        """SHA-256 of everything after the leading comment block (the statements)."""
        lines = self.text.splitlines(keepends=True)
        start = 0
        while start < len(lines) and (
            not lines[start].strip() or lines[start].lstrip().startswith("--")
        ):
            start += 1
        return hashlib.sha256("".join(lines[start:]).encode("utf-8")).hexdigest()

    @property
    def header(self) -> str:
        """A function file's contract: its leading run of `--` lines, up to the first
        line that does not start with `--` (a blank line ends it too). Each line loses
        the `--` and one space after it; trailing spaces and the blank lines at both
        ends go; the line breaks and the indentation beyond that one space stay. This
        exact text becomes the function's catalog comment (`COMMENT ON FUNCTION`)."""
        header: list[str] = []
        for line in self.text.splitlines():
            if not line.startswith("--"):
                break
            text = line[2:]
            header.append((text[1:] if text.startswith(" ") else text).rstrip())
        return "\n".join(header).strip("\n")

    def defined_function(self) -> tuple[str, str]:
        """(schema, name) of the one function a function file creates, named as the file."""
        found = FUNCTION_CREATE.findall(self.text)
        if len(found) != 1:
            raise MigrationError(
                f"{self.name}: a function file creates exactly one function, this one "
                f"creates {len(found)}: {', '.join('.'.join(f) for f in found) or 'none'}"
            )
        schema, name = found[0]
        if f"{name}.sql" != self.name:
            raise MigrationError(
                f"{self.name}: creates {schema}.{name}; a function file is named after its function"
            )
        if not self.header:
            raise MigrationError(
                f"{self.name}: no header comment (the leading `--` lines "
                "stating the function's contract)"
            )
        return schema, name

    @property
    def version(self) -> int:
        match = MIGRATION_NAME.match(self.name)
        if match is None:
            raise MigrationError(f"migration file name {self.name!r} is not NNNN_name.sql")
        return int(match.group(1))


@dataclass(frozen=True)
class MigrationStatus:
    name: str
    checksum: str
    state: str  # applied | reworded | pending | modified | missing

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "checksum": self.checksum, "state": self.state}


@dataclass(frozen=True)
class MigrateResult:
    applied: list[str]
    functions: int
    dry_run: bool

    def as_json(self) -> dict[str, object]:
        return {"applied": self.applied, "functions": self.functions, "dryRun": self.dry_run}


def _sql_dir(sub: str) -> Traversable:
    return resources.files("qinglong.db").joinpath(sub)


def load_migrations() -> list[SqlFile]:
    files = [
        SqlFile(entry.name, entry.read_text(encoding="utf-8"))
        for entry in _sql_dir("migrations").iterdir()
        if entry.name.endswith(".sql")
    ]
    files.sort(key=lambda f: f.version)
    versions = [f.version for f in files]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a version number")
    return files


def load_functions() -> list[SqlFile]:
    files = [
        SqlFile(entry.name, entry.read_text(encoding="utf-8"))
        for entry in _sql_dir("functions").iterdir()
        if entry.name.endswith(".sql")
    ]
    # Helpers other files depend on sort first by an explicit NN_ prefix-free rule:
    # files are applied in name order after those listed in functions/ORDER.
    order = _function_order()
    files.sort(key=lambda f: (order.get(f.name, len(order)), f.name))
    return files


def _function_order() -> dict[str, int]:
    order_file = _sql_dir("functions").joinpath("ORDER")
    if not order_file.is_file():
        return {}
    names = [
        line.strip()
        for line in order_file.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return {name: index for index, name in enumerate(names)}


def _bootstrap_sql() -> str:
    return _sql_dir("bootstrap.sql").read_text(encoding="utf-8")


def _applied(conn: psycopg.Connection) -> dict[str, str]:
    exists = conn.execute(
        "SELECT to_regclass('ql_private.schema_migrations') IS NOT NULL"
    ).fetchone()
    if not exists or not exists[0]:
        return {}
    rows = conn.execute("SELECT name, checksum FROM ql_private.schema_migrations").fetchall()
    return {name: checksum for name, checksum in rows}


def plan(applied: dict[str, str], migrations: list[SqlFile]) -> list[MigrationStatus]:
    statuses: list[MigrationStatus] = []
    known = {m.name for m in migrations}
    for migration in migrations:
        recorded = applied.get(migration.name)
        if recorded is None:
            state = "pending"
        elif recorded == migration.checksum:
            state = "applied"
        elif REWORDED_HEADERS.get(migration.name) == recorded:
            state = "reworded"  # applied; only its header comment changed since
        else:
            state = "modified"
        statuses.append(MigrationStatus(migration.name, migration.checksum, state))
    for name, checksum in sorted(applied.items()):
        if name not in known:
            statuses.append(MigrationStatus(name, checksum, "missing"))
    return statuses


def _refuse_drift(statuses: list[MigrationStatus]) -> None:
    modified = [s.name for s in statuses if s.state == "modified"]
    if modified:
        raise MigrationError(
            "applied migration(s) changed since they were applied: "
            + ", ".join(modified)
            + " — migrations are immutable; add a new numbered file instead"
        )
    missing = [s.name for s in statuses if s.state == "missing"]
    if missing:
        raise MigrationError(
            "database has migrations this release does not know: " + ", ".join(missing)
        )


def status(dsn: str) -> list[MigrationStatus]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return plan(_applied(conn), load_migrations())


def bootstrap(dsn: str) -> None:
    """Run the bootstrap alone: roles and the database's grants. For a database
    copied from a migrated template (CREATE DATABASE ... TEMPLATE copies the
    schema but not the database ACL, so the copy would keep PUBLIC's CONNECT)."""
    import psycopg

    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute(_bootstrap_sql())


def migrate(dsn: str, *, dry_run: bool = False) -> MigrateResult:
    """Apply pending migrations and re-apply functions, atomically."""
    import psycopg

    migrations = load_migrations()
    functions = load_functions()
    with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=dry_run):
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK_KEY,))
        conn.execute(_bootstrap_sql())
        conn.execute("SET LOCAL ROLE ql_owner")
        conn.execute("SET LOCAL search_path = pg_catalog, pg_temp")
        conn.execute("SET LOCAL check_function_bodies = on")
        conn.execute(SCHEMA_MIGRATIONS_DDL)
        statuses = plan(_applied(conn), migrations)
        _refuse_drift(statuses)
        pending = {s.name for s in statuses if s.state == "pending"}
        for reworded in (s for s in statuses if s.state == "reworded"):
            conn.execute(
                "UPDATE ql_private.schema_migrations SET checksum = %s WHERE name = %s",
                (reworded.checksum, reworded.name),
            )
        applied: list[str] = []
        for migration in migrations:
            if migration.name not in pending:
                continue
            _execute_file(conn, migration)
            conn.execute(
                "INSERT INTO ql_private.schema_migrations (version, name, checksum)"
                " VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
            applied.append(migration.name)
        for function in functions:
            _execute_file(conn, function)
            _comment_function(conn, function)
    return MigrateResult(applied=applied, functions=len(functions), dry_run=dry_run)


def _execute_file(conn: psycopg.Connection, sql_file: SqlFile) -> None:
    import psycopg

    try:
        # A file is a script of many statements: run it through the simple query
        # protocol (no parameters), exactly as psql would.
        conn.execute(sql_file.text.encode("utf-8"), prepare=False)
    except psycopg.Error as exc:
        raise MigrationError(f"{sql_file.name}: {exc}") from exc


def _comment_function(conn: psycopg.Connection, sql_file: SqlFile) -> None:
    """`COMMENT ON FUNCTION` the file's one function with its header, the signature
    read from the catalog (so no file spells it a second time)."""
    from psycopg import sql

    schema, name = sql_file.defined_function()
    signatures = [
        row[0]
        for row in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p"
            " JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND p.proname = %s",
            (schema, name),
        ).fetchall()
    ]
    if len(signatures) != 1:
        raise MigrationError(
            f"{sql_file.name}: {len(signatures)} functions named "
            f"{schema}.{name} in the catalog, one expected (an overload "
            "left behind must be dropped by a migration)"
        )
    # The signature is the catalog's own regprocedure text (quoted by PostgreSQL);
    # the header goes in as a quoted literal, never spliced.
    conn.execute(
        sql.SQL("COMMENT ON FUNCTION {} IS {}").format(
            sql.SQL(signatures[0]), sql.Literal(sql_file.header)
        )
    )
