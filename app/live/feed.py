"""Read once, render once: the open streams of a web process share their reads and their bytes.

Asks that come in the same moment (or during a read, forming the next one) are answered by one
query for every (sender, cursor) pair, and each changed row is rendered to SSE bytes once. A
read that already started never answers a later ask: the ring may be for a row committed after
it began.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from sse_starlette import ServerSentEvent

from app.clock import utcnow
from app.invites import queries
from app.invites.queries import EventMark
from app.invites.records import Invite
from app.live.settle import StreamCursor
from app.storage.database import Database

log = logging.getLogger(__name__)

#: The HTML of one row: (invite as it is now, its newest event id, now) → the fragment.
RenderRow = Callable[[Invite, int, datetime], str]
Read = tuple[str, int]  # (sender, after this event id)


class Rendered:
    """The rows of one read round, each rendered and encoded once, whoever sends it."""

    def __init__(self, feed: LiveFeed) -> None:
        self._feed = feed
        self._now = utcnow()
        self._bytes: dict[tuple[int, int, int], bytes] = {}

    def encoded(self, invite: Invite, shown: int, event_id: int) -> bytes:
        """The row as the event of ``shown`` left it (its ``data-evento``), sent under the SSE id
        ``event_id``: the event the read reached, which the browser resumes after."""
        key = (invite.id, shown, event_id)
        found = self._bytes.get(key)
        if found is None:
            html = self._feed.render(invite, shown, self._now)
            found = ServerSentEvent(data=html, event="convite", id=str(event_id)).encode()
            self._bytes[key] = found
        return found


class Answer:
    """One (sender, cursor) read: its events oldest first, each with its invite as it is now."""

    def __init__(self, pairs: list[tuple[EventMark, Invite, int]], rendered: Rendered) -> None:
        self.pairs = pairs
        self.rendered = rendered


class LiveFeed:
    """One process's reads for its open streams: batched, single-flight per (sender, cursor)."""

    def __init__(self, db: Database, render: RenderRow, *, limit: int = 500) -> None:
        self.db = db
        self.render = render
        self.limit = limit
        self._waiting: dict[Read, asyncio.Future[Answer]] = {}
        self._task: asyncio.Task[None] | None = None

    async def warm(self) -> None:
        """Compile the read's SQL at start-up, so the first streams do not wait for it."""
        try:
            await queries.warm_live_reads(self.db)
        except Exception as exc:  # the first reads compile it then
            log.warning("live feed starts cold", extra={"error": repr(exc)})

    async def changes(self, sender_id: str, cursor: StreamCursor) -> list[bytes]:
        """Each of the sender's invites changed since ``cursor``, once, as it is now (as SSE
        bytes, in the order of their events), and the cursor moved past them. A full read is
        read on from where it stopped: a stream far behind catches up without another ring."""
        newest: dict[int, tuple[int, int, Invite, Rendered]] = {}
        read: list[EventMark] = []
        after = cursor.position
        assert after is not None
        while True:
            answer = await self._read(sender_id, after)
            for event, invite, as_of in answer.pairs:
                if cursor.is_new(event.id):
                    # The row as read may be newer than this event (changed between the two
                    # reads): its data-evento names the newest event it shows, so a later read
                    # of that event is no news; its SSE id stays the event read, since the
                    # browser resumes after it and nothing between may be skipped.
                    shown = max(event.id, as_of or 0)
                    newest[invite.id] = (event.id, shown, invite, answer.rendered)
            read += [event for event, _, _ in answer.pairs]
            if len(answer.pairs) < self.limit:
                break
            after = read[-1].id
        cursor.advance(read)
        ordered = sorted(newest.values(), key=lambda row: row[0])
        return [
            rendered.encoded(invite, shown, event_id)
            for event_id, shown, invite, rendered in ordered
        ]

    async def _read(self, sender_id: str, after_id: int) -> Answer:
        key = (sender_id, after_id)
        future = self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[key] = future
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._drain(), name="live-feed")
        # Shielded: a stream that goes away must not cancel the read the others wait for.
        return await asyncio.shield(future)

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            reads = list(batch)
            try:
                found = await queries.events_since_many(self.db, reads, self.limit)
            except Exception as exc:  # each stream sees the error, as its own read would
                for future in batch.values():
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:
                for future in (*batch.values(), *self._waiting.values()):
                    future.cancel()
                self._waiting.clear()
                raise
            rendered = Rendered(self)
            for read, pairs in zip(reads, found, strict=True):
                if not batch[read].done():
                    batch[read].set_result(Answer(pairs, rendered))
