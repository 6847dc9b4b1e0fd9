"""Abuse limits kept in Redis, so every web process counts against the same numbers.

Sending (new invites and re-sends) is counted per sender and per client address each minute, per
sender each day, and per recipient each day (from every sender together). Sign-in link requests are
counted per e-mail address and per client network (IPv6 by /64) each hour. Each counter is a fixed
window that starts with its first hit and expires by itself (``EXPIRE``); the check-and-count is
one Lua script, so a refused request counts nowhere and two processes can never both take the last
unit.

Open SSE streams per sender are capped with a sorted set of slot ids scored by their last
refresh; slots of a crashed process drop out after ``STREAM_SLOT_SECONDS``.

If Redis does not answer, limits fail open: the refusal would only protect Redis-backed
resources, and invites are still accepted into the outbox (the DB is the truth). Each such
pass is logged.
"""

from __future__ import annotations

import ipaddress
import logging
import time
import uuid
from collections.abc import Awaitable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.batching import Batcher
from app.config import Settings
from app.invites.validation import same_address

log = logging.getLogger(__name__)

PREFIX = "convites:limite"
MINUTE = 60
HOUR = 3600
DAY = 24 * 3600
#: A stream slot not refreshed for this long is taken to belong to a dead process.
STREAM_SLOT_SECONDS = 3600
#: What a refused stream is told to wait: some other tab of the sender has to close first.
STREAM_RETRY_SECONDS = 30

# KEYS: the counters; ARGV: limit and window seconds for each key, in order.
# Returns 0 when every counter had room (and all were counted), else the 1-based index of the
# first full counter and how many seconds remain in its window.
_TAKE = """
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i - 1])
  if tonumber(redis.call('GET', key) or '0') >= limit then
    local ttl = redis.call('TTL', key)
    if ttl < 1 then ttl = tonumber(ARGV[2 * i]) end
    return {i, ttl}
  end
end
for i, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('EXPIRE', key, tonumber(ARGV[2 * i])) end
end
return {0, 0}
"""

# KEYS[1]: the sender's slots; ARGV: now, stale-before, limit, member, ttl.
_OPEN_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


@dataclass(frozen=True)
class Limit:
    """At most ``limit`` hits per ``window_seconds`` on ``key``; ``kind`` names it for people."""

    kind: str
    key: str
    limit: int
    window_seconds: int


@dataclass(frozen=True)
class Refusal:
    """Which limit is full and how many seconds until its window ends."""

    limit: Limit
    retry_after: int


def send_limits(settings: Settings, sender_id: str, address: str, recipient: str) -> list[Limit]:
    """The limits one send (new invite or re-send) counts against: the sender's, the client
    address's, and the recipient's (one address gets so many invites a day from everyone)."""
    return [
        Limit(
            "sender_minute",
            f"{PREFIX}:envio:remetente:{sender_id}:minuto",
            settings.sends_per_sender_per_minute,
            MINUTE,
        ),
        Limit(
            "address_minute",
            f"{PREFIX}:envio:endereco:{address}:minuto",
            settings.sends_per_address_per_minute,
            MINUTE,
        ),
        Limit(
            "sender_day",
            f"{PREFIX}:envio:remetente:{sender_id}:dia",
            settings.sends_per_sender_per_day,
            DAY,
        ),
        recipient_limit(settings, recipient),
    ]


def recipient_limit(settings: Settings, recipient: str) -> Limit:
    """How many invites one address receives a day, from every sender together."""
    return Limit(
        "recipient_day",
        f"{PREFIX}:envio:destinatario:{same_address(recipient)}:dia",
        settings.invites_per_recipient_per_day,
        DAY,
    )


def batch_limits(settings: Settings, sender_id: str, recipients: list[str]) -> list[Limit]:
    """What a batch counts against: the sender's day (by its size) and each recipient's day.
    The per-minute limits are for single invites: a reviewed batch is one deliberate act."""
    sender_day = send_limits(settings, sender_id, "", "")[2]
    return [sender_day, *(recipient_limit(settings, email) for email in recipients)]


#: Every worker counts each send here: past ``SENDS_PER_HOUR`` new sends wait as ``pendente``.
GLOBAL_SENDS_KEY = f"{PREFIX}:envio:global:hora"


def global_send_limit(settings: Settings) -> Limit:
    """The limit every send of every worker counts against (the domain's reputation)."""
    return Limit("global_hour", GLOBAL_SENDS_KEY, settings.sends_per_hour, HOUR)


async def sends_this_hour(redis: Redis) -> int:
    """How many sends the current hourly window has counted (for ``/saude``)."""
    return int(await redis.get(GLOBAL_SENDS_KEY) or 0)


def client_network(address: str) -> str:
    """The client as limits count it: an IPv4 address, or an IPv6 address's /64 (one home or
    phone network hands out a whole /64)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def signin_limits(settings: Settings, email: str, address: str) -> list[Limit]:
    """The limits one sign-in link request counts against: per address, per client network."""
    return [
        Limit(
            "signin_address",
            f"{PREFIX}:acesso:email:{same_address(email)}:hora",
            settings.signin_links_per_address_per_hour,
            HOUR,
        ),
        Limit(
            "signin_client",
            f"{PREFIX}:acesso:cliente:{client_network(address)}:hora",
            settings.signin_links_per_client_per_hour,
            HOUR,
        ),
    ]


def _take_arguments(limits: list[Limit]) -> list[str]:
    """The script's keys, then a limit and a window for each."""
    args = [limit.key for limit in limits]
    for limit in limits:
        args += [str(limit.limit), str(limit.window_seconds)]
    return args


