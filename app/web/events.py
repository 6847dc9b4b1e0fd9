"""``GET /convites/eventos``: one server-sent event stream per page, scoped to the sender.

The database is the truth; a wake-up (``app.live.hub``) only makes the stream read the rows
newer than its cursor (``app.live.feed``) and send each as its rendered row. Without a cursor it
first sends the sender's visible rows as they are.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from app import clock
from app.clock import utcnow
from app.config import Settings
from app.invites import queries
from app.invites.records import INVITE, SIGNIN_MAIL, Invite
from app.live.feed import LiveFeed
from app.live.hub import Hub, Wakeup
from app.live.settle import StreamCursor
from app.sending.pause import SendingNotice
from app.storage.database import Database
from app.web.common import db_of, error_response, settings_of, templates_of, visitor_id
from app.web.identity import identify
from app.web.params import BadParameter, whole_number
from app.web.stream_caps import StreamRefused, StreamSlots, lifetime_seconds, take_stream_slots

log = logging.getLogger(__name__)

PING = ServerSentEvent(comment="ping")
#: A client that stopped reading is let go, not waited for; it resumes with Last-Event-ID.
SEND_TIMEOUT_SECONDS = 10
#: How long a stream may take to end after the server starts stopping before sse-starlette cuts
#: it: less than uvicorn's --timeout-graceful-shutdown (docs/deploy.md), more than one read.
SHUTDOWN_GRACE_SECONDS = 2.0
RECONNECT_MILLISECONDS = 1000
# A stream's slot under the per-sender cap expires unless refreshed (see app.ratelimit).
SLOT_REFRESH_SECONDS = 600


def cursor_from(request: Request) -> int | None:
    """Where the browser is: ``Last-Event-ID`` (a reconnect) or ``?depois=`` (the page's own
    cursor, as a fresh EventSource sends no header); ``BadParameter`` unless ASCII digits."""
    candidates = [
        whole_number(request.headers.get("last-event-id"), "Last-Event-ID"),
        whole_number(request.query_params.get("depois"), "depois"),
    ]
    values = [value for value in candidates if value is not None]
    return max(values) if values else None


def render_row(
    templates: Jinja2Templates, invite: Invite, event_id: int, now: datetime, settings: Settings
) -> str:
    """The row fragment of an invite, or of a sign-in mail (the same data-* contract)."""
    name = "_signin_row.html" if invite.kind == SIGNIN_MAIL else "_invite_row.html"
    template = templates.get_template(name)
    return template.render(invite=invite, event_id=event_id, now=now, settings=settings)


class Stream:
    """The state of one open stream: whose it is, how far it has read, what it last said."""

    def __init__(self, request: Request, cursor: int | None, scope: str, kind: str) -> None:
        self.db: Database = db_of(request)
        self.redis: Any = request.state.redis
        self.hub: Hub = request.state.hub
        self.feed: LiveFeed = request.state.feed
        self.settings = settings_of(request)
        self.templates = templates_of(request)
        self.sender = scope  # a signed-in account's id, or a signed-out browser's (its links)
        self.kind = kind
        self.cursor = StreamCursor(cursor, exact=self.db.is_sqlite)
        self.slot: StreamSlots | None = None
        # Streams end after STREAM_MAX_SECONDS; the browser resumes with Last-Event-ID.
        self.ends_at = clock.monotonic() + lifetime_seconds(self.settings)
        self.slot_refreshed = clock.monotonic()
        self.paused_check: SendingNotice = request.state.paused
        self.paused: str | None = ""  # "": nothing sent yet

    def row_event(self, invite: Invite, event_id: int) -> ServerSentEvent:
        data = render_row(self.templates, invite, event_id, utcnow(), self.settings)
        return ServerSentEvent(data=data, event="convite", id=str(event_id))

    async def snapshot(self) -> list[ServerSentEvent]:
        """The sender's visible rows as they are now, oldest first (the page puts each on top)."""
        # The cursor is placed first: anything newer than the rows is sent again, never lost.
        newest = await queries.last_event_id(self.db, self.sender)
        await self.cursor.start_at_snapshot(self.db, self.sender, newest)
        page = await queries.invite_page(self.db, self.sender, kind=self.kind)
        return [
            self.row_event(row, page.event_ids.get(row.id, 0)) for row in reversed(page.invites)
        ]

    async def changes(self) -> list[bytes]:
        """Each invite changed since the cursor, once, as it is now (``LiveFeed``)."""
        return await self.feed.changes(self.sender, self.cursor)

    async def notice(self, *, fresh: bool = False) -> ServerSentEvent | None:
        """The paused notice, when it changed since this stream last sent it (the first read
        fresh, like the page it follows)."""
        first = self.paused == ""
        paused = await (self.paused_check.now() if first or fresh else self.paused_check())
        if paused == self.paused:
            return None
        self.paused = paused
        html = self.templates.get_template("_notice.html").render(paused=paused)
        return ServerSentEvent(data=html, event="aviso")

    @property
    def ending(self) -> bool:
        return self.hub.streams_ending or clock.monotonic() >= self.ends_at

    def period(self) -> float:
        """How long the stream may rest: until the paused notice is due again, or its end."""
        now = clock.monotonic()
        return max(0.0, min(self.settings.worker_heartbeat_seconds, self.ends_at - now))

    async def rest(self, wakeup: Wakeup) -> bool:
        """Until a wake-up (True: read the database) or ``period()``; the server stopping rings
        the same bell."""
        if self.ending:
            return True
        return await wakeup.wait(self.period())

    def saw(self, rows: list[bytes]) -> None:
        """Rows were just sent (the batch page's stream keeps note, for its summary)."""

    async def between(self) -> list[ServerSentEvent]:
        """Between reads: the paused notice if it changed, and the slot kept."""
        notice = await self.notice()
        await self.keep_slot()
        return [] if notice is None else [notice]

    async def events(self, wakeup: Wakeup) -> AsyncIterator[ServerSentEvent | bytes]:
        yield ServerSentEvent(comment="ola", retry=RECONNECT_MILLISECONDS)
        if self.cursor.position is None:
            for event in await self.snapshot():
                yield event
        rang = True
        while not self.ending:
            if rang:
                if self.paused is not None:
                    # Unless sending is known to run, the rows may be a worker's that just came
                    # back: the notice is read now and goes first, so no row says "enviado"
                    # under "o envio está pausado".
                    resumed = await self.notice(fresh=True)
                    if resumed is not None:
                        yield resumed
                rows = await self.changes()
                self.saw(rows)
                for row in rows:
                    yield row
            for event in await self.between():
                yield event
            rang = await self.rest(wakeup)

    async def keep_slot(self) -> None:
        """Tell the per-sender stream cap that this stream is still open."""
        now = clock.monotonic()
        if self.slot is not None and now - self.slot_refreshed > SLOT_REFRESH_SECONDS:
            await self.slot.refresh()
            self.slot_refreshed = now


