"""The settle rule, in one place: on PostgreSQL, event ids can become visible out of order.

Within ``SETTLE_SECONDS`` of being written every event row is visible, so a reader of
"everything after id N" (a stream's ``StreamCursor``, the hub's ``TrailingFloor``) moves N only
past settled events and remembers the younger ones it handled. SQLite's ids are final at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta

from app import clock
from app.clock import utcnow
from app.invites import queries
from app.invites.queries import EventMark
from app.invites.records import Event
from app.storage.database import Database

SETTLE_SECONDS = 2.0


def horizon() -> datetime:
    """Events written at or before this instant are all visible."""
    return utcnow() - timedelta(seconds=SETTLE_SECONDS)


class StreamCursor:
    """Where a stream has read to: ``position``, plus the younger ids it already sent."""

    def __init__(self, position: int | None, *, exact: bool) -> None:
        self.position = position
        self.exact = exact
        self.sent_above: set[int] = set()

    async def start_at_snapshot(self, db: Database, sender_id: str, newest: int) -> None:
        """A snapshot showed everything up to ``newest``: start at the newest *settled* event.

        Younger events already visible count as sent; one committing later under a lower id
        is still new. (A stream resumed with ``Last-Event-ID`` starts after it: docs/live.md.)
        """
        self.position = newest
        if self.exact:
            return
        settled, younger = await queries.settled_event_ids(db, sender_id, horizon())
        if settled >= newest:
            return
        self.sent_above = {i for i in younger if i <= newest}
        self.position = settled

    def is_new(self, event_id: int) -> bool:
        return event_id not in self.sent_above

    def advance(self, events: Sequence[Event | EventMark]) -> None:
        """Move past the settled prefix of ``events`` (oldest first); remember the rest."""
        limit = horizon()
        settled = True
        for event in events:
            settled = settled and (self.exact or event.created_at <= limit)
            if settled:
                self.position = event.id
            else:
                self.sent_above.add(event.id)
        position = self.position or 0
        self.sent_above = {i for i in self.sent_above if i > position}


class TrailingFloor:
    """The hub's floor: every event id at or below it has been rung for.

    It passes a read's newest id only once a later read started ``settle_seconds`` after it (by
    then every lower id had committed, and that read saw it). A fresh floor cannot trail so:
    ``catch_up_due`` says when every stream should be rung once to re-read from its own cursor.
    """

    def __init__(self, value: int, *, exact: bool, settle_seconds: float) -> None:
        self.value = value
        self.exact = exact
        self.settle_seconds = settle_seconds
        self._seen: deque[tuple[float, int]] = deque()  # (read finished, newest id it saw)
        self._previous_start: float | None = None
        self._catch_up_at = None if exact else clock.monotonic() + settle_seconds

    def before_read(self) -> int:
        """The floor for the read about to start."""
        while self._seen and (self.exact or self._settled(self._seen[0][0])):
            self.value = max(self.value, self._seen.popleft()[1])
        return self.value

    def after_read(self, started: float, newest: int | None) -> None:
        self._seen.append((clock.monotonic(), max(newest or 0, self.value)))
        self._previous_start = started

    def catch_up_due(self, started: float) -> bool:
        """True once: the first read that started a settle time after the floor was taken."""
        if self._catch_up_at is None or started < self._catch_up_at:
            return False
        self._catch_up_at = None
        return True

    def _settled(self, read_at: float) -> bool:
        later = self._previous_start
        return later is not None and later - read_at >= self.settle_seconds
