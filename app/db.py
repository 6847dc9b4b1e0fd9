"""The database engine: SQLite (WAL, durable commits) by default, PostgreSQL when configured."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine


class Database:
    """Two doors to one database: ``write()`` for transactions that change rows, ``read()``.

    On SQLite, writers take the lock up front (``BEGIN IMMEDIATE``) so that a transaction
    never fails half-way when it upgrades from reading to writing; readers never block in WAL.
    """

    def __init__(self, url: str) -> None:
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        if self.is_sqlite:
            if self.url.database:
                Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
            self.writer = _sqlite_engine(url, immediate=True)
            self.reader = _sqlite_engine(url, immediate=False)
        else:
            self.writer = create_async_engine(url, pool_size=10, max_overflow=20)
            self.reader = self.writer

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """One transaction that commits on success and rolls back on any error."""
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    async def dispose(self) -> None:
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()


def _sqlite_engine(url: str, *, immediate: bool) -> AsyncEngine:
    engine = create_async_engine(url, pool_size=5, max_overflow=10, connect_args={"timeout": 30})

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook below emit BEGIN, not the driver.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # WAL for concurrent readers; synchronous=FULL because a 202 promises a durable row.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
