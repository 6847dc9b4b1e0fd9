"""One answer that many callers share for a moment, read by one caller at a time.

Streams, worker polls and the public ``/saude`` and ``/metrics`` ask often; a ``TtlCache`` reads
at most once per ``max_age`` per process, and callers during a read wait for that one answer.
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
