"""The database engine: SQLite (WAL, durable commits) by default, PostgreSQL when configured."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from app.batching import Batcher, Groups
from app.storage.sync_lane import SyncLane, run_groups

A = TypeVar("A")
T = TypeVar("T")

#: One group of a batched write or read: every caller's argument in, one result (or
#: exception) per argument out; synchronous, inside the batch's transaction or snapshot.
SyncOperation = Callable[[Connection, Sequence[A]], Sequence[T | BaseException]]


class Database:
    """Two doors to one database: ``write()`` for transactions that change rows, ``read()``.

    On SQLite, writers take the lock up front (``BEGIN IMMEDIATE``) so that a transaction
    never fails half-way when it upgrades from reading to writing; readers never block in WAL.

    The hot paths write through ``write_many`` (group commit): concurrent
    callers share one durable transaction, and each returns only after it committed.

    Hot reads share one snapshot the same way (``read_many``).

    On SQLite both run on a thread of their own with the synchronous driver
    (``app.storage.sync_lane``): a whole batch is one hop from the event loop, where the async
    driver made one hop per statement and, under load, each hop waited its turn in a busy
    loop (measured: 41 of 49 ms per request at 300 requests/s). On PostgreSQL the same
    synchronous operations run through ``AsyncConnection.run_sync``.
    """

    def __init__(self, url: str) -> None:
        self.url = make_url(url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        if self.is_sqlite:
            if self.url.database:
                Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
            self.writer = _sqlite_engine(url, immediate=True)
            self.reader = _sqlite_engine(url, immediate=False)
            self.write_lane: SyncLane | None = SyncLane(
                _sync_sqlite_engine(url, immediate=True), "group-commit"
            )
            self.read_lane: SyncLane | None = SyncLane(
                _sync_sqlite_engine(url, immediate=False), "group-read"
            )
        else:
            self.writer = create_async_engine(url, pool_size=10, max_overflow=20)
            self.reader = self.writer
            self.write_lane = self.read_lane = None
        self._turns = WriterTurns(self.url.database) if self.is_sqlite else None
        # On SQLite the batch waits for this process's write turn before it is formed, so the
        # callers that arrive meanwhile share its commit: with two writing processes the turn is
        # busy most of the time (two workers: each waited about as long as the other held it).
        self._group_commit: Batcher[Connection] = Batcher(
            None,
            isolate_failures=True,
            run_groups=self._commit_groups,
            hold=self._turns.turn if self._turns is not None else None,
        )
        self._group_read: Batcher[Connection] = Batcher(
            None, isolate_failures=False, run_groups=self._read_groups
        )

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """One transaction that commits on success and rolls back on any error."""
        if self._turns is None:
            async with self.writer.begin() as conn:
                yield conn
            return
        async with self._turns.turn(), self.writer.begin() as conn:
            yield conn

    async def write_many(self, operation: SyncOperation[A, T], argument: A) -> T:
        """Group commit: run ``operation`` on ``argument`` with other callers' in one transaction.

        Callers of the same operation in a batch are handed over together (one statement for
        all of them); the result is this caller's, returned after the commit.
        """
        return cast(T, await self._group_commit.submit(operation, argument))

    async def _commit_groups(self, groups: Groups) -> list[Sequence[Any]]:
        """One transaction for a whole batch; on SQLite on the write lane, while this process
        holds its turn at the write lock (taken by the batcher: ``hold``)."""
        if self.write_lane is None:
            async with self.writer.begin() as conn:
                return await conn.run_sync(run_groups, groups)
        return await self.write_lane.run(groups, transaction=True)

    async def read_many(self, operation: SyncOperation[A, T], argument: A) -> T:
        """``write_many`` for reads: callers of the same moment share one snapshot (and one
        statement per operation); a batch that fails fails all its callers alike."""
        return cast(T, await self._group_read.submit(operation, argument))

    async def read_sync(self, read: Callable[..., T], *args: Any) -> T:
        """One synchronous ``read(conn, *args)`` in one snapshot, on SQLite in one hop to the
        read lane (for a read of several statements that its caller already batches)."""
        [[result]] = await self._read_groups([(_one_call(read, args), [None])])
        return cast(T, result)

    async def _read_groups(self, groups: Groups) -> list[Sequence[Any]]:
        if self.read_lane is None:
            async with self.reader.connect() as conn:
                return await conn.run_sync(run_groups, groups)
        return await self.read_lane.run(groups, transaction=False)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    async def dispose(self) -> None:
        await self._group_commit.close()
        await self._group_read.close()
        for lane in (self.write_lane, self.read_lane):
            if lane is not None:
                await lane.close()
        await self.writer.dispose()
        if self._turns is not None:
            self._turns.close()
        if self.reader is not self.writer:
            await self.reader.dispose()


class WriterTurns:
    """Fair turns at SQLite's single write lock for every process on one database file.

    SQLite's own busy handler polls with growing sleeps, so a process that writes in a tight
    loop (the web under load) starves another one (the worker) for seconds. Writers take turns
    on two ``flock``s of files next to the database instead: a turnstile, then the lock itself,
    letting go of the turnstile as soon as they hold the lock. A process that wants the lock
    again right after releasing it must pass the turnstile, which a waiting process holds, so
    turns alternate between processes. Within a process, an ``asyncio.Lock`` keeps one waiter.

    Both are taken with ``LOCK_NB`` and polled (``POLL_FIRST_SECONDS`` doubling up to
    ``POLL_MAX_SECONDS``), at most ``TURN_TIMEOUT_SECONDS`` in all, then ``TimeoutError``.
    Never a blocking ``flock`` in a thread: such a thread cannot be woken or cancelled, and
    when the holder never let go (a task dropped at shutdown) the event loop's executor waited
    for it for ever, which hung the process (and the test run) at exit.
    """

    def __init__(self, database: str | None) -> None:
        usable = database and database != ":memory:"
        self._path = f"{database}.writelock" if usable else None
        self._turnstile_path = f"{database}.writeturn" if usable else None
        self._fd: int | None = None
        self._turnstile: int | None = None
        self._local = asyncio.Lock()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        async with self._local:
            if self._path is None or self._turnstile_path is None:
                yield
                return
            if self._fd is None:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            if self._turnstile is None:
                self._turnstile = os.open(self._turnstile_path, os.O_RDWR | os.O_CREAT, 0o600)
            fd, turnstile = self._fd, self._turnstile
            deadline = time.monotonic() + TURN_TIMEOUT_SECONDS
            await _take(turnstile, deadline)
            try:
                await _take(fd, deadline)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._fd, self._turnstile):
            if fd is not None:
                os.close(fd)
        self._fd = self._turnstile = None


TURN_TIMEOUT_SECONDS = 30.0  # as long as SQLite's own busy_timeout
POLL_FIRST_SECONDS = 0.0002
POLL_MAX_SECONDS = 0.002


async def _take(fd: int, deadline: float) -> None:
    """``flock(fd, LOCK_EX)`` without blocking the loop or a thread: poll until ``deadline``."""
    delay = POLL_FIRST_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no turn at the database write lock in {TURN_TIMEOUT_SECONDS:g} s"
                ) from None
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MAX_SECONDS)


def _one_call(function: Callable[..., Any], args: tuple[Any, ...]) -> Callable[..., list[Any]]:
    def operation(conn: Connection, _arguments: Sequence[None]) -> list[Any]:
        return [function(conn, *args)]

    return operation


def _sqlite_engine(url: str, *, immediate: bool) -> AsyncEngine:
    engine = create_async_engine(url, pool_size=5, max_overflow=10, connect_args={"timeout": 30})
    _sqlite_settings(engine.sync_engine, immediate=immediate)
    return engine


def _sync_sqlite_engine(url: str, *, immediate: bool) -> Engine:
    """A lane's engine: the standard library's driver, one connection, used only on the
    lane's thread (which opens it: ``StaticPool`` hands that one connection out)."""
    sync_url = make_url(url).set(drivername="sqlite")
    engine = create_engine(
        sync_url, poolclass=StaticPool, connect_args={"timeout": 30, "check_same_thread": False}
    )
    _sqlite_settings(engine, immediate=immediate)
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
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
