"""Heartbeats in Redis: which workers and bounce receivers are alive, for ``/saude``, the alarms,
the metrics and the page's "sending is paused" notice.

A sorted set of ids per kind, scored by the last beat; alive while fresher than three intervals.
A clean stop ``forget``s its id, a death leaves it stale: "one died" differs from "none started".
"""

from __future__ import annotations

from redis.asyncio import Redis

from app.clock import utcnow

WORKERS = "convites:workers"
BOUNCE_RECEIVERS = "convites:bounce-receivers"
#: Workers beat every ``WORKER_HEARTBEAT_SECONDS``; bounce receivers have no setting for it.
BOUNCE_RECEIVER_SECONDS = 5.0
#: Ids silent for this long are dropped by the next beat, so a set stays small.
FORGET_AFTER_SECONDS = 3600


async def beat(redis: Redis, key: str, member: str) -> None:
    """Record that ``member`` is alive now."""
    now = utcnow().timestamp()
    async with redis.pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(key, "-inf", now - FORGET_AFTER_SECONDS)
        pipe.zadd(key, {member: now})
        await pipe.execute()


async def forget(redis: Redis, key: str, member: str) -> None:
    """A process that stops cleanly says so at once instead of going stale."""
    await redis.zrem(key, member)


async def alive(redis: Redis, key: str, interval: float) -> dict[str, float]:
    """Ids whose last beat is fresher than three intervals, with each beat's age in seconds."""
    now = utcnow().timestamp()
    entries = await redis.zrangebyscore(key, now - 3 * interval, "+inf", withscores=True)
    return {
        (name.decode() if isinstance(name, bytes) else str(name)): now - score
        for name, score in entries
    }


async def known(redis: Redis, key: str) -> int:
    """Ids not dropped yet: alive, or dead without saying goodbye."""
    return int(await redis.zcard(key))
