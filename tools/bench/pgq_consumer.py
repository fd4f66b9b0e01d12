"""One PgQueuer consumer process for `bench e2e` (never imported by the product).

`python -m tools.bench.pgq_consumer DSN OUT [BATCH]` runs PgQueuer's own
QueueManager (LISTEN/NOTIFY wake-up; `BATCH` = `QueueManager.run(batch_size=…)`,
jobs per dequeue, default 10 = PgQueuer's default; 1 = one job at a time) with
one entrypoint, `bench`, whose handler appends `handled_at created_at` (epoch
seconds) per job to OUT. `OUT.ready` appears once it runs; it runs until
SIGTERM. PgQueuer is installed into the bench environment only
(`pip install 'pgqueuer[psycopg]'`), never a dependency.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def _driver(dsn: str, driver: str) -> tuple[Any, Callable[[], Awaitable[None]]]:
    """PgQueuer's driver on one connection, and how to close that connection."""
    if driver == "asyncpg":
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
        conn = await asyncpg.connect(host=params.get("host"), port=params.get("port"),
                                     user=params.get("user"), database=params.get("dbname"),
                                     password=params.get("password"))  # fmt: skip
        return AsyncpgDriver(conn), conn.close
    import psycopg
    from pgqueuer.db import PsycopgDriver

    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    return PsycopgDriver(connection), connection.close


async def consume(dsn: str, out_path: str, batch_size: int = 10, driver: str = "psycopg") -> None:
    from pgqueuer import PgQueuer

    pgq_driver, close = await _driver(dsn, driver)
    pgq = PgQueuer(pgq_driver)
    out = open(out_path, "a", encoding="ascii", buffering=1)

    @pgq.entrypoint("bench")
    async def handle(job: object) -> None:
        created = job.created.timestamp()  # type: ignore[attr-defined]
        out.write(f"{time.time():.6f} {created:.6f}\n")

    loop = asyncio.get_running_loop()
    # batch_size also sizes PgQueuer's status-log buffer: at 1 every completion is
    # written on its own, which is what "one at a time" costs PgQueuer.
    task = asyncio.ensure_future(pgq.run(batch_size=batch_size))
    await asyncio.sleep(0.5)  # let the QueueManager start listening before we say so
    with open(out_path + ".ready", "w", encoding="ascii") as ready:
        ready.write("ready\n")
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        pass
    finally:
        out.close()
        await close()


def main() -> int:
    dsn, out_path = sys.argv[1], sys.argv[2]
    batch_size = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    driver = sys.argv[4] if len(sys.argv) > 4 else "psycopg"
    asyncio.run(consume(dsn, out_path, batch_size, driver))
    return 0


if __name__ == "__main__":
    sys.exit(main())
