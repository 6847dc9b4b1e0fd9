"""How many live (SSE) streams may be open: per sender, per client address, per process.

Per sender and per client address, the cap is shared by every web process (slots in Redis,
``app.ratelimit``; fail-open when Redis is down). Per process it is this process's own count of
open SSE connections, which needs no Redis at all: whatever else fails, one process cannot be
made to hold more than ``STREAMS_PER_PROCESS`` streams. Each stream also ends after
``STREAM_MAX_SECONDS`` (with a little jitter, so streams opened together do not all reconnect
together); the browser reconnects with ``Last-Event-ID`` and misses nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from redis.asyncio import Redis
from starlette.requests import Request
from starlette.responses import Response

from app.config import Settings
from app.ops.metrics import SseConnections
from app.ratelimit import StreamSlot, TooManyStreams, open_stream_slot
from app.web.common import client_address, error_response, too_many_requests

TOO_MANY_FOR_SENDER = "Há muitas abas acompanhando seus convites. Feche alguma e tente de novo."
TOO_MANY_FOR_ADDRESS = (
    "Há conexões demais acompanhando convites a partir da sua rede. Tente de novo em instantes."
)
SERVER_FULL = "O servidor está acompanhando conexões demais agora. Tente de novo em instantes."
SERVER_FULL_RETRY_SECONDS = 10


class StreamRefused(Exception):
    """The stream may not open; ``response`` says why (429 or 503, pt-BR)."""

    def __init__(self, response: Response) -> None:
        super().__init__("stream refused")
        self.response = response


class StreamSlots:
    """The slots one open stream holds; ``refresh`` on keep-alive, ``release`` at the end."""

    def __init__(self, slots: Sequence[StreamSlot]) -> None:
        self.slots = list(slots)

    async def refresh(self) -> None:
        for slot in self.slots:
            await slot.refresh()

    async def release(self) -> None:
        for slot in self.slots:
            await slot.release()


def lifetime_seconds(settings: Settings) -> float:
    """How long this stream may stay open: the setting, minus up to 10% jitter."""
    return settings.stream_max_seconds * random.uniform(0.9, 1.0)


async def take_stream_slots(request: Request, redis: Redis, sender: str) -> StreamSlots:
    """Every cap's slot for one new stream, or ``StreamRefused`` (holding nothing)."""
    settings: Settings = request.state.settings
    sse: SseConnections = request.state.sse
    if sse.open >= settings.streams_per_process:
        response = error_response(request, 503, SERVER_FULL)
        response.headers["Retry-After"] = str(SERVER_FULL_RETRY_SECONDS)
        raise StreamRefused(response)
    caps = [
        (sender, settings.streams_per_sender, TOO_MANY_FOR_SENDER),
        (f"endereco:{client_address(request)}", settings.streams_per_address, TOO_MANY_FOR_ADDRESS),
    ]
    taken: list[StreamSlot] = []
    try:
        for key, limit, message in caps:
            try:
                taken.append(await open_stream_slot(redis, key, limit))
            except TooManyStreams as exc:
                raise StreamRefused(too_many_requests(request, message, exc.retry_after)) from None
    except BaseException:
        await StreamSlots(taken).release()
        raise
    return StreamSlots(taken)
