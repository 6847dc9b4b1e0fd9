"""Bounce receiver heartbeats in Redis: ``/saude`` tells a receiver that died from none at all.

A receiver that stops cleanly removes its entry; one that dies leaves it to go stale, and the
alarm (``bounce_receiver_down``) lasts until a receiver beats again. Without any receiver (a
provider's webhook feeds the reader) there is no entry and no alarm.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

RECEIVERS_KEY = "convites:bounce-receivers"
HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 3 * HEARTBEAT_SECONDS


async def beat(redis: Redis, receiver_id: str) -> None:
    """This receiver is alive now; entries of dead ones go once a live one beats."""
    now = time.time()
    async with redis.pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(RECEIVERS_KEY, "-inf", now - STALE_AFTER_SECONDS)
        pipe.zadd(RECEIVERS_KEY, {receiver_id: now})
        await pipe.execute()


async def forget(redis: Redis, receiver_id: str) -> None:
    await redis.zrem(RECEIVERS_KEY, receiver_id)


async def receivers(redis: Redis) -> tuple[int, int]:
    """(receivers with a fresh beat, receivers known: fresh or dead without saying goodbye)."""
    fresh = await redis.zcount(RECEIVERS_KEY, time.time() - STALE_AFTER_SECONDS, "+inf")
    return int(fresh), int(await redis.zcard(RECEIVERS_KEY))
