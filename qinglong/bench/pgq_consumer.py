"""One PgQueuer consumer process for `bench e2e` (never imported by the product).

`python -m qinglong.bench.pgq_consumer DSN OUT` runs PgQueuer's own
QueueManager (its defaults: LISTEN/NOTIFY wake-up, batch dequeue of 10) with
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


async def consume(dsn: str, out_path: str) -> None:
    import psycopg
    from pgqueuer import PgQueuer
    from pgqueuer.db import PsycopgDriver

    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    pgq = PgQueuer(PsycopgDriver(connection))
    out = open(out_path, "a", encoding="ascii", buffering=1)

    @pgq.entrypoint("bench")
    async def handle(job: object) -> None:
        created = job.created.timestamp()  # type: ignore[attr-defined]
        out.write(f"{time.time():.6f} {created:.6f}\n")

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(pgq.run())
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
        await connection.close()


def main() -> int:
    dsn, out_path = sys.argv[1], sys.argv[2]
    asyncio.run(consume(dsn, out_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
