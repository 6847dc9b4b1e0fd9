"""The database engine: SQLite (WAL, durable commits) by default, PostgreSQL when configured."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.batching import Batcher, Groups

A = TypeVar("A")
T = TypeVar("T")

#: One group of a batched write or read: every caller's argument in, one result (or
#: exception) per argument out; synchronous, inside the batch's transaction or snapshot.
SyncOperation = Callable[[Connection, Sequence[A]], Sequence[T | BaseException]]


class Database:
    """The one way into the database: ``write()`` for a transaction that changes rows, ``read()``
    for one that does not; ``write_many`` and ``read_many`` batch concurrent callers' work into
    one of those (group commit), and ``read_sync`` runs a synchronous read in one.

    On SQLite, writers take the lock up front (``BEGIN IMMEDIATE``) so that a transaction never
    fails half-way when it upgrades from reading to writing; readers never block in WAL; every
    process on one file waits its turn at the write lock through SQLite's own ``busy_timeout``.
    PostgreSQL needs no more than its own row locks: every status change is a conditional
    ``UPDATE`` (``app.invites.transitions``).
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
            # A connection the server closed (a restart, a failover) is replaced at checkout,
            # not handed to a request that would fail on it.
            self.writer = create_async_engine(
                url, pool_size=10, max_overflow=20, pool_pre_ping=True
            )
            self.reader = self.writer
        # A durable commit (an fsync on SQLite) is the write path's cost: concurrent callers
        # share one transaction, and each returns only after it committed.
        self._group_commit = Batcher(self._commit_groups, isolate_failures=True)
        self._group_read = Batcher(self._read_groups, isolate_failures=False)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """One transaction that commits on success and rolls back on any error."""
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    async def write_many(self, operation: SyncOperation[A, T], argument: A) -> T:
        """Group commit: run ``operation`` on ``argument`` with other callers' in one transaction.

        Callers of the same operation in a batch are handed over together (one statement for
        all of them); the result is this caller's, returned after the commit.
        """
        return cast(T, await self._group_commit.submit(operation, argument))

    async def read_many(self, operation: SyncOperation[A, T], argument: A) -> T:
        """``write_many`` for reads: callers of the same moment share one snapshot (and one
        statement per operation); a batch that fails fails all its callers alike."""
        return cast(T, await self._group_read.submit(operation, argument))

    async def read_sync(self, read: Callable[..., T], *args: Any) -> T:
        """One synchronous ``read(conn, *args)`` in one snapshot (a read of several statements)."""
        async with self.read() as conn:
            return await conn.run_sync(read, *args)

    async def _commit_groups(self, groups: Groups) -> list[Sequence[Any]]:
        async with self.write() as conn:
            return await conn.run_sync(_run_groups, groups)

    async def _read_groups(self, groups: Groups) -> list[Sequence[Any]]:
        async with self.read() as conn:
            return await conn.run_sync(_run_groups, groups)

    async def dispose(self) -> None:
        await self._group_commit.close()
        await self._group_read.close()
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()


#: SQLite's words for "the file cannot be used now" (as opposed to a statement that failed).
_SQLITE_UNAVAILABLE = ("database is locked", "unable to open database file", "disk i/o error")


def unavailable(exc: Exception) -> bool:
    """Whether ``exc`` says the database cannot be reached or used right now (a restart, a
    shutdown, a lost connection, a lock held too long), so the same request may work in a
    moment; a failed statement (a missing table, a broken constraint) is not that. A connection
    refused or reset while connecting reaches us as the socket's own ``ConnectionError``."""
    if isinstance(exc, ConnectionError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated or isinstance(exc, InterfaceError):
        return True
    sqlstate = str(getattr(exc.orig, "sqlstate", None) or "")
    if sqlstate:  # PostgreSQL: connection exception (08), operator intervention (57)
        return sqlstate.startswith(("08", "57"))
    return str(exc.orig).lower().startswith(_SQLITE_UNAVAILABLE)


def _run_groups(conn: Connection, groups: Groups) -> list[Sequence[Any]]:
    """Every group's synchronous operation on ``conn``, in order: each group's outcomes."""
    return [operation(conn, arguments) for operation, arguments in groups]


def _sqlite_engine(url: str, *, immediate: bool) -> AsyncEngine:
    engine = create_async_engine(url, pool_size=5, max_overflow=10, connect_args={"timeout": 30})
    _sqlite_settings(engine.sync_engine, immediate=immediate)
    return engine


def _sqlite_settings(engine: Engine, *, immediate: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook below emit BEGIN, not the driver.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # WAL for concurrent readers; synchronous=FULL because a 202 promises a durable row.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        # A deleted row's bytes are overwritten, not left in free space: an erased address
        # (``python -m app esquecer``) must be in no page of the file.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
