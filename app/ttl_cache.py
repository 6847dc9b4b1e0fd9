"""One answer that many callers share for a moment, read by one caller at a time.

Every open stream asks whether sending is paused after each wake-up, every poll of a worker
asks whether the team paused it, and anyone may call the public ``/saude`` and ``/metrics``:
without sharing, each ask would be a read of the database or Redis. A ``TtlCache`` reads at most
once per ``max_age`` seconds per process; callers that come while a read runs wait for that one
answer instead of starting their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from app import clock

T = TypeVar("T")


class TtlCache(Generic[T]):
    """The answer of ``read()``, read again when older than ``max_age`` seconds (0: every time)."""

    def __init__(self, read: Callable[[], Awaitable[T]], max_age: float) -> None:
        self.read = read
        self.max_age = max_age
        self._entry: tuple[float, T] | None = None  # (read at, answer)
        self._lock = asyncio.Lock()

    def _fresh(self) -> tuple[float, T] | None:
        entry = self._entry
        if entry is None or clock.monotonic() - entry[0] >= self.max_age:
            return None
        return entry

    async def __call__(self) -> T:
        entry = self._fresh()
        if entry is None:
            async with self._lock:
                entry = self._fresh()
                if entry is None:
                    return await self.read_now()
        return entry[1]

    async def read_now(self) -> T:
        """Read now, not from the shared answer (a page being rendered must not show an older
        state than the moment it is shown), and share the new answer with the other callers."""
        asked_at = clock.monotonic()
        value = await self.read()
        self._entry = (asked_at, value)
        return value
