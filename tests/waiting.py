"""Waiting for a state that has no event to await: poll it, with one generous overall deadline.

The only home of the tests' polling sleeps. A deadline here is a ceiling for a machine that is
slow today, never a claim about how long something should take: no test asserts elapsed time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Between two looks; short, since the wait ends at the first look that sees the state.
POLL_SECONDS = 0.05


#: What was awaited, for the failure message: text, or a function that says it at the end (the
#: tail of a process's log as it is then).
What = str | Callable[[], str]


async def eventually(
    condition: Callable[[], Awaitable[T]], timeout: float = 20.0, what: What = ""
) -> T:
    """Until ``await condition()`` is truthy, and that value; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (found := await condition()):
        if time.monotonic() > deadline:
            raise AssertionError(_not_within(timeout, what, condition))
        await asyncio.sleep(POLL_SECONDS)
    return found


def until(condition: Callable[[], T], timeout: float = 20.0, what: What = "") -> T:
    """``eventually`` for synchronous code (a thread, a subprocess, a browser test)."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(_not_within(timeout, what, condition))
        time.sleep(POLL_SECONDS)
    return found


def _not_within(timeout: float, what: What, condition: Callable[[], object]) -> str:
    said = what() if callable(what) else what
    return f"not true within {timeout} s: {said or getattr(condition, '__name__', condition)}"
