"""Whether sending is paused: no worker has beaten recently (or Redis, which carries the work,
is down). The page says so instead of letting "enviando…" sound like progress."""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app import clock
from app.heartbeat import live_workers

log = logging.getLogger(__name__)


async def sending_paused(redis: Redis, heartbeat_seconds: float) -> bool:
    """True when no worker has beaten recently (or Redis, which carries the work, is down)."""
    try:
        return not await live_workers(redis, heartbeat_seconds)
    except (RedisError, OSError) as exc:
        log.warning("could not read worker heartbeats", extra={"error": str(exc)})
        return True


class PausedCheck:
    """``sending_paused``, shared by a process's streams.

    Every open stream asks after each wake-up and the answer is the same for all of them, so
    Redis is read at most once per ``max_age`` seconds per process, one reader at a time.
    """

    def __init__(self, redis: Redis, heartbeat_seconds: float, max_age: float = 1.0) -> None:
        self.redis = redis
        self.heartbeat_seconds = heartbeat_seconds
        self.max_age = min(max_age, heartbeat_seconds / 2)
        self._value: bool | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._value is not None and clock.monotonic() - self._read_at < self.max_age

    async def __call__(self) -> bool:
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    await self.read_now()
        assert self._value is not None
        return self._value

    async def read_now(self) -> bool:
        """Read Redis now (a page being rendered), and share the answer with the streams."""
        asked_at = clock.monotonic()
        value = await sending_paused(self.redis, self.heartbeat_seconds)
        self._value, self._read_at = value, asked_at
        return value
