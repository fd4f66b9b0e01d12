"""SPEC §17.2 on real servers: a pooled connection that meets a read-only server
(SQLSTATE 25006) is discarded, never reused, and a multi-host DSN with
`target_session_attrs=read-write` then lands on the server that takes writes.

Two throwaway clusters of our own (ALTER SYSTEM is cluster-wide): a "read-only"
server is one with `default_transaction_read_only = on` (what a standby or a
demoted primary answers to a write: 25006), switched on and off with a reload.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest

from qinglong.db.api import Call, Statement
from qinglong.service.config import IngressConfig
from qinglong.service.gateway import DbUnavailable, Gateway
from qinglong.service.metrics import IngressMetrics
from qinglong.throwaway_postgres import ThrowawayPostgres

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("QL_TEST_DSN")), reason="needs clusters we may switch read-only"
)

ROLE = "ql_failover_test"
DB = "ql_failover"
# A write (nextval) that also says which server and which backend answered.
WRITE: Statement[list[object]] = Statement(
    "failover_probe_write",
    "SELECT pg_catalog.jsonb_build_array(pg_catalog.inet_server_port(),"
    " pg_catalog.pg_backend_pid(), pg_catalog.nextval('public.failover_probe'))",
)
READ: Statement[list[object]] = Statement(
    "failover_probe_read",
    "SELECT pg_catalog.jsonb_build_array(pg_catalog.inet_server_port(),"
    " pg_catalog.pg_backend_pid())",
)


@dataclass
class Server:
    cluster: ThrowawayPostgres

    @property
    def port(self) -> int:
        return self.cluster.port

    def su(self) -> psycopg.Connection:
        return psycopg.connect(self.cluster.dsn(DB), autocommit=True)

    def set_read_only(self, on: bool) -> None:
        with self.su() as conn:
            if on:
                conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            else:
                conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
            conn.execute("SELECT pg_reload_conf()")
        want = "on" if on else "off"
        deadline = time.monotonic() + 10
        while True:  # the reload reaches the postmaster asynchronously
            with self.su() as conn:
                if conn.execute("SHOW default_transaction_read_only").fetchone()[0] == want:
                    return
            assert time.monotonic() < deadline, "reload did not take effect"
            time.sleep(0.05)

    def backend_alive(self, pid: int) -> bool:
        with self.su() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
        return row[0] == 1


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, Server]]:
    clusters = [ThrowawayPostgres(), ThrowawayPostgres()]
    try:
        for cluster in clusters:
            cluster.start()
            cluster.create_database(DB)
            with psycopg.connect(cluster.dsn(DB), autocommit=True) as conn:
                conn.execute(f"CREATE ROLE {ROLE} LOGIN")
                conn.execute("CREATE SEQUENCE public.failover_probe")
                conn.execute(f"GRANT USAGE ON SEQUENCE public.failover_probe TO {ROLE}")
        yield Server(clusters[0]), Server(clusters[1])
    finally:
        for cluster in clusters:
            cluster.cleanup()


def _gateway(dsn: str) -> Gateway:
    config = IngressConfig(
        dsn=dsn,
        cert_file="-",
        key_file="-",
        client_ca_file="-",
        pool_min_size=1,
        pool_max_size=1,
        acquire_timeout_ms=3000,
        connect_timeout_s=2,
    )
    return Gateway(config, IngressMetrics())


def _dsn(*ports: int, attrs: str = "read-write") -> str:
    hosts = ",".join("127.0.0.1" for _ in ports)
    return (
        f"host={hosts} port={','.join(str(p) for p in ports)} dbname={DB} user={ROLE}"
        f" target_session_attrs={attrs} connect_timeout=2"
    )


async def _write(gw: Gateway) -> tuple[int, int]:
    port, pid, _ = await gw.call(Call(WRITE, {}))
    return int(port), int(pid)


async def _read(gw: Gateway) -> tuple[int, int]:
    port, pid = await gw.call(Call(READ, {}))
    return int(port), int(pid)


def test_connection_that_met_a_read_only_server_is_never_reused(servers):
    server, _ = servers

    async def scenario() -> None:
        # "any": the new connection may land on the read-only server again, so a
        # new backend pid proves the old connection was not handed out again.
        gw = _gateway(_dsn(server.port, attrs="any"))
        await gw.open()
        try:
            _, pid = await _write(gw)
            assert (await _write(gw))[1] == pid  # one pooled connection, reused
            server.set_read_only(True)
            with pytest.raises(DbUnavailable) as refused:
                await _write(gw)
            assert refused.value.reason == "database_unavailable"
            assert gw.metrics.db_errors.value("read_only") == 1
            # Discarded: the backend that answered 25006 is gone, and the next call
            # (a read, which a read-only server still answers) runs on a new one.
            deadline = time.monotonic() + 5
            while server.backend_alive(pid):
                assert time.monotonic() < deadline, "the read-only connection was kept"
                await asyncio.sleep(0.05)
            assert (await _read(gw))[1] != pid
        finally:
            server.set_read_only(False)
            await gw.close()

    asyncio.run(scenario())


def test_multi_host_dsn_follows_the_read_write_server(servers):
    first, second = servers

    async def scenario() -> None:
        second.set_read_only(True)  # a "standby" listed first
        gw = _gateway(_dsn(second.port, first.port))
        await gw.open()
        try:
            port, pid = await _write(gw)
            assert port == first.port, "target_session_attrs=read-write skipped the standby"
            # "Switchover": the primary turns read-only, the other takes writes.
            second.set_read_only(False)
            first.set_read_only(True)
            with pytest.raises(DbUnavailable):
                await _write(gw)
            deadline = time.monotonic() + 10
            while True:  # workers retry the same intent; the pool reconnects
                try:
                    new_port, _ = await _write(gw)
                    break
                except DbUnavailable:
                    assert time.monotonic() < deadline, "no connection to the new primary"
                    await asyncio.sleep(0.1)
            assert new_port == second.port
            assert not first.backend_alive(pid)
        finally:
            first.set_read_only(False)
            second.set_read_only(False)
            await gw.close()

    asyncio.run(scenario())


def test_connection_that_lost_its_server_is_never_reused(servers):
    server, _ = servers

    async def scenario() -> None:
        gw = _gateway(_dsn(server.port))
        await gw.open()
        try:
            _, pid = await _write(gw)
            with server.su() as conn:  # the server side of the pooled connection dies
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(DbUnavailable):
                await _write(gw)
            assert gw.metrics.db_errors.value("connection") == 1
            deadline = time.monotonic() + 10
            while True:  # the worker retries the same intent; a new connection answers
                try:
                    _, new_pid = await _write(gw)
                    break
                except DbUnavailable:
                    assert time.monotonic() < deadline, "the pool did not reconnect"
                    await asyncio.sleep(0.1)
            assert new_pid != pid
        finally:
            await gw.close()

    asyncio.run(scenario())