def _refusal(limits: list[Limit], index: int, ttl: int) -> Refusal | None:
    if index == 0:
        return None
    refused = limits[int(index) - 1]
    log.info("rate limit reached", extra={"limit": refused.kind})
    return Refusal(refused, max(1, int(ttl)))


# KEYS: the counters; ARGV: limit, window seconds and amount for each key, in order.
# Returns 0 when every counter had room for its amount (and all were counted), else the 1-based
# index of the first counter without room, the seconds left in its window, and its room left.
_TAKE_MANY = """
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[3 * i - 2])
  local used = tonumber(redis.call('GET', key) or '0')
  if used + tonumber(ARGV[3 * i]) > limit then
    local ttl = redis.call('TTL', key)
    if ttl < 1 then ttl = tonumber(ARGV[3 * i - 1]) end
    return {i, ttl, math.max(0, limit - used)}
  end
end
for i, key in ipairs(KEYS) do
  if redis.call('INCRBY', key, tonumber(ARGV[3 * i])) == tonumber(ARGV[3 * i]) then
    redis.call('EXPIRE', key, tonumber(ARGV[3 * i - 1]))
  end
end
return {0, 0, 0}
"""


@dataclass(frozen=True)
class ManyRefusal:
    """A whole batch refused: which limit, when its window ends, and how many would fit."""

    limit: Limit
    retry_after: int
    room: int


async def take_many(redis: Redis, wanted: list[tuple[Limit, int]]) -> ManyRefusal | None:
    """Count ``amount`` on every limit, or nothing anywhere if any lacks the room (then say
    which, and how much room it has). Fails open like ``take``."""
    merged: dict[str, tuple[Limit, int]] = {}
    for limit, amount in wanted:  # one address twice in a list counts twice on one key
        previous = merged.get(limit.key)
        merged[limit.key] = (limit, amount + (previous[1] if previous else 0))
    pairs = list(merged.values())
    args: list[str] = []
    for limit, amount in pairs:
        args += [str(limit.limit), str(limit.window_seconds), str(amount)]
    try:
        index, ttl, room = await cast(
            Awaitable[list[int]],
            redis.eval(_TAKE_MANY, len(pairs), *(limit.key for limit, _ in pairs), *args),
        )
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; batch allowed", extra={"error": str(exc)})
        return None
    if index == 0:
        return None
    refused = pairs[int(index) - 1][0]
    log.info("rate limit reached by a batch", extra={"limit": refused.kind})
    return ManyRefusal(refused, max(1, int(ttl)), int(room))


async def used(redis: Redis, limits: list[Limit]) -> list[int]:
    """How much of each limit its current window has used (0 when Redis does not answer)."""
    if not limits:
        return []
    try:
        values = await redis.mget([limit.key for limit in limits])
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; counts unknown", extra={"error": str(exc)})
        return [0] * len(limits)
    return [int(value or 0) for value in values]


async def take(redis: Redis, limits: list[Limit]) -> Refusal | None:
    """Count one hit on every limit, or on none if any is full (then say which)."""
    try:
        index, ttl = await cast(
            Awaitable[list[int]], redis.eval(_TAKE, len(limits), *_take_arguments(limits))
        )
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; request allowed", extra={"error": str(exc)})
        return None
    return _refusal(limits, index, ttl)


async def _take_each(redis: Redis, batch: Sequence[list[Limit]]) -> list[Any]:
    async with redis.pipeline(transaction=False) as pipe:
        for limits in batch:
            pipe.eval(_TAKE, len(limits), *_take_arguments(limits))
        # A failed script is that caller's error, not the batch's.
        return list(await pipe.execute(raise_on_error=False))


class Limiter:
    """``take`` for concurrent requests in one pipeline: one Redis round trip per batch.

    Each request's limits are still checked and counted by its own run of the script (atomic on
    its own, one after the other in Redis), so a batch can never let two requests both take the
    last unit; a refusal or a Redis outage is each caller's own, exactly as with ``take``.
    """

    def __init__(self, redis: Redis) -> None:
        self._batcher: Batcher[Redis] = Batcher(lambda: nullcontext(redis), isolate_failures=False)

    async def take(self, limits: list[Limit]) -> Refusal | None:
        try:
            index, ttl = await self._batcher.run(_take_each, limits)
        except (RedisError, OSError) as exc:
            log.warning("rate limiter unavailable; request allowed", extra={"error": str(exc)})
            return None
        return _refusal(limits, index, ttl)

    async def close(self) -> None:
        await self._batcher.close()


class TooManyStreams(Exception):
    """The sender already has as many open live streams as allowed."""

    def __init__(self, retry_after: int = STREAM_RETRY_SECONDS) -> None:
        super().__init__("too many open streams")
        self.retry_after = retry_after


def _streams_key(sender_id: str) -> str:
    return f"{PREFIX}:streams:{sender_id}"


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
