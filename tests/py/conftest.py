"""Shared fixtures: one real throwaway PostgreSQL per test session.

`pg_cluster` starts the cluster (or uses QL_TEST_DSN), `migrated_template` is a
database migrated once, and `db_dsn` gives each test its own fresh copy of it
(CREATE DATABASE … TEMPLATE), so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from qinglong.db.migrator import bootstrap
from qinglong.throwaway_postgres import ThrowawayPostgres

_db_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[ThrowawayPostgres]:
    cluster = ThrowawayPostgres()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.cleanup()


@pytest.fixture(scope="session")
def migrated_template(pg_cluster: ThrowawayPostgres) -> str:
    from qinglong.db.migrator import migrate

    name = f"ql_template_{os.getpid()}"
    pg_cluster.drop_database(name)
    dsn = pg_cluster.create_database(name)
    migrate(dsn)
    return name


@pytest.fixture
def db_name(pg_cluster: ThrowawayPostgres, migrated_template: str) -> Iterator[str]:
    name = f"ql_test_{os.getpid()}_{next(_db_counter)}"
    dsn = pg_cluster.create_database(name, template=migrated_template)
    # The copy's database ACL is PUBLIC's default: give it the real one.
    bootstrap(dsn)
    try:
        yield name
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def db_dsn(pg_cluster: ThrowawayPostgres, db_name: str) -> str:
    return pg_cluster.dsn(db_name)


@pytest.fixture
def empty_db_dsn(pg_cluster: ThrowawayPostgres) -> Iterator[str]:
    """A database with nothing migrated (for migration tests)."""
    name = f"ql_empty_{os.getpid()}_{next(_db_counter)}"
    dsn = pg_cluster.create_database(name)
    try:
        yield dsn
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture(scope="session")
def run_as_user() -> str | None:
    """SPEC §11: whom `--execute` runs commands as in this suite. As root (CI): an
    unprivileged user (`qlrun`, created if missing, else `nobody`); otherwise
    None (the worker's own user, the development mode)."""
    from tests.py.run_as_support import run_as_user as user

    return user()
