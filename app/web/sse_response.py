"""The live streams' response: server-sent events with one task per stream, not four.

sse-starlette's ``EventSourceResponse`` runs each stream in a task group of four tasks (the
sender, a ping timer, a shutdown listener, a disconnect listener), with their cancel scopes,
an event and a lock; at a thousand open streams that was most of what the web held per stream
beyond the connection itself. Convites' streams already wake on their own doorbell
(``app.live.hub.Wakeup``), so the rest is done there:

- **Pings** come from the stream's own rest (``app.web.events.Stream``): it never sleeps past
  the next ping, and says one when it was quiet that long.
- **Server shutdown** rings every stream's doorbell (``app.web.server_exit``: one watcher per
  process); each stream ends and the response completes.
- **The client hanging up** is the one thing a stream cannot see from its doorbell: one task
  per stream waits on ``receive()`` for ``http.disconnect`` and rings it (``on_disconnect``).

For ``GET`` only: a ``HEAD`` must not open a stream (``app.web.events.serve`` answers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from sse_starlette import ServerSentEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)

Chunk = ServerSentEvent | bytes
#: No cache may keep a stream, and nginx must not buffer one.
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


class EventStream(Response):
    """``body`` as ``text/event-stream``: each item is sent as it comes, each send bounded by
    ``send_timeout`` seconds (a client that stopped reading is let go, not waited for)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        body: AsyncIterator[Chunk],
        *,
        on_disconnect: Callable[[], None],
        send_timeout: float,
    ) -> None:
        self.body_iterator = body
        self.on_disconnect = on_disconnect
        self.send_timeout = send_timeout
        self.status_code = 200
        self.background = None
        self.init_headers(HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        listener = asyncio.create_task(self._listen(receive))
        try:
            async for item in self.body_iterator:
                chunk = item if isinstance(item, bytes) else item.encode()
                message = {"type": "http.response.body", "body": chunk, "more_body": True}
                try:
                    async with asyncio.timeout(self.send_timeout):
                        await send(message)
                except TimeoutError:
                    # The connection is cut (uvicorn logs "ASGI callable returned without
                    # completing response" and closes it): the client resumes with
                    # Last-Event-ID when it reads again.
                    log.warning("live stream let go: the client stopped reading")
                    return
            with contextlib.suppress(TimeoutError):  # the stream is over either way
                async with asyncio.timeout(self.send_timeout):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            listener.cancel()
            await _close(self.body_iterator)

    async def _listen(self, receive: Receive) -> None:
        """Until the client hangs up, or ``receive`` fails (a body over the limit on this GET,
        ``BodyLimitMiddleware``): either way nobody is listening any more, so the stream ends
        and gives its slots back instead of living out its lifetime."""
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception as exc:
            log.warning("live stream ended: its request failed", extra={"error": repr(exc)})
        self.on_disconnect()


async def _close(body: AsyncIterator[Chunk]) -> None:
    """Run the generator's ``finally`` (its slot release) whatever ended the response."""
    aclose = getattr(body, "aclose", None)
    if aclose is not None:
        await aclose()
