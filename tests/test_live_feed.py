"""The live feed: the streams of a web process that wake together share one read of the database
and one rendering of each changed row (real database, real templates; statements counted)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.interfaces import CacheStats
from sqlalchemy.util import await_only

from app.config import Settings
from app.invites import queries, transitions
from app.invites.records import Invite
from app.live.feed import LiveFeed
from app.live.settle import StreamCursor
from app.main import build_templates
from app.storage.database import Database
from app.web.events import render_row
from app.web.static import StaticAssets

ROOT = Path(__file__).resolve().parent.parent


class CountingRender:
    """The app's own row rendering, counted."""

    def __init__(self, settings: Settings) -> None:
        self.templates = build_templates(StaticAssets(ROOT / "static"))
        self.settings = settings
        self.calls = 0

    def __call__(self, invite: Invite, event_id: int, now: datetime) -> str:
        self.calls += 1
        return render_row(self.templates, invite, event_id, now, self.settings)


@contextmanager
def event_reads(db: Database) -> Iterator[list[str]]:
    """Every SELECT run through the database's readers, its read lane too (a round of reads is
    two: the events of every pair asked, then the invites they name)."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    with on_every_reader(db, "before_cursor_execute", count):
        yield seen


@contextmanager
def on_every_reader(db: Database, name: str, listener: Callable[..., None]) -> Iterator[None]:
    """``listener`` on the engine event ``name`` of each engine the database reads through."""
    engines = [db.reader.sync_engine]
    for engine in engines:
        event.listen(engine, name, listener)
    try:
        yield
    finally:
        for engine in engines:
            event.remove(engine, name, listener)


async def _invite(db: Database, sender: str, email: str) -> Invite:
    change = await transitions.create_invite(
        db, sender_id=sender, email=email, name=None, correlation_id=""
    )
    return change.invite


def _cursor(db: Database, position: int = 0) -> StreamCursor:
    return StreamCursor(position, exact=db.is_sqlite)


async def test_a_hundred_streams_of_one_sender_cost_one_read_and_one_rendering(
    settings: Settings, db: Database
) -> None:
    await _invite(db, "ana", "convidada@exemplo.com")
    render = CountingRender(settings)
    feed = LiveFeed(db, render)
    cursors = [_cursor(db) for _ in range(100)]

    with event_reads(db) as reads:
        answers = await asyncio.gather(*(feed.changes("ana", cursor) for cursor in cursors))

    assert len(reads) == 2 and render.calls == 1
    assert len({id(rows[0]) for rows in answers}) == 1  # the very same bytes for every stream
    assert b"convidada@exemplo.com" in answers[0][0] and b"event: convite" in answers[0][0]
    assert all(cursor.position == cursors[0].position for cursor in cursors)


async def test_senders_woken_together_share_one_read_and_each_gets_only_its_rows(
    settings: Settings, db: Database
) -> None:
    senders = [f"remetente-{n}" for n in range(30)]
    for sender in senders:
        await _invite(db, sender, f"para-{sender}@exemplo.com")
    render = CountingRender(settings)
    feed = LiveFeed(db, render)
    asks = [(sender, _cursor(db)) for sender in senders for _tab in range(3)]

    with event_reads(db) as reads:
        answers = await asyncio.gather(*(feed.changes(sender, cursor) for sender, cursor in asks))

    assert len(reads) == 2 and render.calls == len(senders)
    for (sender, _), rows in zip(asks, answers, strict=True):
        assert len(rows) == 1 and f"para-{sender}@".encode() in rows[0]


async def test_many_senders_woken_together_cost_one_statement_per_sixty_four_and_one_more(
    settings: Settings, db: Database
) -> None:
    await _invite(db, "ana", "convidada@exemplo.com")
    quiet = [f"sem-novidade-{n}" for n in range(199)]
    feed = feed_for(settings, db)

    with event_reads(db) as reads:
        answers = await asyncio.gather(
            *(feed.changes(sender, _cursor(db)) for sender in ["ana", *quiet])
        )

    assert len(reads) == 5  # 200 pairs: 64 + 64 + 64 + 8, then the invites
    assert len(answers[0]) == 1 and all(rows == [] for rows in answers[1:])


async def test_each_stream_reads_from_its_own_cursor(settings: Settings, db: Database) -> None:
    first = await _invite(db, "ana", "um@exemplo.com")
    behind = _cursor(db)
    await feed_for(settings, db).changes("ana", behind)  # at the first invite's event
    await transitions.claim_with_link(db, first.public_id, 1, lease_seconds=60)
    await _invite(db, "ana", "dois@exemplo.com")
    feed = feed_for(settings, db)

    fresh, caught_up = await asyncio.gather(
        feed.changes("ana", _cursor(db)), feed.changes("ana", behind)
    )

    assert len(fresh) == 2 and len(caught_up) == 2
    assert b'data-status="enviando"' in fresh[0] and fresh[0] is caught_up[0]


async def test_an_ask_during_a_read_waits_for_the_next_read(
    settings: Settings, db: Database
) -> None:
    """A ring may be for a row committed after a read began: that read must not answer it."""
    invite = await _invite(db, "ana", "um@exemplo.com")
    feed = feed_for(settings, db)

    with held_first_read(db) as (started, release):
        first = asyncio.create_task(feed.changes("ana", _cursor(db)))
        await started.wait()  # its statement ran (its snapshot is taken); it is still going
        claim = await transitions.claim_with_link(db, invite.public_id, 1, lease_seconds=60)
        late = asyncio.create_task(feed.changes("ana", _cursor(db)))  # same sender and cursor
        await asyncio.sleep(0)  # one turn of the loop: it asks (no await before it joins)
        release()
        early = await first

    assert claim is not None
    created, claimed = claim.change.event_id - 1, claim.change.event_id
    # The read in flight took its events before the claim; on PostgreSQL (a snapshot per
    # statement) its invites may be read after it: a row that shows the claim says so in its
    # data-evento, so the page takes the next read of that claim for no news, but its SSE id
    # stays the event the read reached: a browser resuming after it misses nothing.
    assert early[0].startswith(f"id: {created}\r\n".encode())
    assert (b"estado-enviando" in early[0]) == (f'data-evento="{claimed}"'.encode() in early[0])
    assert (await late)[0].startswith(f"id: {claimed}\r\n".encode())  # a read of its own


async def test_a_stream_far_behind_catches_up_without_another_ring(
    settings: Settings, db: Database
) -> None:
    """A read that came back full is read on from where it stopped (a tab waking up behind a
    big batch), each invite once, in the order of its newest event."""
    made = [await _invite(db, "ana", f"c{n}@exemplo.com") for n in range(5)]
    await transitions.cancel(db, "ana", made[0].public_id)
    cursor = _cursor(db)

    rows = await LiveFeed(db, CountingRender(settings), limit=2).changes("ana", cursor)

    found = [re.search(rb"c(\d)@exemplo\.com", row) for row in rows]
    assert [m.group(1) if m else None for m in found] == [b"1", b"2", b"3", b"4", b"0"]
    ids = [int(row.split(b"\r\n", 1)[0].removeprefix(b"id: ")) for row in rows]
    assert ids == sorted(ids)
    # Past every id sent (on PostgreSQL, ids younger than the settle time are remembered).
    assert all(i <= (cursor.position or 0) or not cursor.is_new(i) for i in ids)


@contextmanager
def held_first_read(db: Database) -> Iterator[tuple[asyncio.Event, Callable[[], None]]]:
    """The first read of ``invite_events`` waits, after its statement ran, until ``release()``
    (SQLAlchemy runs the hook in the reading task: ``await_only`` lets the loop go on)."""
    started, release_task = asyncio.Event(), asyncio.Event()

    def hold(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "invite_events" not in statement or started.is_set():
            return
        started.set()
        await_only(release_task.wait())

    def release() -> None:
        release_task.set()

    engine = db.reader.sync_engine
    event.listen(engine, "after_cursor_execute", hold)
    try:
        yield started, release
    finally:
        release()
        event.remove(engine, "after_cursor_execute", hold)


def feed_for(settings: Settings, db: Database) -> LiveFeed:
    return LiveFeed(db, CountingRender(settings))


async def test_the_feed_compiles_its_reads_at_start_up_not_while_streams_wait(
    settings: Settings, db: Database
) -> None:
    # A fresh database object: the shapes this test reads are compiled nowhere yet.
    fresh = Database(settings.database_url)
    try:
        invite = await _invite(fresh, "ana", "convidada@exemplo.com")
        await LiveFeed(fresh, CountingRender(settings)).warm()
        with compilations(fresh) as compiled:
            for senders in (1, 3, 20, 64):  # the read of 20 senders was 61 ms cold
                reads = [("ana", 0)] + [(f"s{i}", 0) for i in range(senders - 1)]
                found = await queries.events_since_many(fresh, reads)
                assert found[0][0][1].id == invite.id
        assert compiled == []
    finally:
        await fresh.dispose()


@contextmanager
def compilations(db: Database) -> Iterator[list[str]]:
    """Every statement whose SQL was compiled (not found in the engine's cache) meanwhile."""
    missed: list[str] = []

    def record(
        _conn: Any, _cursor: Any, statement: str, _params: Any, context: Any, _many: Any
    ) -> None:
        if context.cache_hit == CacheStats.CACHE_MISS:
            missed.append(statement)

    with on_every_reader(db, "after_cursor_execute", record):
        yield missed
