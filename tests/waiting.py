"""Waiting for a state that has no event to await: poll it, with one generous overall deadline.

The only home of the tests' polling sleeps. A deadline here is a ceiling for a machine that is
slow today, never a claim about how long something should take: no test asserts elapsed time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

#: Between two looks; short, since the wait ends at the first look that sees the state.
POLL_SECONDS = 0.05


async def eventually(
    condition: Callable[[], Awaitable[bool]], timeout: float = 20.0, what: str = ""
) -> None:
    """Until ``await condition()`` is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {what or condition.__name__}")
        await asyncio.sleep(POLL_SECONDS)


def until(condition: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """``eventually`` for synchronous code (a thread, a subprocess, a browser test)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {what or condition.__name__}")
        time.sleep(POLL_SECONDS)
