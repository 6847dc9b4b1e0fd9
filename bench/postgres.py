"""``python -m bench --db postgresql``: the same scenarios' services on a private PostgreSQL.

One cluster for the run (``tests.services.PostgresServer``, with fsync on), a fresh database per
scenario migrated by the app's own migrations, and two web processes and two workers per
scenario (``Stack.webs``, ``Stack.workers``). The bench's own reads (``bench.stack.db_rows``)
go through asyncpg on a thread of their own, so the scenarios' synchronous polling works
unchanged.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass

import asyncpg
from sqlalchemy.engine import make_url

from app.config import Settings
from bench import procs
from bench.stack import Stack
from tests.services import PostgresServer


def _dsn(url: str) -> str:
    """A SQLAlchemy ``postgresql+asyncpg://`` URL as asyncpg's own DSN."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _numbered(query: str) -> str:
    """SQLite's ``?`` placeholders as PostgreSQL's ``$1, $2…`` (the bench's queries have no
    question mark in a literal)."""
    count = iter(range(1, 1000))
    return re.sub(r"\?", lambda _match: f"${next(count)}", query)


class _Reader:
    """An event loop on a thread of its own with one small asyncpg pool per database: the bench
    polls rows from synchronous code (and from wrk's ``until`` threads) while its own loop runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.pools: dict[str, asyncpg.Pool] = {}

    def rows(self, url: str, query: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        future = asyncio.run_coroutine_threadsafe(self._rows(url, query, params), self.loop)
        return future.result(60)

    async def _rows(
        self, url: str, query: str, params: tuple[object, ...]
    ) -> list[tuple[object, ...]]:
        if url not in self.pools:
            self.pools[url] = await asyncpg.create_pool(_dsn(url), min_size=1, max_size=3)
        records = await self.pools[url].fetch(_numbered(query), *params)
        return [tuple(record) for record in records]

    async def _close(self) -> None:
        for pool in self.pools.values():
            await pool.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


_reader: list[_Reader] = []


def pg_rows(url: str, query: str, *params: object) -> list[tuple[object, ...]]:
    if not _reader:
        _reader.append(_Reader())
    return _reader[0].rows(url, query, params)


def _close_reader() -> None:
    if _reader:
        _reader.pop().close()


def database_name(scenario: str) -> str:
    return "bench_" + re.sub(r"[^a-z0-9_]", "_", scenario.lower())


@dataclass
class PgStack(Stack):
    """Redis and the SMTP sink as on SQLite, plus the cluster; two web processes (one port
    each) and two workers per scenario."""

    webs: int = 2
    workers: int = 2
    plain_insert = "postgresql insert"
    server: PostgresServer | None = None

    def start(self) -> None:
        self.server = PostgresServer(procs.free_port(), fsync=True)
        self.server.start()
        super().start()

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            _close_reader()
            if self.server is not None:
                self.server.stop()
                self.server = None

    def env(self, name: str) -> dict[str, str]:
        env = super().env(name)
        assert self.server is not None
        env["DATABASE_URL"] = f"{self.server.base_url}/{database_name(name)}"
        return env

    def fresh_database(self, name: str) -> tuple[dict[str, str], Settings]:
        assert self.server is not None
        self.server.create_database(database_name(name))
        return super().fresh_database(name)

    def versions(self) -> dict[str, str]:
        """The server's own version and the settings that decide a commit's cost."""
        assert self.server is not None
        url = f"{self.server.base_url}/postgres"
        settings = ", ".join(
            f"{name} {pg_rows(url, f'SHOW {name}')[0][0]}"
            for name in ("fsync", "synchronous_commit", "wal_sync_method", "shared_buffers")
        )
        return {
            "postgresql": str(pg_rows(url, "SHOW server_version")[0][0]),
            "postgresql settings": settings,
        }
