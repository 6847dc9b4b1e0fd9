"""``GET /lotes/{id}/eventos``: a batch page's live stream.

``app.web.events.Stream`` narrowed to one batch's rows, plus ``lote`` events (its counters and
one sentence) at most every ``BATCH_ANNOUNCE_SECONDS``, and at once when it is finished.
"""

from __future__ import annotations

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from app.batches import progress, store
from app.batches.store import Batch
from app.invites import queries
from app.invites.records import INVITE, Event, Invite
from app.web.common import db_of, error_response
from app.web.events import Stream, cursor_from, serve
from app.web.identity import identify
from app.web.params import BadParameter

#: ``queries.events_since`` reads at most this many at a time; a batch writes many more.
READ_SIZE = 500


class BatchStream(Stream):
    """One batch page's stream: its rows as they change, and its throttled summaries."""

    def __init__(self, request: Request, cursor: int | None, batch: Batch) -> None:
        super().__init__(request, cursor, batch.sender_id, INVITE)
        self.batch = batch
        self.throttle = progress.Throttle(self.settings.batch_announce_seconds)
        self.dirty = False  # rows changed since the last summary sent
        self.said_end = False  # this stream already sent the finished batch's summary

    async def snapshot(self) -> list[ServerSentEvent]:
        newest = await queries.last_event_id(self.db, self.sender)
        await self.cursor.start_at_snapshot(self.db, self.sender, newest)
        rows = await store.batch_rows(self.db, self.batch)
        return [self.row_event(row, rows.event_ids.get(row.id, 0)) for row in rows.invites]

    async def changes(self) -> list[bytes]:
        """Each of the batch's invites changed since the cursor, once, as it is now (the
        batch page's own read: only this page shows these rows together)."""
        newest: dict[int, tuple[int, Invite]] = {}
        read: list[Event] = []
        after = self.cursor.position
        assert after is not None
        while True:
            pairs = await queries.events_since(self.db, self.sender, after, READ_SIZE)
            for event, invite in pairs:
                if invite.batch_id == self.batch.id and self.cursor.is_new(event.id):
                    newest[invite.id] = (event.id, invite)
            read += [event for event, _ in pairs]
            if len(pairs) < READ_SIZE:  # a short read is the end
                break
            after = read[-1].id
        self.cursor.advance(read)
        ordered = sorted(newest.values(), key=lambda pair: pair[0])
        return [self.row_event(invite, event_id).encode() for event_id, invite in ordered]

    async def summary(self) -> ServerSentEvent | None:
        """The batch's summary, when rows changed and it may speak (or the batch is done)."""
        if not self.dirty:
            return None
        tally = await store.tally(self.db, self.batch.id)
        summary = progress.summarize(self.batch.size, tally.counts, tally.reminders, tally.send_at)
        # The end of the sending is said at once; anything after it (reminders, which the
        # sweep sends one by one for days) waits like progress does, so a batch's reminders
        # are a few summaries, never one per row.
        ending = summary.finished and not self.said_end
        if not (ending or self.throttle.ready()):
            return None
        self.said_end = summary.finished
        self.dirty = False
        self.throttle.spoke()
        template = self.templates.get_template("_lote_resumo.html")
        html = template.render(batch=self.batch, summary=summary, settings=self.settings)
        return ServerSentEvent(data=html, event="lote")

    def period(self) -> float:
        period = super().period()
        if self.dirty:  # a summary is due when the throttle allows it
            period = min(period, self.throttle.wait() + 0.05)
        return period

    def saw(self, rows: list[bytes]) -> None:
        self.dirty = self.dirty or bool(rows)

    async def between(self) -> list[ServerSentEvent]:
        summary = await self.summary()
        upkeep = await super().between()
        return upkeep if summary is None else [summary, *upkeep]


async def stream(request: Request) -> Response:
    """GET /lotes/{id}/eventos: the signed-in sender's batch, live; anyone else's is 404."""
    account = await identify(request)
    batch = None
    if account is not None:
        batch = await store.get_batch(
            db_of(request), account.public_id, request.path_params["public_id"]
        )
    if batch is None:
        return error_response(request, 404, "Lote não encontrado.")
    try:
        live = BatchStream(request, cursor_from(request), batch)
    except BadParameter as exc:
        return error_response(request, 400, exc.message)
    return await serve(request, live)
