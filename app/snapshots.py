"""Answers that many callers may share for a few seconds: the public ``/saude`` and ``/metrics``.

Both are public and each computation scans the invite tables; without a snapshot, anyone could
make the database count rows as fast as they can send requests. Each named snapshot is
recomputed at most once per ``max_age`` seconds per process, by one caller at a time, while
the others wait for that one answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from app import clock

T = TypeVar("T")


class Snapshots:
    """Named values, each recomputed when older than ``max_age`` (0: every time)."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._values: dict[str, tuple[float, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _fresh(self, name: str) -> bool:
        entry = self._values.get(name)
        return entry is not None and clock.monotonic() - entry[0] < self.max_age

    async def get(self, name: str, compute: Callable[[], Awaitable[T]]) -> T:
        """The snapshot called ``name``, computed by ``compute()`` if there is no fresh one."""
        if not self._fresh(name):
            lock = self._locks.setdefault(name, asyncio.Lock())
            async with lock:
                if not self._fresh(name):
                    started = clock.monotonic()
                    self._values[name] = (started, await compute())
        value: T = self._values[name][1]
        return value
