"""Abuse limits kept in Redis, so every web process counts against the same numbers.

Sending (new invites and re-sends) is counted per sender and per client network (an IPv4 address,
an IPv6 /64) each minute, per sender each day, and per recipient each day (from every sender
together). Sign-in link requests are counted per e-mail address from one client network and per
client network each hour; every worker's sends together per hour, and each sender's share of
that hour. Each counter is a fixed window
that starts with its first hit and expires by itself (``EXPIRE``). Every caller goes through
``take``: its check-and-count is one Lua script, so a refused request counts nowhere and two
processes can never both take the last unit. A request refused *after* it was counted (the
write found a duplicate, a wrong state) hands the recipient's unit back with ``give_back``: only
invites actually written count toward an address's day.

If Redis does not answer, limits fail open: the refusal would only protect Redis-backed
resources, and invites are still accepted into the outbox (the DB is the truth). Each such
pass is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.config import Settings
from app.invites.validation import same_address

log = logging.getLogger(__name__)

PREFIX = "convites:limite"
MINUTE = 60
HOUR = 3600
DAY = 24 * 3600


@dataclass(frozen=True)
class Limit:
    """At most ``limit`` hits per ``window_seconds`` on ``key``; ``kind`` names it for people."""

    kind: str
    key: str
    limit: int
    window_seconds: int


@dataclass(frozen=True)
class Refusal:
    """Which limit lacks the room, how many seconds until its window ends, and how much room it
    has left (a batch that asked for more is told how many would fit)."""

    limit: Limit
    retry_after: int
    room: int


def send_limits(settings: Settings, sender_id: str, network: str, recipient: str) -> list[Limit]:
    """The limits one send (new invite or re-send) counts against: the sender's, the client
    network's (``app.web.common.client_network``), and the recipient's (one address gets so many
    invites a day from everyone)."""
    return [
        Limit(
            "sender_minute",
            f"{PREFIX}:envio:remetente:{sender_id}:minuto",
            settings.sends_per_sender_per_minute,
            MINUTE,
        ),
        Limit(
            "address_minute",
            f"{PREFIX}:envio:endereco:{network}:minuto",
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


def review_limit(settings: Settings, sender_id: str) -> Limit:
    """Reading and reviewing a list (``/lotes/revisar``, ``POST /lotes``) per account per minute:
    each one may make a child process read a spreadsheet up to its bounds."""
    return Limit(
        "batch_review",
        f"{PREFIX}:lote:revisao:{sender_id}:minuto",
        settings.batch_reviews_per_minute,
        MINUTE,
    )


#: Every worker counts each send here: past ``SENDS_PER_HOUR`` new sends wait as ``pendente``.
GLOBAL_SENDS_KEY = f"{PREFIX}:envio:global:hora"


def global_send_limit(settings: Settings) -> Limit:
    """The limit every send of every worker counts against (the domain's reputation)."""
    return Limit("global_hour", GLOBAL_SENDS_KEY, settings.sends_per_hour, HOUR)


def hourly_send_limits(settings: Settings, sender_id: str) -> list[Limit]:
    """What one invitation mail counts against in the worker: the shared hour, and this
    sender's share of it (``SENDER_SHARE_OF_HOUR_PERCENT``), so that no one sender, or a few,
    can use up the hour and make everyone else's invites wait. Sign-in mails take neither:
    ``count_send`` only counts them."""
    share = max(1, settings.sends_per_hour * settings.sender_share_of_hour_percent // 100)
    return [
        global_send_limit(settings),
        Limit("sender_hour", f"{PREFIX}:envio:remetente:{sender_id}:hora", share, HOUR),
    ]


# KEYS[1]: the counter; ARGV: its window seconds. Counts one hit whatever the limit.
_COUNT = """
if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1])) end
return 0
"""


async def count_send(redis: Redis, limit: Limit) -> None:
    """Count a mail that goes whatever the limit says (a sign-in link: a person waiting to sign
    in never waits for the invitation budget); counted so invitations give way to it. Fails
    open like ``take``."""
    try:
        await cast(Awaitable[int], redis.eval(_COUNT, 1, limit.key, str(limit.window_seconds)))
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; send not counted", extra={"error": str(exc)})


async def sends_this_hour(redis: Redis) -> int:
    """How many sends the current hourly window has counted (for ``/saude``)."""
    return int(await redis.get(GLOBAL_SENDS_KEY) or 0)


def signin_limits(settings: Settings, email: str, network: str) -> list[Limit]:
    """The limits one sign-in link request counts against: per e-mail address *from this
    network*, and per network. Not per address alone: then anyone could use up the owner's
    allowance and lock them out of signing in (``network``: ``app.web.common.client_network``)."""
    return [
        Limit(
            "signin_address",
            f"{PREFIX}:acesso:email:{same_address(email)}:rede:{network}:hora",
            settings.signin_links_per_address_per_hour,
            HOUR,
        ),
        Limit(
            "signin_client",
            f"{PREFIX}:acesso:cliente:{network}:hora",
            settings.signin_links_per_client_per_hour,
            HOUR,
        ),
    ]


# KEYS: the counters; ARGV: limit, window seconds and amount for each key, in order.
# Returns 0 when every counter had room for its amount (and all were counted), else the 1-based
# index of the first counter without room, the seconds left in its window, and its room left.
_TAKE = """
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


async def take(
    redis: Redis, limits: Sequence[Limit], amounts: Sequence[int] | None = None
) -> Refusal | None:
    """Count one hit (or its amount in ``amounts``) on every limit, or nothing anywhere if any
    lacks the room: then say which. A limit listed twice counts twice (one address twice in a
    batch). Fails open: with Redis away the request is allowed, and the pass logged."""
    merged: dict[str, tuple[Limit, int]] = {}
    for limit, amount in zip(limits, amounts or [1] * len(limits), strict=True):
        previous = merged.get(limit.key)
        merged[limit.key] = (limit, amount + (previous[1] if previous else 0))
    pairs = list(merged.values())
    args: list[str] = []
    for limit, amount in pairs:
        args += [str(limit.limit), str(limit.window_seconds), str(amount)]
    try:
        index, ttl, room = await cast(
            Awaitable[list[int]],
            redis.eval(_TAKE, len(pairs), *(limit.key for limit, _ in pairs), *args),
        )
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; request allowed", extra={"error": str(exc)})
        return None
    if index == 0:
        return None
    refused = pairs[int(index) - 1][0]
    log.info("rate limit reached", extra={"limit": refused.kind})
    return Refusal(refused, max(1, int(ttl)), int(room))


# KEYS: the counters; ARGV: the amount to hand back for each key, in order. A counter never goes
# below zero (its window may have ended and started again in between) and keeps its expiry.
_GIVE_BACK = """
for i, key in ipairs(KEYS) do
  local held = tonumber(redis.call('GET', key) or '0')
  local amount = math.min(held, tonumber(ARGV[i]))
  if amount > 0 then redis.call('DECRBY', key, amount) end
end
return 0
"""


async def give_back(
    redis: Redis, limits: Sequence[Limit], amounts: Sequence[int] | None = None
) -> None:
    """Undo what ``take`` counted on ``limits`` for a request refused after it was counted.

    Why: the per-recipient day protects an address from everyone together; if a refused request
    (409: already invited, not in a state to re-send) kept its unit, anyone could use up an
    address's day with refusals and lock out every real sender. Fails open like ``take``."""
    merged: dict[str, int] = {}
    for limit, amount in zip(limits, amounts or [1] * len(limits), strict=True):
        merged[limit.key] = merged.get(limit.key, 0) + amount
    if not merged:
        return
    try:
        await cast(
            Awaitable[int],
            redis.eval(_GIVE_BACK, len(merged), *merged, *(str(a) for a in merged.values())),
        )
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable; nothing given back", extra={"error": str(exc)})


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
