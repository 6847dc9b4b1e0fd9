"""How many live (SSE) streams may be open: per sender, per client network, per process.

Per sender and per client network (IPv4 address, IPv6 /64), the cap is shared by every web
process: a sorted set in Redis of slot ids scored by their last refresh, so slots of a crashed
process drop out after ``STREAM_SLOT_SECONDS``; fail-open when Redis is down. Per process it
is this process's own count of open SSE connections, which needs no Redis at all: whatever else
fails, one process cannot be made to hold more than ``STREAMS_PER_PROCESS`` streams. Each
stream also ends after ``STREAM_MAX_SECONDS`` (with a little jitter, so streams opened together
do not all reconnect together); the browser reconnects with ``Last-Event-ID`` and misses nothing.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Awaitable, Sequence
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response

from app.config import Settings
from app.ops.metrics import SseConnections
from app.web.common import client_network, error_response, too_many_requests

TOO_MANY_FOR_SENDER = "Há muitas abas acompanhando seus convites. Feche alguma e tente de novo."
TOO_MANY_FOR_ADDRESS = (
    "Há conexões demais acompanhando convites a partir da sua rede. Tente de novo em instantes."
)
SERVER_FULL = "O servidor está acompanhando conexões demais agora. Tente de novo em instantes."
SERVER_FULL_RETRY_SECONDS = 10
#: A stream slot not refreshed for this long is taken to belong to a dead process.
STREAM_SLOT_SECONDS = 3600
#: What a refused stream is told to wait: some other tab of the sender has to close first.
STREAM_RETRY_SECONDS = 30

log = logging.getLogger(__name__)

# KEYS[1]: the sender's slots; ARGV: now, stale-before, limit, member, ttl.
_OPEN_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


class TooManyStreams(Exception):
    """The sender already has as many open live streams as allowed."""

    def __init__(self, retry_after: int = STREAM_RETRY_SECONDS) -> None:
        super().__init__("too many open streams")
        self.retry_after = retry_after


def _streams_key(sender_id: str) -> str:
    return f"convites:limite:streams:{sender_id}"


class StreamSlot:
    """One open SSE stream of a sender; ``release`` it when the stream ends."""

    def __init__(self, redis: Redis, sender_id: str, member: str | None) -> None:
        self.redis = redis
        self.key = _streams_key(sender_id)
        self.member = member  # None: Redis was down when it opened, nothing to release

    async def refresh(self) -> None:
        """Mark the slot alive (call it on the stream's keep-alive, well within an hour)."""
        if self.member is None:
            return
        try:
            await self.redis.zadd(self.key, {self.member: time.time()}, xx=True)
            await self.redis.expire(self.key, STREAM_SLOT_SECONDS)
        except (RedisError, OSError) as exc:
            log.warning("could not refresh a stream slot", extra={"error": str(exc)})

    async def release(self) -> None:
        if self.member is None:
            return
        try:
            await self.redis.zrem(self.key, self.member)
        except (RedisError, OSError) as exc:
            # It drops out by itself after STREAM_SLOT_SECONDS.
            log.warning("could not release a stream slot", extra={"error": str(exc)})
        self.member = None


async def open_stream_slot(redis: Redis, sender_id: str, limit: int) -> StreamSlot:
    """Take one of ``limit`` stream slots of the sender, or raise ``TooManyStreams``."""
    member = uuid.uuid4().hex
    now = time.time()
    try:
        opened = await cast(
            Awaitable[int],
            redis.eval(
                _OPEN_SLOT,
                1,
                _streams_key(sender_id),
                str(now),
                str(now - STREAM_SLOT_SECONDS),
                str(limit),
                member,
                str(STREAM_SLOT_SECONDS),
            ),
        )
    except (RedisError, OSError) as exc:
        log.warning("stream limiter unavailable; stream allowed", extra={"error": str(exc)})
        return StreamSlot(redis, sender_id, None)
    if not opened:
        log.info("stream limit reached", extra={"limit": limit})
        raise TooManyStreams()
    return StreamSlot(redis, sender_id, member)


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
        (f"endereco:{client_network(request)}", settings.streams_per_address, TOO_MANY_FOR_ADDRESS),
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