async def stream(request: Request) -> Response:
    """GET /convites/eventos: this sender's changes as server-sent events (signed out: this
    browser's own sign-in mails, scoped to its id as invites are to an account)."""
    account = await identify(request)
    scope, kind = (
        (visitor_id(request), SIGNIN_MAIL) if account is None else (account.public_id, INVITE)
    )
    try:
        live = Stream(request, cursor_from(request), scope, kind)
    except BadParameter as exc:
        return error_response(request, 400, exc.message)
    return await serve(request, live)


async def serve(request: Request, live: Stream) -> Response:
    """``live`` as an SSE response under the stream caps, counted while open, its slot given
    back however it ends. A ``HEAD`` takes no slot: its body never starts to give one back."""
    if request.method == "HEAD":
        return EventSourceResponse(iter(()))
    try:
        slot = await take_stream_slots(request, live.redis, live.sender)
    except StreamRefused as exc:
        return exc.response
    live.slot = slot

    async def generate() -> AsyncIterator[ServerSentEvent | bytes]:
        # Counted inside the generator: exactly while the stream is open (see app.ops.metrics).
        try:
            with request.state.sse.track(), live.hub.subscribe(live.sender) as wakeup:
                async for event in live.events(wakeup):
                    yield event
        finally:
            # A hang-up cancels the stream, and anyio cancels every await inside a cancelled
            # scope: shield the release.
            with anyio.CancelScope(shield=True):
                await slot.release()

    return EventSourceResponse(
        generate(),
        ping=live.settings.stream_ping_seconds,
        ping_message_factory=lambda: PING,
        send_timeout=SEND_TIMEOUT_SECONDS,
        shutdown_event=live.hub.server_stopping,
        shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
    )
