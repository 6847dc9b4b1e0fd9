"""Worker heartbeats in Redis: the web can tell "sending is paused" from "sending is slow"."""

from __future__ import annotations

import time

from redis.asyncio import Redis

WORKERS_KEY = "convites:workers"


async def beat(redis: Redis, worker_id: str) -> None:
    """Record that ``worker_id`` is alive now."""
    await redis.zadd(WORKERS_KEY, {worker_id: time.time()})


async def forget(redis: Redis, worker_id: str) -> None:
    """A worker that stops cleanly says so at once instead of going stale."""
    await redis.zrem(WORKERS_KEY, worker_id)


async def live_workers(redis: Redis, heartbeat_seconds: float) -> dict[str, float]:
    """Workers whose last beat is fresher than three intervals, with each beat's age in seconds."""
    now = time.time()
    oldest_fresh = now - 3 * heartbeat_seconds
    # Forget long-dead workers so the set stays small.
    await redis.zremrangebyscore(WORKERS_KEY, "-inf", now - 3600)
    entries = await redis.zrangebyscore(WORKERS_KEY, oldest_fresh, "+inf", withscores=True)
    return {
        (name.decode() if isinstance(name, bytes) else str(name)): now - score
        for name, score in entries
    }
