"""Batched writes and reads in one hop: the group commit and the shared session reads run as
synchronous operations, on SQLite on a lane thread of their own (``app.storage.sync_lane``)."""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, event, text

from app.accounts import sessions
from app.accounts.store import find_or_create_account
from app.clock import utcnow
from app.invites.records import Duplicate
from app.invites.transitions import create_invite
from app.invites.transitions.core import insert_in_order
from app.sending.outbox import outbox_values
from app.storage.database import Database
from app.storage.sync_lane import SyncLane
from app.storage.tables import outbox
from tests.fixtures import BACKEND

on_sqlite = pytest.mark.skipif(BACKEND != "sqlite", reason="the lanes are SQLite's")


def statements_on(engine: Engine) -> list[tuple[str, str]]:
    """Every statement ``engine`` runs from now on, with the name of the thread that ran it."""
    seen: list[tuple[str, str]] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append((threading.current_thread().name, statement.split()[0].upper()))

    event.listen(engine, "before_cursor_execute", before)
    return seen


@on_sqlite
async def test_a_group_commit_runs_every_statement_on_the_lane_thread_one_begin_a_batch(
    db: Database,
) -> None:
    assert db.write_lane is not None
    on_lane, on_async_writer = (
        statements_on(db.write_lane.engine),
        statements_on(db.writer.sync_engine),
    )

    emails = [f"p{n}@exemplo.com" for n in range(20)]
    changes = await asyncio.gather(
        *(create_invite(db, sender_id="s", email=e, name=None, correlation_id="c") for e in emails)
    )

    assert on_async_writer == []  # nothing of the hot path hops per statement any more
    assert {thread for thread, _ in on_lane} == {"group-commit_0"}
    begins = sum(1 for _, verb in on_lane if verb == "BEGIN")
    inserts = sum(1 for _, verb in on_lane if verb == "INSERT")
    assert 1 <= begins < 20  # batches, each one transaction
    assert inserts == 3 * begins  # invites, events, outbox: one statement each for a batch
    await each_change_names_its_own_rows(db, changes, emails)


async def each_change_names_its_own_rows(db: Database, changes: Any, emails: list[str]) -> None:
    """Every caller got its own invite, and the ids of that invite's event and outbox row
    (the rows of one multi-row INSERT matched back to their callers)."""
    async with db.read() as conn:
        events = dict((await conn.execute(text("SELECT id, invite_id FROM invite_events"))).all())
        queued = dict((await conn.execute(text("SELECT id, invite_id FROM outbox"))).all())
    assert [change.invite.email for change in changes] == emails
    assert [events[c.event_id] for c in changes] == [c.invite.id for c in changes]
    assert [queued[c.outbox_id] for c in changes] == [c.invite.id for c in changes]


async def test_callers_of_one_group_commit_get_their_own_rows_on_any_database(
    db: Database,
) -> None:
    emails = [f"q{n}@x.com" for n in range(30)]
    changes = await asyncio.gather(
        *(create_invite(db, sender_id="s", email=e, name=None, correlation_id="c") for e in emails)
    )

    await each_change_names_its_own_rows(db, changes, emails)


@on_sqlite
async def test_a_group_commit_holds_the_processs_write_turn_while_its_thread_writes(
    db: Database,
) -> None:
    # The lane's transaction runs inside this process's turn at the write lock (WriterTurns):
    # another process trying to take the turn now would have to wait.
    lock_file = f"{db.url.database}.writelock"

    def turn_is_taken(_conn: Connection, arguments: Sequence[None]) -> list[bool]:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return [True for _ in arguments]
        finally:
            os.close(fd)  # closing it lets go of a lock it may have taken
        return [False for _ in arguments]

    assert await db.write_many(turn_is_taken, None)


async def test_rows_inserted_together_need_a_key_unique_among_them(db: Database) -> None:
    async def insert_twice() -> None:
        async with db.write() as conn:
            rows = [outbox_values(invite, utcnow()) for invite in [created.invite] * 2]
            await conn.run_sync(insert_in_order, outbox, rows, "invite_id", outbox.c.id)

    created = await create_invite(
        db, sender_id="s", email="dup@exemplo.com", name=None, correlation_id="c"
    )
    assert not isinstance(created, Duplicate)
    with pytest.raises(ValueError, match="not unique"):
        await insert_twice()


async def test_a_closed_lane_refuses_new_batches(tmp_path: Path) -> None:
    lane = SyncLane(create_engine(f"sqlite:///{tmp_path / 'lane.db'}"), "test-lane")
    await lane.close()

    with pytest.raises(RuntimeError, match="closed"):
        await lane.run([], transaction=False)


async def test_sessions_asked_at_the_same_moment_share_one_read(db: Database) -> None:
    tokens = []
    for n in range(10):
        account = await find_or_create_account(db, f"r{n}@exemplo.com")
        tokens.append((account, await sessions.start(db, account.id, 3600)))
    await sessions.end(db, tokens[3][1])
    engine = db.read_lane.engine if db.read_lane else db.reader.sync_engine
    reads = statements_on(engine)

    found = await asyncio.gather(*(sessions.account_of(db, token) for _, token in tokens))

    assert [a.id if a else None for a in found] == [
        None if n == 3 else account.id for n, (account, _) in enumerate(tokens)
    ]  # each caller its own account; the ended session refused in the same read
    assert 1 <= sum(1 for _, verb in reads if verb == "SELECT") < 10


@pytest.mark.parametrize("transaction", [True, False], ids=["a write", "a read"])
async def test_a_cancelled_write_returns_only_after_its_thread_is_done_a_read_at_once(
    tmp_path: Path, transaction: bool
) -> None:
    # Whoever holds the write turn for a batch must not let go while the thread writes; a read
    # holds nothing, and its caller (a timed-out check, a closed page) need not wait.
    lane = SyncLane(create_engine(f"sqlite:///{tmp_path / 'lane.db'}"), "test-lane")
    started, release = threading.Event(), threading.Event()

    def wait_for_release(conn: Connection, arguments: Sequence[int]) -> list[int]:
        conn.execute(text("SELECT 1"))
        started.set()
        release.wait(10)
        return list(arguments)

    task = asyncio.create_task(lane.run([(wait_for_release, [1])], transaction=transaction))
    await asyncio.to_thread(started.wait, 10)

    task.cancel()
    await asyncio.sleep(0.2)
    still_running = not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await lane.close()

    assert still_running == transaction


async def test_an_operation_on_the_lane_sees_the_callers_context(tmp_path: Path) -> None:
    # The log's correlation id is a context variable: a line logged on the lane keeps it.
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="")
    lane = SyncLane(create_engine(f"sqlite:///{tmp_path / 'lane.db'}"), "test-lane")

    def read_marker(_conn: Connection, arguments: Sequence[int]) -> list[str]:
        return [marker.get() for _ in arguments]

    marker.set("pedido-42")
    try:
        [outcomes] = await lane.run([(read_marker, [1])], transaction=False)
    finally:
        await lane.close()

    assert list(outcomes) == ["pedido-42"]
